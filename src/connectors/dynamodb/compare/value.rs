//! DynamoDB values as the validator compares and reports them.
//!
//! Numbers are compared by value, exactly: `N` strings are decimal numbers of up to 38
//! significant digits, which a float cannot hold, so they are normalised (sign, significant
//! digits, exponent) and never converted to `f64`. DynamoDB stores numbers normalised itself
//! (`1.0`, `1.00` and `1e0` are all stored as `1`), but other servers need not, and a source
//! read from one server compared with a target on another must not differ by spelling.
//! Sets (`SS`, `NS`, `BS`) are compared as sets; lists in order; maps by key.
//!
//! Values are rendered as PartiQL for DynamoDB writes them, so that a key pastes into
//! `SELECT * FROM "table" WHERE ...`: names in double quotes, strings in single quotes,
//! numbers as stored, sets in `<< >>`, lists in `[ ]`, maps in `{ }`; binaries, which PartiQL
//! has no literal for, in base64 as `b64'...'`.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use aws_sdk_dynamodb::types::AttributeValue;
use num_bigint::BigInt;

use super::super::item::value_size;

/// Longest rendering of one value in a report; longer ones are cut with their size noted.
pub const MAX_RENDERED: usize = 256;

/// Exponents beyond which two numbers are not subtracted to apply a tolerance (DynamoDB's
/// numbers are within 1E-130 and 1E+126; a server that accepts wilder ones is compared
/// exactly).
const MAX_EXPONENT: i64 = 400;

/// A decimal number, normalised: `±digits × 10^exponent` with no leading or trailing zero in
/// `digits` (empty for zero). Two spellings of one value are equal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Number {
    negative: bool,
    digits: String,
    exponent: i64,
}

