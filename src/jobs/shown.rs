//! A job's progress as every screen shows it — the console's pages, `drover jobs`,
//! `drover job` — from the counters of its record (the same the API and the event stream
//! carry), so that no two screens can disagree.
//!
//! The share done is the server's `progressPermille` (rows handled against the estimated
//! total, else units: see [`crate::jobs::running`]); kinds that count something else (a
//! data-copy task's bytes, a diagnostic's seconds) show their own.

use std::collections::BTreeMap;

/// What a job's progress shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// Thousandths done, 0 to 1000.
    pub permille: u64,
    /// What is done of what, in words: `12,800 of ~100,000 rows · units 5/66`.
    pub label: String,
}

impl Shown {
    /// `12.8 %`.
    pub fn percent(&self) -> String {
        format!("{}.{} %", self.permille / 10, self.permille % 10)
    }
}

/// The progress of a job of `kind` with `progress` counters; `None` before it counts
/// anything.
pub fn shown(kind: &str, progress: &BTreeMap<String, u64>) -> Option<Shown> {
    let c = |name: &str| progress.get(name).copied();
    let share = |done: u64, total: u64| {
        if total == 0 {
            0
        } else {
            ((done as u128 * 1000 / total as u128) as u64).min(1000)
        }
    };
    match kind {
        "data-copy-task" => {
            let (done, total) = (c("bytesDownloaded")?, c("bytesToDownload")?);
            Some(Shown {
                permille: share(done, total),
                label: format!(
                    "{} of {}",
                    bytesize::ByteSize(done),
                    bytesize::ByteSize(total)
                ),
            })
        }
        "diagnostic" => {
            let (done, total) = (c("secondsElapsed").unwrap_or(0), c("secondsTotal")?);
            Some(Shown {
                permille: share(done, total),
                label: format!("{done} of {total} seconds"),
            })
        }
        _ => {
            let units = match (c("unitsDone"), c("unitsTotal")) {
                (Some(done), Some(total)) => Some((done, total)),
                _ => None,
            };
            let permille = c("progressPermille")
                .or_else(|| units.map(|(d, t)| share(d, t)))?
                .min(1000);
            // Units a savepoint had complete are done but were not copied by this run.
            let units_text = units.map(|(d, t)| match c("unitsSkipped").unwrap_or(0) {
                0 => format!("units {d}/{t}"),
                skipped => format!("units {d}/{t} ({skipped} skipped)"),
            });
            let label = match c("rowsTotalEstimate") {
                Some(total) => {
                    let done = c("rowsWritten").unwrap_or(0) + c("rowsDropped").unwrap_or(0);
                    let rows = format!("{} of ~{} rows", thousands(done), thousands(total));
                    match units_text {
                        Some(u) => format!("{rows} · {u}"),
                        None => rows,
                    }
                }
                None => units_text.unwrap_or_default(),
            };
            Some(Shown { permille, label })
        }
    }
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn rows_against_the_estimate_with_units_as_detail() {
        let p = map(&[
            ("unitsDone", 5),
            ("unitsTotal", 66),
            ("rowsWritten", 12_800),
            ("rowsTotalEstimate", 100_000),
            ("progressPermille", 128),
        ]);
        let s = shown("migration", &p).unwrap();
        assert_eq!(s.percent(), "12.8 %");
        assert_eq!(s.label, "12,800 of ~100,000 rows · units 5/66");
    }

    #[test]
    fn units_when_there_is_no_estimate() {
        let s = shown("validation", &map(&[("unitsDone", 1), ("unitsTotal", 4)])).unwrap();
        assert_eq!((s.permille, s.label.as_str()), (250, "units 1/4"));
        assert_eq!(shown("migration", &map(&[])), None);
        let resumed = map(&[("unitsDone", 40), ("unitsTotal", 66), ("unitsSkipped", 33)]);
        assert_eq!(
            shown("migration", &resumed).unwrap().label,
            "units 40/66 (33 skipped)"
        );
        let s = shown(
            "data-copy-task",
            &map(&[("bytesDownloaded", 512), ("bytesToDownload", 1024)]),
        )
        .unwrap();
        assert_eq!(s.percent(), "50.0 %");
    }
}
