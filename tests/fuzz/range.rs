//! The `Range` header parser of a source serving a file, and the `If-Range` comparison.

use std::time::{Duration, UNIX_EPOCH};

use drover::livemigration::range::{RangeRequest, Validator, invalid_message, parse};
use proptest::prelude::*;

use crate::driver;

/// A number as a header may write it: digits of any length (past `u64`), or a small one.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        (0u64..2000).prop_map(|n| n.to_string()),
        "[0-9]{15,40}",
        Just(String::new()),
        "[ +0-9a-f\u{663}]{0,6}",
    ]
}

fn headers() -> impl Strategy<Value = String> {
    let structured = (
        proptest::sample::select(vec![
            "bytes=", "bytes=", "bytes=", "Bytes=", " bytes=", "bytes= ", "bytes:", "items=", "",
        ]),
        number(),
        proptest::sample::select(vec!["-", "-", "-", "--", "", " - ", "\u{2013}"]),
        number(),
        proptest::sample::select(vec!["", "", ",", ", 0-1", ",-5", " ", "\t", "\0"]),
    )
        .prop_map(|(unit, a, dash, b, tail)| format!("{unit}{a}{dash}{b}{tail}"));
    prop_oneof![
        6 => structured,
        2 => "(bytes=)?[0-9 ,+-]{0,40}",
        1 => "\\PC{0,80}",
        1 => ".{0,8000}",
    ]
}

fn lengths() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..4, 0u64..100_000, any::<u64>(), Just(u64::MAX)]
}

fn check((header, len, if_range, secs): (String, u64, String, u64)) -> Result<(), TestCaseError> {
    let parsed = parse(Some(&header), len);
    match parsed {
        RangeRequest::Part { start, end } => {
            prop_assert!(
                start <= end && end < len,
                "{header:?} on {len}: {start}-{end}"
            );
            // Only what is written as one range of digits is taken.
            let spec = header.trim().strip_prefix("bytes=");
            prop_assert!(
                spec.is_some_and(|s| s.bytes().all(|b| b.is_ascii_digit() || b == b'-')),
                "{header:?} taken as {start}-{end}"
            );
        }
        RangeRequest::Whole => prop_assert!(false, "a header is never the whole file: {header:?}"),
        RangeRequest::Unsatisfiable | RangeRequest::Invalid => {}
    }
    // Round trip: a range inside the file, written as a header, reads back as itself.
    if len > 0 {
        let (a, b) = (secs % len, (secs / 3) % len);
        let (a, b) = (a.min(b), a.max(b));
        prop_assert_eq!(
            parse(Some(&format!("bytes={a}-{b}")), len),
            RangeRequest::Part { start: a, end: b }
        );
    }
    // The 416 message, as the API answers it, keeps its bound.
    let shown = drover::fuzzing::answered(invalid_message(&header));
    prop_assert!(
        shown.len() <= drover::jobfile::MAX_ECHO + 40,
        "a 416 message of {} bytes",
        shown.len()
    );
    // If-Range: any value compared with any version, no panic; a weak tag never matches.
    let v = Validator::new(
        len,
        UNIX_EPOCH + Duration::from_secs(secs % 253_402_300_799),
    );
    let now = UNIX_EPOCH + Duration::from_secs(253_402_300_799);
    let matched = v.matches(&if_range, now);
    if if_range.trim().starts_with("W/") {
        prop_assert!(!matched);
    }
    Ok(())
}

#[test]
fn range() {
    let inputs = (
        headers(),
        lengths(),
        prop_oneof![
            "\\PC{0,40}",
            "\"[0-9a-f.-]{0,30}\"",
            "W/\"[0-9a-f.-]{0,30}\"",
            Just("Thu, 01 Jan 1970 00:00:00 GMT".to_string())
        ],
        any::<u64>(),
    );
    driver::run("range", inputs, 600, check);
}