impl Number {
    /// Parses a DynamoDB number (`-12.50`, `1E+3`, `.5`); `None` when it is not one.
    pub fn parse(s: &str) -> Option<Self> {
        let (negative, rest) = match s.as_bytes().first()? {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let (mantissa, mut exponent) = match rest.find(['e', 'E']) {
            Some(i) => (&rest[..i], rest[i + 1..].parse::<i64>().ok()?),
            None => (rest, 0),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let all_digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
        if (int.is_empty() && frac.is_empty()) || !all_digits(int) || !all_digits(frac) {
            return None;
        }
        exponent = exponent.checked_sub(i64::try_from(frac.len()).ok()?)?;
        let joined = format!("{int}{frac}");
        let significant = joined.trim_start_matches('0');
        let digits = significant.trim_end_matches('0');
        if digits.is_empty() {
            return Some(Self::zero());
        }
        exponent = exponent.checked_add((significant.len() - digits.len()) as i64)?;
        Some(Self {
            negative,
            digits: digits.to_string(),
            exponent,
        })
    }

    fn zero() -> Self {
        Self {
            negative: false,
            digits: String::new(),
            exponent: 0,
        }
    }

    fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// The value's order of magnitude: the position of its first digit.
    fn magnitude(&self) -> i64 {
        self.digits.len() as i64 + self.exponent
    }

    /// `|self|` compared with `|other|`.
    fn cmp_abs(&self, other: &Self) -> Ordering {
        match (self.is_zero(), other.is_zero()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            (false, false) => {}
        }
        self.magnitude().cmp(&other.magnitude()).then_with(|| {
            // Same magnitude: digit by digit, the shorter padded with zeros.
            let (a, b) = (self.digits.as_bytes(), other.digits.as_bytes());
            let n = a.len().max(b.len());
            (0..n)
                .map(|i| {
                    let x = a.get(i).copied().unwrap_or(b'0');
                    let y = b.get(i).copied().unwrap_or(b'0');
                    x.cmp(&y)
                })
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        })
    }

    /// `|self - other| <= tolerance`, exactly.
    fn within(&self, other: &Self, tolerance: &Number) -> bool {
        if self == other {
            return true;
        }
        let exps = [self.exponent, other.exponent, tolerance.exponent];
        if exps.iter().any(|e| e.abs() > MAX_EXPONENT) {
            return false;
        }
        let low = exps.into_iter().min().expect("three");
        let scaled = |n: &Number| -> BigInt {
            if n.is_zero() {
                return BigInt::from(0);
            }
            let digits: BigInt = n.digits.parse().expect("digits");
            let v = digits * BigInt::from(10).pow((n.exponent - low) as u32);
            if n.negative { -v } else { v }
        };
        let diff = scaled(self) - scaled(other);
        let diff = if diff < BigInt::from(0) { -diff } else { diff };
        diff <= scaled(tolerance)
    }
}

impl Ord for Number {
    fn cmp(&self, other: &Self) -> Ordering {
        let sign = |n: &Number| {
            if n.is_zero() {
                0
            } else if n.negative {
                -1
            } else {
                1
            }
        };
        match sign(self).cmp(&sign(other)) {
            Ordering::Equal if self.negative => other.cmp_abs(self),
            Ordering::Equal => self.cmp_abs(other),
            o => o,
        }
    }
}

impl PartialOrd for Number {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// How far two numbers may be apart and still be equal (`validation.floatingPointTolerance`,
/// which ScyllaDB Migrator applies to DynamoDB numbers too).
#[derive(Debug, Clone, Default)]
pub struct Tolerance(Option<Number>);

impl Tolerance {
    /// A tolerance of `t` (0: numbers must be equal). `t` is taken as the decimal it prints
    /// as (`0.001` is exactly one thousandth, not the float nearest to it).
    pub fn new(t: f64) -> Self {
        if !(t.is_finite() && t > 0.0) {
            return Self(None);
        }
        Self(Number::parse(&format!("{t}")).filter(|n| !n.is_zero()))
    }
}

/// Whether two numbers are equal: by value, within the tolerance. A string that is not a
/// number (which no server should store) equals only itself.
pub fn numbers_equal(a: &str, b: &str, tolerance: &Tolerance) -> bool {
    match (Number::parse(a), Number::parse(b)) {
        (Some(x), Some(y)) => match &tolerance.0 {
            None => x == y,
            Some(t) => x.within(&y, t),
        },
        _ => a == b,
    }
}

/// Whether two values are equal: same type and the same value (see the module's doc).
pub fn equal(a: &AttributeValue, b: &AttributeValue, tolerance: &Tolerance) -> bool {
    use AttributeValue as V;
    match (a, b) {
        (V::S(x), V::S(y)) => x == y,
        (V::N(x), V::N(y)) => numbers_equal(x, y, tolerance),
        (V::B(x), V::B(y)) => x == y,
        (V::Bool(x), V::Bool(y)) => x == y,
        (V::Null(_), V::Null(_)) => true,
        (V::Ss(x), V::Ss(y)) => {
            x.iter().collect::<BTreeSet<_>>() == y.iter().collect::<BTreeSet<_>>()
        }
        (V::Bs(x), V::Bs(y)) => {
            let set = |v: &[aws_sdk_dynamodb::primitives::Blob]| {
                v.iter()
                    .map(|b| b.as_ref().to_vec())
                    .collect::<BTreeSet<_>>()
            };
            set(x) == set(y)
        }
        (V::Ns(x), V::Ns(y)) => number_sets_equal(x, y, tolerance),
        (V::L(x), V::L(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(u, v)| equal(u, v, tolerance))
        }
        (V::M(x), V::M(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, u)| y.get(k).is_some_and(|v| equal(u, v, tolerance)))
        }
        _ => a == b,
    }
}

/// Number sets: equal as sets of values; with a tolerance, sorted and compared pairwise (as
/// ScyllaDB Migrator does).
fn number_sets_equal(x: &[String], y: &[String], tolerance: &Tolerance) -> bool {
    if x.len() != y.len() {
        return false;
    }
    let parsed = |v: &[String]| {
        v.iter()
            .map(|n| Number::parse(n))
            .collect::<Option<Vec<_>>>()
    };
    let (Some(mut a), Some(mut b)) = (parsed(x), parsed(y)) else {
        return x.iter().collect::<BTreeSet<_>>() == y.iter().collect::<BTreeSet<_>>();
    };
    a.sort();
    b.sort();
    match &tolerance.0 {
        None => a == b,
        Some(t) => a.iter().zip(&b).all(|(u, v)| u.within(v, t)),
    }
}

/// A value as PartiQL writes it, for reports (cut at [`MAX_RENDERED`] characters with the
/// value's size noted).
pub fn render(v: &AttributeValue) -> String {
    let mut s = String::new();
    literal(v, &mut s);
    if s.len() > MAX_RENDERED {
        let mut cut = MAX_RENDERED;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str(&format!("… ({} bytes)", value_size(v)));
    }
    s
}

/// An attribute name as PartiQL needs it in a condition: in double quotes, always, since
/// DynamoDB reserves hundreds of common words (`order`, `status`, `name`, `date`, ...) that
/// are valid only quoted.
pub fn name(n: &str) -> String {
    format!("\"{}\"", n.replace('"', "\"\""))
}

fn string(s: &str, out: &mut String) {
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push('\'');
        }
        out.push(c);
        if out.len() > MAX_RENDERED {
            break;
        }
    }
    out.push('\'');
}

