//! The export format of DynamoDB's "export to S3", as AWS documents it
//! (`S3DataExport.Output.html`): a manifest summary naming a manifest of data files, one JSON
//! object per line, and gzipped data files of one `{"Item":{…}}` per line in DynamoDB JSON.

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::connectors::dynamodb::item::Item;

/// The version string AWS writes in every manifest summary.
pub const VERSION: &str = "2020-06-30";
/// `outputFormat` of DynamoDB JSON data files.
pub const DYNAMODB_JSON: &str = "DYNAMODB_JSON";
/// `outputFormat` of Amazon Ion data files.
pub const ION: &str = "ION";
/// `exportType` of a full export (the only kind a table can be loaded from).
pub const FULL_EXPORT: &str = "FULL_EXPORT";

/// `manifest-summary.json`: what the export holds and where its manifest of files is.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Format version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Key of the manifest of data files: the full key in AWS's exports, relative to the
    /// summary in ScyllaDB Migrator's.
    pub manifest_files_s3_key: String,
    /// Items in the export.
    pub item_count: u64,
    /// `DYNAMODB_JSON` or `ION`.
    pub output_format: String,
    /// `FULL_EXPORT` or `INCREMENTAL_EXPORT`; absent in older exports (full).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export_type: Option<String>,
    /// The rest, kept as read (ARNs, times, key schema, ...).
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// One line of `manifest-files.json`: a data file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DataFile {
    /// Items in the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_count: Option<u64>,
    /// Base64 of the MD5 digest of the file's bytes (compressed, as stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md5_checksum: Option<String>,
    /// The S3 ETag AWS recorded (not checked: a multipart upload's ETag is no digest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// Key of the file: full, or relative to the summary.
    pub data_file_s3_key: String,
}

/// Reads the lines of a manifest of data files; `name` is the manifest's, for messages.
pub fn parse_manifest_files(name: &str, text: &str) -> Result<Vec<DataFile>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str::<DataFile>(line)
                .map_err(|e| format!("{name}, line {}: {e}", i + 1))
        })
        .collect()
}

/// The item of one data file line (`{"Item":{…}}`).
pub fn parse_line(line: &str) -> Result<Item, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let item = v
        .get("Item")
        .and_then(Value::as_object)
        .ok_or("expected an object with an \"Item\" object")?;
    decode_map(item)
}

fn decode_map(m: &Map<String, Value>) -> Result<Item, String> {
    m.iter()
        .map(|(k, v)| {
            decode_value(v)
                .map(|d| (k.clone(), d))
                .map_err(|e| format!("attribute {k:?}: {e}"))
        })
        .collect()
}

fn strings(v: &Value) -> Result<Vec<String>, String> {
    v.as_array()
        .ok_or("expected a list of strings")?
        .iter()
        .map(|s| {
            s.as_str()
                .map(str::to_string)
                .ok_or_else(|| "expected a list of strings".to_string())
        })
        .collect()
}

fn blob(s: &str) -> Result<Blob, String> {
    STANDARD
        .decode(s)
        .map(Blob::new)
        .map_err(|e| format!("invalid base64: {e}"))
}

fn decode_value(v: &Value) -> Result<AttributeValue, String> {
    let obj = v
        .as_object()
        .ok_or("expected an object such as {\"S\": …}")?;
    if obj.len() != 1 {
        return Err(format!("expected one type descriptor, found {}", obj.len()));
    }
    let (t, v) = obj.iter().next().expect("one entry");
    let text = || {
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("{t}: expected a string"))
    };
    Ok(match t.as_str() {
        "S" => AttributeValue::S(text()?),
        "N" => AttributeValue::N(text()?),
        "B" => AttributeValue::B(blob(&text()?)?),
        "BOOL" => AttributeValue::Bool(v.as_bool().ok_or("BOOL: expected true or false")?),
        "NULL" => AttributeValue::Null(true),
        "SS" => AttributeValue::Ss(strings(v)?),
        "NS" => AttributeValue::Ns(strings(v)?),
        "BS" => AttributeValue::Bs(
            strings(v)?
                .iter()
                .map(|s| blob(s))
                .collect::<Result<_, _>>()?,
        ),
        "L" => AttributeValue::L(
            v.as_array()
                .ok_or("L: expected a list")?
                .iter()
                .map(decode_value)
                .collect::<Result<_, _>>()?,
        ),
        "M" => AttributeValue::M(decode_map(v.as_object().ok_or("M: expected an object")?)?),
        other => return Err(format!("unknown type descriptor {other:?}")),
    })
}

