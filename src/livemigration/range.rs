//! Single byte ranges of `Range` request headers, as Cassandra Sidecar takes them: exactly
//! one of `bytes=a-b`, `bytes=a-`, `bytes=-n`; anything else (several ranges, another unit,
//! spaces, `a > b`) is refused with 416 rather than answered with the whole file. And the
//! validators that `If-Range` compares.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a `Range` header asks of a file of a given length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeRequest {
    /// No range: send the whole file (200).
    Whole,
    /// Bytes `start..=end`, inside the file (206, or 200 when that is the whole file).
    Part {
        /// First byte.
        start: u64,
        /// Last byte, included.
        end: u64,
    },
    /// The range lies outside the file (416).
    Unsatisfiable,
    /// Not one range of a form served (416, with [`invalid_message`]).
    Invalid,
}

/// Sidecar's message for a `Range` header it does not take.
pub fn invalid_message(header: &str) -> String {
    format!(
        "Invalid range header: {header}. Supported Range formats are bytes=<start>-<end>, bytes=<start>-, bytes=-<suffix-length>"
    )
}

/// Interprets `header` (the `Range` header's value, if any) for a file of `len` bytes. An
/// end beyond the file is clamped to its last byte.
pub fn parse(header: Option<&str>, len: u64) -> RangeRequest {
    let Some(header) = header else {
        return RangeRequest::Whole;
    };
    let Some((first, last)) = header
        .trim()
        .strip_prefix("bytes=")
        .and_then(|spec| spec.split_once('-'))
    else {
        return RangeRequest::Invalid;
    };
    // Digits only: no sign, no space, no second range.
    let number = |s: &str| -> Option<Option<u64>> {
        if s.is_empty() {
            Some(None)
        } else if s.bytes().all(|b| b.is_ascii_digit()) {
            s.parse().ok().map(Some)
        } else {
            None
        }
    };
    let (Some(first), Some(last)) = (number(first), number(last)) else {
        return RangeRequest::Invalid;
    };
    match (first, last) {
        (None, None) => RangeRequest::Invalid,
        // bytes=-n: the last n bytes.
        (None, Some(0)) => RangeRequest::Unsatisfiable,
        (None, Some(_)) if len == 0 => RangeRequest::Unsatisfiable,
        (None, Some(n)) => RangeRequest::Part {
            start: len.saturating_sub(n),
            end: len - 1,
        },
        // bytes=a-: from a to the end.
        (Some(a), None) if a < len => RangeRequest::Part {
            start: a,
            end: len - 1,
        },
        (Some(_), None) => RangeRequest::Unsatisfiable,
        // bytes=a-b, b clamped to the end.
        (Some(a), Some(b)) if a > b => RangeRequest::Invalid,
        (Some(a), Some(_)) if a >= len => RangeRequest::Unsatisfiable,
        (Some(a), Some(b)) => RangeRequest::Part {
            start: a,
            end: b.min(len - 1),
        },
    }
}

/// What tells one version of a file from another, for `ETag`, `Last-Modified` and
/// `If-Range`: the entity tag is made of the size and the modification time to the
/// nanosecond (SSTables are written once, so either changes when the content does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validator {
    /// The strong entity tag, quotes included.
    pub etag: String,
    /// The modification time, kept between the epoch and the year 9999 (what an HTTP date
    /// can say).
    pub modified: SystemTime,
}

/// The latest time an HTTP date can name: 9999-12-31T23:59:59Z.
const LAST_HTTP_DATE: Duration = Duration::from_secs(253_402_300_799);

impl Validator {
    /// The validator of a file of `len` bytes modified at `modified`.
    pub fn new(len: u64, modified: SystemTime) -> Self {
        let since = modified
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .min(LAST_HTTP_DATE);
        Self {
            etag: format!(
                "\"{len:x}-{:x}.{:x}\"",
                since.as_secs(),
                since.subsec_nanos()
            ),
            modified: UNIX_EPOCH + since,
        }
    }

    /// The validator of a file as its metadata describes it.
    pub fn of(meta: &std::fs::Metadata) -> Self {
        Self::new(meta.len(), meta.modified().unwrap_or(UNIX_EPOCH))
    }

    /// `Last-Modified`, an HTTP date (whole seconds).
    pub fn last_modified(&self) -> String {
        httpdate::fmt_http_date(self.modified)
    }