fn binary(b: &[u8], out: &mut String) {
    out.push_str("b64'");
    // Enough of it to fill the rendering; the cut notes the size.
    let shown = &b[..b.len().min(MAX_RENDERED)];
    out.push_str(&base64(shown));
    out.push('\'');
}

fn literal(v: &AttributeValue, out: &mut String) {
    use AttributeValue as V;
    let items =
        |out: &mut String, n: usize, open: &str, close: &str, each: &dyn Fn(usize, &mut String)| {
            out.push_str(open);
            for i in 0..n {
                if i > 0 {
                    out.push_str(", ");
                }
                each(i, out);
                if out.len() > MAX_RENDERED {
                    break;
                }
            }
            out.push_str(close);
        };
    match v {
        V::S(s) => string(s, out),
        V::N(n) => out.push_str(n),
        V::B(b) => binary(b.as_ref(), out),
        V::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        V::Null(_) => out.push_str("NULL"),
        V::Ss(ss) => {
            let sorted: Vec<&String> = ss.iter().collect::<BTreeSet<_>>().into_iter().collect();
            items(out, sorted.len(), "<<", ">>", &|i, out| {
                string(sorted[i], out)
            });
        }
        V::Ns(ns) => {
            let mut sorted: Vec<&String> = ns.iter().collect();
            sorted.sort_by(|a, b| match (Number::parse(a), Number::parse(b)) {
                (Some(x), Some(y)) => x.cmp(&y),
                _ => a.cmp(b),
            });
            items(out, sorted.len(), "<<", ">>", &|i, out| {
                out.push_str(sorted[i])
            });
        }
        V::Bs(bs) => {
            let mut sorted: Vec<&[u8]> = bs.iter().map(|b| b.as_ref()).collect();
            sorted.sort();
            items(out, sorted.len(), "<<", ">>", &|i, out| {
                binary(sorted[i], out)
            });
        }
        V::L(l) => items(out, l.len(), "[", "]", &|i, out| literal(&l[i], out)),
        V::M(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            items(out, keys.len(), "{", "}", &|i, out| {
                string(keys[i], out);
                out.push_str(": ");
                literal(&m[keys[i]], out);
            });
        }
        other => out.push_str(&format!("{other:?}")),
    }
}