/// One data file line for `item`, without its newline.
pub fn encode_line(item: &Item) -> Result<String, String> {
    let mut line = Map::new();
    line.insert("Item".into(), Value::Object(encode_map(item)?));
    Ok(Value::Object(line).to_string())
}

fn encode_map(m: &HashMap<String, AttributeValue>) -> Result<Map<String, Value>, String> {
    // Sorted, so that the same item is always the same line.
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            encode_value(&m[k])
                .map(|v| (k.clone(), v))
                .map_err(|e| format!("attribute {k:?}: {e}"))
        })
        .collect()
}

fn encode_value(v: &AttributeValue) -> Result<Value, String> {
    let b64 = |b: &Blob| Value::String(STANDARD.encode(b.as_ref()));
    let list = |v: &[String]| Value::Array(v.iter().cloned().map(Value::String).collect());
    let (t, v) = match v {
        AttributeValue::S(s) => ("S", Value::String(s.clone())),
        AttributeValue::N(n) => ("N", Value::String(n.clone())),
        AttributeValue::B(b) => ("B", b64(b)),
        AttributeValue::Bool(b) => ("BOOL", Value::Bool(*b)),
        AttributeValue::Null(_) => ("NULL", Value::Bool(true)),
        AttributeValue::Ss(s) => ("SS", list(s)),
        AttributeValue::Ns(s) => ("NS", list(s)),
        AttributeValue::Bs(s) => ("BS", Value::Array(s.iter().map(b64).collect())),
        AttributeValue::L(l) => (
            "L",
            Value::Array(l.iter().map(encode_value).collect::<Result<_, _>>()?),
        ),
        AttributeValue::M(m) => ("M", Value::Object(encode_map(m)?)),
        other => return Err(format!("a value of an unknown type: {other:?}")),
    };
    let mut o = Map::new();
    o.insert(t.into(), v);
    Ok(Value::Object(o))
}

/// Base64 of the MD5 digest of `bytes`, as manifests record a file's checksum.
pub fn md5_base64(digest: &[u8]) -> String {
    STANDARD.encode(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_through_a_line() {
        let line = r#"{"Item":{"id":{"S":"K3TXQk84Si"},"a":{"BOOL":false},"b":{"NULL":true},"c":{"SS":["8gfX8dh0xa","fRjHZJ2Ce9"]},"d":{"NS":["3","2"]},"e":{"L":[{"N":"1"},{"S":"Dsb87qc6Es"}]},"f":{"M":{"h":{"NULL":true},"i":{"BOOL":true},"g":{"N":"9"}}},"j":{"B":"aGVsbG8="},"k":{"BS":["aXMgZmFzdA==","c2N5bGxhZGI="]}}}"#;
        let item = parse_line(line).unwrap();
        assert_eq!(item["j"], AttributeValue::B(Blob::new(b"hello".to_vec())));
        assert_eq!(item["d"], AttributeValue::Ns(vec!["3".into(), "2".into()]));
        let again = parse_line(&encode_line(&item).unwrap()).unwrap();
        assert_eq!(again, item);
    }

    #[test]
    fn bad_lines_name_the_attribute() {
        let e = parse_line(r#"{"Item":{"x":{"M":{"y":{"Q":"1"}}}}}"#).unwrap_err();
        assert!(
            e.contains("\"x\"") && e.contains("\"y\"") && e.contains("\"Q\""),
            "{e}"
        );
        assert!(
            parse_line(r#"{"id":{"S":"a"}}"#)
                .unwrap_err()
                .contains("Item")
        );
        assert!(
            parse_line(r#"{"Item":{"b":{"B":"***"}}}"#)
                .unwrap_err()
                .contains("base64")
        );
    }

    #[test]
    fn manifests_of_aws_and_of_migrator_read() {
        let aws = r#"{"itemCount":3,"md5Checksum":"rzAeIrtALbOlNdK5Hh8tgA==","etag":"d1663e415aedcbf3c4977cde7002d2bf-1","dataFileS3Key":"dynamodb-export/AWSDynamoDB/01715685260608-c488b4e1/data/uimbi7eofu2b5kzkxe63gsvb6i.json.gz"}"#;
        let migrator = r#"{"itemCount":2,"dataFileS3Key":"data/00000.json.gz"}"#;
        let files = parse_manifest_files("m", &format!("{aws}\n{migrator}\n")).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[1].data_file_s3_key, "data/00000.json.gz");
        let e = parse_manifest_files("m", "{}\n{").unwrap_err();
        assert!(e.starts_with("m, line 1:"), "{e}");
    }
}
