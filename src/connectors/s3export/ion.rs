//! Amazon Ion data files (`outputFormat: ION`). AWS writes one item per line, each line its
//! own Ion stream (`$ion_1_0 {Item:{…}}`): numbers as Ion decimals (`103.`, `2d3`), binaries
//! as blobs, maps as structs, and sets as lists annotated `$dynamodb_SS`, `$dynamodb_NS` or
//! `$dynamodb_BS`.

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use ion_rs::{Element, IonType};

use crate::connectors::dynamodb::item::Item;

/// The item of one line (`$ion_1_0 {Item:{…}}`).
pub fn parse_line(line: &str) -> Result<Item, String> {
    let values = Element::read_all(line).map_err(|e| format!("not Ion text: {e}"))?;
    let mut values = values.iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err("expected one Ion value on the line".into());
    };
    let item = value
        .as_struct()
        .and_then(|s| s.get("Item"))
        .and_then(Element::as_struct)
        .ok_or("expected a struct with an \"Item\" struct")?;
    decode_struct(item)
}

fn decode_struct(s: &ion_rs::Struct) -> Result<Item, String> {
    s.fields()
        .map(|(name, v)| {
            let name = name.text().ok_or("a field without a name")?;
            decode(v)
                .map(|d| (name.to_string(), d))
                .map_err(|e| format!("attribute {name:?}: {e}"))
        })
        .collect()
}

fn annotated(e: &Element, name: &str) -> bool {
    e.annotations().iter().any(|a| a.text() == Some(name))
}

fn elements(e: &Element) -> Result<Vec<&Element>, String> {
    Ok(e.as_sequence()
        .ok_or_else(|| format!("expected a list, found {}", e.ion_type()))?
        .iter()
        .collect())
}

fn text(e: &Element) -> Result<String, String> {
    e.as_text()
        .map(str::to_string)
        .ok_or_else(|| format!("expected a string, found {}", e.ion_type()))
}

fn blob(e: &Element) -> Result<Blob, String> {
    e.as_blob()
        .map(|b| Blob::new(b.to_vec()))
        .ok_or_else(|| format!("expected a blob, found {}", e.ion_type()))
}

/// A number as DynamoDB reads one, from an Ion decimal or integer, digit for digit.
fn number(e: &Element) -> Result<String, String> {
    if let Some(d) = e.as_decimal() {
        return Ok(decimal_text(&d.to_string()));
    }
    if let Some(i) = e.as_int() {
        return Ok(i.to_string());
    }
    Err(format!(
        "expected a number (an Ion decimal or integer), found {}",
        e.ion_type()
    ))
}

/// An Ion decimal's text (`103.`, `1.50`, `2d3`, `-1.5d-7`) as a DynamoDB number (`103`,
/// `1.50`, `2E3`, `-1.5E-7`).
fn decimal_text(ion: &str) -> String {
    let upper = ion.replace(['d', 'D'], "E");
    let (mantissa, exponent) = match upper.split_once('E') {
        Some((m, e)) => (m, Some(e)),
        None => (upper.as_str(), None),
    };
    let mantissa = mantissa.strip_suffix('.').unwrap_or(mantissa);
    match exponent {
        Some(e)
            if e.trim_start_matches(['+', '-'])
                .trim_start_matches('0')
                .is_empty() =>
        {
            mantissa.to_string()
        }
        Some(e) => format!("{mantissa}E{e}"),
        None => mantissa.to_string(),
    }
}

fn decode(e: &Element) -> Result<AttributeValue, String> {
    if e.is_null() {
        return Ok(AttributeValue::Null(true));
    }
    if annotated(e, "$dynamodb_SS") {
        return Ok(AttributeValue::Ss(
            elements(e)?
                .into_iter()
                .map(text)
                .collect::<Result<_, _>>()?,
        ));
    }
    if annotated(e, "$dynamodb_NS") {
        return Ok(AttributeValue::Ns(
            elements(e)?
                .into_iter()
                .map(number)
                .collect::<Result<_, _>>()?,
        ));
    }
    if annotated(e, "$dynamodb_BS") {
        return Ok(AttributeValue::Bs(
            elements(e)?
                .into_iter()
                .map(blob)
                .collect::<Result<_, _>>()?,
        ));
    }
    Ok(match e.ion_type() {
        IonType::String | IonType::Symbol => AttributeValue::S(text(e)?),
        IonType::Decimal | IonType::Int => AttributeValue::N(number(e)?),
        IonType::Blob => AttributeValue::B(blob(e)?),
        IonType::Bool => AttributeValue::Bool(e.as_bool().unwrap_or_default()),
        IonType::List => AttributeValue::L(
            elements(e)?
                .into_iter()
                .map(decode)
                .collect::<Result<_, _>>()?,
        ),
        IonType::Struct => AttributeValue::M(decode_struct(
            e.as_struct().expect("a struct's value is a struct"),
        )?),
        other => {
            return Err(format!(
                "an Ion {other} has no DynamoDB type (expected a string, decimal, blob, bool, null, list or struct)"
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn awss_documented_line_reads() {
        let line = r#"$ion_1_0 {Item:{Authors:$dynamodb_SS::["Author1","Author2"],Dimensions:"8.5 x 11.0 x 1.5",ISBN:"333-3333333333",Id:103.,InPublication:false,PageCount:6d2,Price:2d3,ProductCategory:"Book",Title:"Book 103 Title"}}"#;
        let item = parse_line(line).unwrap();
        assert_eq!(item["Id"], AttributeValue::N("103".into()));
        assert_eq!(item["PageCount"], AttributeValue::N("6E2".into()));
        assert_eq!(
            item["Authors"],
            AttributeValue::Ss(vec!["Author1".into(), "Author2".into()])
        );
        assert_eq!(item["InPublication"], AttributeValue::Bool(false));
        assert_eq!(item.len(), 9);
    }

    #[test]
    fn every_type_reads_and_bad_values_are_named() {
        let line = r#"$ion_1_0 {Item:{id:"k",n:-1.50,i:42,e:-1.5d-7,z:0d0,b:{{AAEC/w==}},nul:null,t:true,l:["x",1.,null],m:{"a b":{c:"d"}},ns:$dynamodb_NS::[1.,2.5],bs:$dynamodb_BS::[{{AA==}}]}}"#;
        let item = parse_line(line).unwrap();
        assert_eq!(item["n"], AttributeValue::N("-1.50".into()));
        assert_eq!(item["i"], AttributeValue::N("42".into()));
        assert_eq!(item["e"], AttributeValue::N("-1.5E-7".into()));
        assert_eq!(item["z"], AttributeValue::N("0".into()));
        assert_eq!(item["b"], AttributeValue::B(Blob::new(vec![0, 1, 2, 255])));
        assert_eq!(item["nul"], AttributeValue::Null(true));
        assert_eq!(
            item["ns"],
            AttributeValue::Ns(vec!["1".into(), "2.5".into()])
        );
        let AttributeValue::M(m) = &item["m"] else {
            panic!()
        };
        assert!(m.contains_key("a b"));
        let e = parse_line(r#"{Item:{t:2024-01-01T}}"#).unwrap_err();
        assert!(e.contains("\"t\"") && e.contains("timestamp"), "{e}");
        assert!(parse_line("{Item:").unwrap_err().contains("not Ion"));
        assert!(parse_line("{x:1}").unwrap_err().contains("Item"));
    }
}