/// Standard base64 with padding, as DynamoDB's JSON writes binaries.
fn base64(b: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(b)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use aws_sdk_dynamodb::primitives::Blob;

    use super::*;

    fn n(s: &str) -> Number {
        Number::parse(s).unwrap_or_else(|| panic!("{s} parses"))
    }

    #[test]
    fn numbers_are_equal_whatever_their_spelling() {
        let exact = Tolerance::default();
        for (a, b) in [
            ("1", "1.0"),
            ("1", "1.000"),
            ("1", "1e0"),
            ("100", "1E+2"),
            ("100", "1e2"),
            ("0.5", ".5"),
            ("0.5", "5e-1"),
            ("-0", "0"),
            ("0.000", "0"),
            ("-12.50", "-1.25E1"),
            ("+7", "7"),
            ("0012", "12"),
            // 38 significant digits, beyond any float.
            (
                "12345678901234567890123456789012345678",
                "1.2345678901234567890123456789012345678E37",
            ),
            ("1E-130", "0.1e-129"),
            (
                "9.9999999999999999999999999999999999999E+125",
                "99999999999999999999999999999999999999e88",
            ),
        ] {
            assert!(numbers_equal(a, b, &exact), "{a} = {b}");
            assert_eq!(n(a), n(b));
        }
        for (a, b) in [
            ("1", "2"),
            ("1", "-1"),
            ("1", "10"),
            ("0.1", "0.01"),
            // Differ in the 38th digit: a float would call them equal.
            (
                "12345678901234567890123456789012345678",
                "12345678901234567890123456789012345679",
            ),
        ] {
            assert!(!numbers_equal(a, b, &exact), "{a} != {b}");
        }
        assert!(Number::parse("abc").is_none());
        assert!(Number::parse("1.2.3").is_none());
        assert!(Number::parse("").is_none());
        assert!(Number::parse("-").is_none());
        assert!(Number::parse("1e").is_none());
        // Not numbers: equal only to themselves.
        assert!(numbers_equal("x", "x", &exact));
        assert!(!numbers_equal("x", "1", &exact));
    }

    #[test]
    fn numbers_order_by_value() {
        let mut v: Vec<Number> = ["10", "-1.5", "0", "2", "-10", "1e-3", "1.5", "-0.001"]
            .iter()
            .map(|s| n(s))
            .collect();
        v.sort();
        let expected: Vec<Number> = ["-10", "-1.5", "-0.001", "0", "1e-3", "1.5", "2", "10"]
            .iter()
            .map(|s| n(s))
            .collect();
        assert_eq!(v, expected);
    }

    #[test]
    fn a_tolerance_holds_at_its_edge_exactly() {
        let t = Tolerance::new(0.001);
        assert!(numbers_equal("1.000", "1.001", &t));
        assert!(numbers_equal("1.001", "1", &t));
        assert!(!numbers_equal("1.000", "1.0011", &t));
        assert!(numbers_equal("-0.0005", "0.0005", &t));
        // Far beyond a float's precision, still exact.
        assert!(numbers_equal(
            "12345678901234567890123456789012345678",
            "12345678901234567890123456789012345678.001",
            &t
        ));
        assert!(!numbers_equal(
            "12345678901234567890123456789012345678",
            "12345678901234567890123456789012345678.002",
            &t
        ));
        assert!(Tolerance::new(0.0).0.is_none());
        assert!(Tolerance::new(f64::NAN).0.is_none());
    }

    #[test]
    fn sets_are_compared_as_sets() {
        let exact = Tolerance::default();
        let ss = |v: &[&str]| AttributeValue::Ss(v.iter().map(|s| s.to_string()).collect());
        let ns = |v: &[&str]| AttributeValue::Ns(v.iter().map(|s| s.to_string()).collect());
        let bs =
            |v: &[&[u8]]| AttributeValue::Bs(v.iter().map(|b| Blob::new(b.to_vec())).collect());
        assert!(equal(&ss(&["a", "b"]), &ss(&["b", "a"]), &exact));
        assert!(!equal(&ss(&["a", "b"]), &ss(&["a", "c"]), &exact));
        assert!(!equal(&ss(&["a"]), &ss(&["a", "b"]), &exact));
        assert!(equal(&ns(&["1", "2.50"]), &ns(&["2.5", "1.0"]), &exact));
        assert!(!equal(&ns(&["1", "2"]), &ns(&["1", "3"]), &exact));
        assert!(equal(
            &ns(&["1", "2"]),
            &ns(&["2.0005", "1"]),
            &Tolerance::new(0.001)
        ));
        assert!(equal(
            &bs(&[b"\x00", b"\x01"]),
            &bs(&[b"\x01", b"\x00"]),
            &exact
        ));
        assert!(!equal(&bs(&[b"\x00"]), &bs(&[b"\x02"]), &exact));
        // A set is not a list of the same elements, a string is not a number.
        assert!(!equal(
            &ss(&["a"]),
            &AttributeValue::L(vec![AttributeValue::S("a".into())]),
            &exact
        ));
        assert!(!equal(
            &AttributeValue::S("1".into()),
            &AttributeValue::N("1".into()),
            &exact
        ));
    }

    #[test]
    fn lists_in_order_and_maps_by_key_with_numbers_by_value_inside() {
        let exact = Tolerance::default();
        let l = |v: &[&str]| {
            AttributeValue::L(v.iter().map(|s| AttributeValue::N(s.to_string())).collect())
        };
        assert!(equal(&l(&["1", "2"]), &l(&["1.0", "2"]), &exact));
        assert!(!equal(&l(&["1", "2"]), &l(&["2", "1"]), &exact));
        let m = |pairs: &[(&str, AttributeValue)]| {
            AttributeValue::M(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect::<HashMap<_, _>>(),
            )
        };
        let a = m(&[("x", l(&["1"])), ("y", AttributeValue::Null(true))]);
        let b = m(&[("y", AttributeValue::Null(true)), ("x", l(&["1e0"]))]);
        assert!(equal(&a, &b, &exact));
        let c = m(&[("x", l(&["1"])), ("z", AttributeValue::Null(true))]);
        assert!(!equal(&a, &c, &exact));
        assert!(!equal(&a, &m(&[("x", l(&["1"]))]), &exact));
    }

    #[test]
    fn values_render_as_partiql() {
        let v = AttributeValue::M(
            [
                ("s".to_string(), AttributeValue::S("it's".into())),
                ("n".to_string(), AttributeValue::N("-1.5E3".into())),
                (
                    "b".to_string(),
                    AttributeValue::B(Blob::new(vec![0, 1, 2, 255])),
                ),
                ("t".to_string(), AttributeValue::Bool(true)),
                ("z".to_string(), AttributeValue::Null(true)),
                (
                    "ss".to_string(),
                    AttributeValue::Ss(vec!["b".into(), "a".into()]),
                ),
                (
                    "ns".to_string(),
                    AttributeValue::Ns(vec!["10".into(), "9".into(), "-1".into()]),
                ),
                (
                    "bs".to_string(),
                    AttributeValue::Bs(vec![Blob::new(vec![2]), Blob::new(vec![1])]),
                ),
                (
                    "l".to_string(),
                    AttributeValue::L(vec![
                        AttributeValue::N("1".into()),
                        AttributeValue::S("x".into()),
                    ]),
                ),
            ]
            .into_iter()
            .collect(),
        );
        assert_eq!(
            render(&v),
            "{'b': b64'AAEC/w==', 'bs': <<b64'AQ==', b64'Ag=='>>, 'l': [1, 'x'], 'n': -1.5E3, \
             'ns': <<-1, 9, 10>>, 's': 'it''s', 'ss': <<'a', 'b'>>, 't': true, 'z': NULL}"
        );
        let long = AttributeValue::S("x".repeat(1000));
        let r = render(&long);
        assert!(r.ends_with("… (1000 bytes)") && r.len() < 300, "{r}");
        assert_eq!(name("order"), "\"order\"");
        assert_eq!(name("a\"b"), "\"a\"\"b\"");
    }

    #[test]
    fn base64_pads() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
