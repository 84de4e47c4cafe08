//! Items as the SDK holds them, their size by DynamoDB's rules, attribute renames and TTL.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

/// One item: attribute name to value.
pub type Item = HashMap<String, AttributeValue>;

/// Size of an item by DynamoDB's accounting (attribute names plus values), which is what
/// capacity units and the 400 KB limit count.
pub fn item_size(item: &Item) -> usize {
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

/// Size of one value by DynamoDB's accounting.
pub fn value_size(v: &AttributeValue) -> usize {
    match v {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => number_size(n),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::Ss(ss) => ss.iter().map(String::len).sum(),
        AttributeValue::Ns(ns) => ns.iter().map(|n| number_size(n)).sum(),
        AttributeValue::Bs(bs) => bs.iter().map(|b| b.as_ref().len()).sum(),
        AttributeValue::L(l) => 3 + l.iter().map(|v| 1 + value_size(v)).sum::<usize>(),
        AttributeValue::M(m) => {
            3 + m
                .iter()
                .map(|(k, v)| 1 + k.len() + value_size(v))
                .sum::<usize>()
        }
        _ => 0,
    }
}

/// Numbers are stored in about one byte per two significant digits, plus one.
fn number_size(n: &str) -> usize {
    let digits = n
        .trim_start_matches(['-', '+'])
        .split(['e', 'E'])
        .next()
        .unwrap_or("")
        .chars()
        .filter(char::is_ascii_digit)
        .count();
    digits.div_ceil(2) + 1
}

/// Renames attributes of `item` (source name to target name), in place.
pub fn rename(item: &mut Item, renames: &[(String, String)]) {
    if renames.is_empty() {
        return;
    }
    // Take all first, so that swapping two names works.
    let taken: Vec<(String, AttributeValue)> = renames
        .iter()
        .filter_map(|(from, to)| item.remove(from).map(|v| (to.clone(), v)))
        .collect();
    item.extend(taken);
}

/// Whether the item's TTL attribute (epoch seconds, a number) is at or before `now_s`: DynamoDB
/// deletes such items by itself, so they are not copied. An attribute that is not a number is
/// not a TTL, as DynamoDB treats it.
pub fn expired(item: &Item, ttl_attribute: Option<&str>, now_s: i64) -> bool {
    let Some(name) = ttl_attribute else {
        return false;
    };
    match item.get(name) {
        Some(AttributeValue::N(n)) => n
            .parse::<f64>()
            .is_ok_and(|t| t.is_finite() && t > 0.0 && t <= now_s as f64),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_dynamodb_rules() {
        let mut item = Item::new();
        item.insert("id".into(), AttributeValue::S("abc".into()));
        item.insert("n".into(), AttributeValue::N("12345".into()));
        item.insert("b".into(), AttributeValue::Bool(true));
        // 2+3, 1+(3+1), 1+1
        assert_eq!(item_size(&item), 5 + 5 + 2);
        let l = AttributeValue::L(vec![AttributeValue::S("x".into())]);
        assert_eq!(value_size(&l), 3 + 1 + 1);
    }

    #[test]
    fn renames_swap() {
        let mut item = Item::new();
        item.insert("a".into(), AttributeValue::S("1".into()));
        item.insert("b".into(), AttributeValue::S("2".into()));
        rename(
            &mut item,
            &[("a".into(), "b".into()), ("b".into(), "a".into())],
        );
        assert_eq!(item["a"], AttributeValue::S("2".into()));
        assert_eq!(item["b"], AttributeValue::S("1".into()));
    }

    #[test]
    fn ttl_in_the_past_is_expired() {
        let mut item = Item::new();
        item.insert("exp".into(), AttributeValue::N("100".into()));
        assert!(expired(&item, Some("exp"), 200));
        assert!(!expired(&item, Some("exp"), 50));
        assert!(!expired(&item, None, 200));
        item.insert("exp".into(), AttributeValue::S("100".into()));
        assert!(!expired(&item, Some("exp"), 200));
    }
}
