//! Single byte ranges of `Range` request headers (RFC 9110): `bytes=a-b`, `bytes=a-`,
//! `bytes=-n`. Several ranges in one request are not served (the whole file is sent instead, as
//! the RFC allows). And the validators that `If-Range` compares.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a `Range` header asks of a file of a given length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeRequest {
    /// No usable range: send the whole file (200).
    Whole,
    /// Bytes `start..=end` (206).
    Part {
        /// First byte.
        start: u64,
        /// Last byte, included.
        end: u64,
    },
    /// The range lies outside the file (416).
    Unsatisfiable,
}

/// Interprets `header` (the `Range` header's value, if any) for a file of `len` bytes.
pub fn parse(header: Option<&str>, len: u64) -> RangeRequest {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        // No header, or a unit other than bytes: ignored, as the RFC says.
        return RangeRequest::Whole;
    };
    if spec.contains(',') {
        return RangeRequest::Whole;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return RangeRequest::Whole;
    };
    let (first, last) = (first.trim(), last.trim());
    let number = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    match (first.is_empty(), last.is_empty()) {
        // bytes=-n: the last n bytes.
        (true, false) => match number(last) {
            Some(0) => RangeRequest::Unsatisfiable,
            Some(_) if len == 0 => RangeRequest::Unsatisfiable,
            Some(n) => RangeRequest::Part {
                start: len.saturating_sub(n),
                end: len - 1,
            },
            None => RangeRequest::Whole,
        },
        // bytes=a-: from a to the end.
        (false, true) => match number(first) {
            Some(a) if a < len => RangeRequest::Part {
                start: a,
                end: len - 1,
            },
            Some(_) => RangeRequest::Unsatisfiable,
            None => RangeRequest::Whole,
        },
        // bytes=a-b, b clamped to the end.
        (false, false) => match (number(first), number(last)) {
            (Some(a), Some(b)) if a > b => RangeRequest::Whole,
            (Some(a), Some(_)) if a >= len => RangeRequest::Unsatisfiable,
            (Some(a), Some(b)) => RangeRequest::Part {
                start: a,
                end: b.min(len - 1),
            },
            _ => RangeRequest::Whole,
        },
        (true, true) => RangeRequest::Whole,
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

    #[test]
    fn unsatisfiable_and_ignored() {
        assert_eq!(parse(Some("bytes=100-"), 100), RangeRequest::Unsatisfiable);
        assert_eq!(
            parse(Some("bytes=100-200"), 100),
            RangeRequest::Unsatisfiable
        );
        assert_eq!(parse(Some("bytes=-0"), 100), RangeRequest::Unsatisfiable);
        assert_eq!(parse(Some("bytes=0-"), 0), RangeRequest::Unsatisfiable);
        assert_eq!(parse(Some("bytes=-5"), 0), RangeRequest::Unsatisfiable);
        assert_eq!(parse(None, 100), RangeRequest::Whole);
        assert_eq!(parse(Some("items=0-1"), 100), RangeRequest::Whole);
        assert_eq!(parse(Some("bytes=0-1,5-6"), 100), RangeRequest::Whole);
        assert_eq!(parse(Some("bytes=9-1"), 100), RangeRequest::Whole);
        assert_eq!(parse(Some("bytes=x-1"), 100), RangeRequest::Whole);
        assert_eq!(parse(Some("bytes=+1-2"), 100), RangeRequest::Whole);
        assert_eq!(parse(Some("bytes=-"), 100), RangeRequest::Whole);
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
                RangeRequest::Whole => prop_assert!(form == 0 && a > b),
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