    /// Whether an `If-Range` value names this version, `now` being the current time. An
    /// entity tag must be equal (a weak one never matches, RFC 9110 §13.1.5). A date must be
    /// this `Last-Modified` exactly, and the file must have been modified over a second ago:
    /// a date has whole seconds, so a change within that second would go unseen.
    pub fn matches(&self, if_range: &str, now: SystemTime) -> bool {
        let value = if_range.trim();
        if value.starts_with('"') {
            return value == self.etag;
        }
        if value.starts_with("W/") {
            return false;
        }
        let Ok(date) = httpdate::parse_http_date(value) else {
            return false;
        };
        let modified = self.modified.duration_since(UNIX_EPOCH).unwrap_or_default();
        let whole_seconds = UNIX_EPOCH + Duration::from_secs(modified.as_secs());
        date == whole_seconds && now >= whole_seconds + Duration::from_secs(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_three_forms() {
        assert_eq!(
            parse(Some("bytes=0-9"), 100),
            RangeRequest::Part { start: 0, end: 9 }
        );
        assert_eq!(
            parse(Some("bytes=90-"), 100),
            RangeRequest::Part { start: 90, end: 99 }
        );
        assert_eq!(
            parse(Some("bytes=-10"), 100),
            RangeRequest::Part { start: 90, end: 99 }
        );
        assert_eq!(
            parse(Some("bytes=-1000"), 100),
            RangeRequest::Part { start: 0, end: 99 }
        );
        assert_eq!(
            parse(Some("bytes=50-1000"), 100),
            RangeRequest::Part { start: 50, end: 99 }
        );
    }

    /// Sidecar answers 416 to every header it does not take (drover used to send the whole
    /// file for a malformed one or for several ranges).
    #[test]
    fn unsatisfiable_and_invalid() {
        assert_eq!(parse(Some("bytes=100-"), 100), RangeRequest::Unsatisfiable);
        assert_eq!(
            parse(Some("bytes=100-200"), 100),
            RangeRequest::Unsatisfiable
        );
        assert_eq!(parse(Some("bytes=-0"), 100), RangeRequest::Unsatisfiable);
        assert_eq!(parse(Some("bytes=0-"), 0), RangeRequest::Unsatisfiable);
        assert_eq!(parse(Some("bytes=-5"), 0), RangeRequest::Unsatisfiable);
        assert_eq!(parse(None, 100), RangeRequest::Whole);
        for h in [
            "items=0-1",
            "bytes=0-1,5-6",
            "bytes=9-1",
            "bytes=x-1",
            "bytes=+1-2",
            "bytes=-",
            "bytes= 0-1",
            "bytes=0 -1",
            "bytes=0-1-2",
            "bytes",
            "",
            "bytes=99999999999999999999-",
        ] {
            assert_eq!(parse(Some(h), 100), RangeRequest::Invalid, "{h:?}");
        }
        assert_eq!(
            invalid_message("bytes=0-1,5-6"),
            "Invalid range header: bytes=0-1,5-6. Supported Range formats are bytes=<start>-<end>, bytes=<start>-, bytes=-<suffix-length>"
        );
    }

    proptest! {
        #[test]
        fn a_part_always_lies_inside_the_file(len in 0u64..10_000, a in 0u64..20_000, b in 0u64..20_000, form in 0..3) {
            let header = match form {
                0 => format!("bytes={a}-{b}"),
                1 => format!("bytes={a}-"),
                _ => format!("bytes=-{b}"),
            };
            match parse(Some(&header), len) {
                RangeRequest::Part { start, end } => {
                    prop_assert!(start <= end);
                    prop_assert!(end < len);
                }
                RangeRequest::Unsatisfiable => prop_assert!(len == 0 || a >= len || (form == 2 && b == 0)),
                RangeRequest::Invalid => prop_assert!(form == 0 && a > b),
                RangeRequest::Whole => prop_assert!(false, "a range is never the whole file"),
            }
        }
    }

    proptest! {
        /// Any header at all: no panic, and whatever is accepted lies inside the file.
        #[test]
        fn any_header_is_safe(header in "\\PC{0,40}", prefixed in "(bytes=)?[0-9 ,+-]{0,30}", len in 0u64..1_000_000) {
            for h in [header.as_str(), prefixed.as_str()] {
                if let RangeRequest::Part { start, end } = parse(Some(h), len) {
                    prop_assert!(start <= end && end < len, "{h:?} on {len}: {start}-{end}");
                }
            }
        }

        /// A range inside the file, written as a header, reads back as itself; with the
        /// file's whole length as the end, as the rest of the file.
        #[test]
        fn ranges_round_trip(len in 1u64..u64::MAX, a in any::<u64>(), b in any::<u64>()) {
            let (start, end) = ((a.min(b)) % len, (a.max(b)) % len);
            let (start, end) = (start.min(end), start.max(end));
            prop_assert_eq!(
                parse(Some(&format!("bytes={start}-{end}")), len),
                RangeRequest::Part { start, end }
            );
            prop_assert_eq!(
                parse(Some(&format!("bytes={start}-")), len),
                RangeRequest::Part { start, end: len - 1 }
            );
            prop_assert_eq!(
                parse(Some(&format!("bytes=-{}", len - start)), len),
                RangeRequest::Part { start, end: len - 1 }
            );
        }

        /// A validator matches its own ETag and Last-Modified (once over a second old), and
        /// no other version's tag.
        #[test]
        fn validators_match_only_their_version(len in any::<u64>(), secs in 0u64..253_402_300_799, nanos in 0u32..1_000_000_000, other in any::<u64>()) {
            let modified = UNIX_EPOCH + Duration::new(secs, nanos);
            let v = Validator::new(len, modified);
            let later = modified + Duration::from_secs(2);
            prop_assert!(v.matches(&v.etag, later));
            prop_assert!(v.matches(&v.last_modified(), later));
            let weak = format!("W/{}", v.etag);
            prop_assert!(!v.matches(&weak, later));
            if other != len {
                prop_assert!(!v.matches(&Validator::new(other, modified).etag, later));
            }
        }
    }
}
