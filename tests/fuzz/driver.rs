//! Runs a target: a few hundred cases in the normal test suite, or, with
//! `DROVER_FUZZ_SECONDS=n`, cases for `n` seconds, with a line of figures appended to
//! `DROVER_FUZZ_RESULTS` (target, seconds, cases, failures, slowest case, peak RSS).

use std::fmt::Debug;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

/// The longest any one input may take (debug build, a loaded machine): far above what the
/// largest generated input costs, far below what an unbounded parser costs on it (the
/// quadratic YAML nesting took 255 s for 400 KB).
pub const CASE_TIME_LIMIT: Duration = Duration::from_secs(5);

/// Runs `test` on inputs of `strategy`: `cases` of them, or for `DROVER_FUZZ_SECONDS`.
pub fn run<S>(
    target: &str,
    strategy: S,
    cases: u32,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S: Strategy,
    S::Value: Debug,
{
    let slowest = AtomicU64::new(0);
    let timed = |value: S::Value| {
        let began = Instant::now();
        let outcome = test(value);
        let took = began.elapsed();
        slowest.fetch_max(took.as_micros() as u64, Ordering::Relaxed);
        outcome?;
        if took > CASE_TIME_LIMIT {
            return Err(TestCaseError::fail(format!(
                "one input took {took:?}, more than {CASE_TIME_LIMIT:?}"
            )));
        }
        Ok(())
    };
    let seconds: Option<u64> = std::env::var("DROVER_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok());
    let config = |cases: u32| Config {
        cases,
        // A failure is shrunk and kept in `regressions` by hand, not in a file of seeds.
        failure_persistence: None,
        max_shrink_time: 120_000,
        ..Config::default()
    };
    let Some(seconds) = seconds else {
        if let Err(e) = TestRunner::new(config(cases)).run(&strategy, timed) {
            panic!("{target}: {e}");
        }
        return;
    };
    let began = Instant::now();
    let deadline = began + Duration::from_secs(seconds);
    // A runner counts its cases over all its runs: each round gets a fresh one, seeded from
    // one random stream so that no round repeats another.
    let round = 200;
    let mut seeds = TestRunner::new(config(round));
    let (mut done, mut failure) = (0u64, None);
    while Instant::now() < deadline {
        let mut runner = TestRunner::new_with_rng(config(round), seeds.new_rng());
        match runner.run(&strategy, timed) {
            Ok(()) => done += u64::from(round),
            Err(TestError::Fail(why, minimal)) => {
                failure = Some(format!("{why}; minimal input: {minimal:?}"));
                break;
            }
            Err(TestError::Abort(why)) => {
                failure = Some(format!("aborted: {why}"));
                break;
            }
        }
    }
    let line = format!(
        "{target:<10} {:>6} s {done:>10} cases {:>2} failures  slowest case {:>8.1} ms  peak RSS {} MiB\n",
        began.elapsed().as_secs(),
        u8::from(failure.is_some()),
        slowest.load(Ordering::Relaxed) as f64 / 1000.0,
        peak_rss_mib(),
    );
    print!("{line}");
    if let Ok(path) = std::env::var("DROVER_FUZZ_RESULTS") {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("the results file opens");
        f.write_all(line.as_bytes())
            .expect("the results file is written");
        if let Some(failure) = &failure {
            writeln!(f, "{target:<10} FAILED: {failure}").expect("the results file is written");
        }
    }
    if let Some(failure) = failure {
        panic!("{target}: {failure}");
    }
}

/// The process's peak resident set (VmHWM), in MiB.
fn peak_rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}

/// Applies byte edits to `input`: each `(position, kind, bytes)` inserts, replaces, deletes
/// or repeats at `position` (taken modulo the length).
pub fn mutate(mut input: Vec<u8>, edits: &[(usize, u8, Vec<u8>)]) -> Vec<u8> {
    for (at, kind, bytes) in edits {
        let len = input.len();
        let at = if len == 0 { 0 } else { at % (len + 1) };
        match kind % 5 {
            0 => {
                input.splice(at..at, bytes.iter().copied());
            }
            1 => {
                let end = (at + bytes.len()).min(len);
                input.splice(at..end, bytes.iter().copied());
            }
            2 => {
                let end = (at + bytes.len().max(1)).min(len);
                input.drain(at..end);
            }
            3 => {
                // Repeat a slice many times: long keys, deep nesting, huge numbers.
                let end = (at + 1 + bytes.len() % 16).min(len);
                let piece = input[at..end].to_vec();
                let times = 1 + bytes.first().copied().unwrap_or(0) as usize * 8;
                let repeated: Vec<u8> = piece
                    .iter()
                    .copied()
                    .cycle()
                    .take(piece.len() * times)
                    .collect();
                input.splice(at..at, repeated);
            }
            _ => input.truncate(at),
        }
    }
    input
}

/// A strategy of edits for [`mutate`], biased to the bytes that matter to the formats.
pub fn edits() -> impl Strategy<Value = Vec<(usize, u8, Vec<u8>)>> {
    use proptest::prelude::*;
    let interesting = prop_oneof![
        3 => any::<u8>(),
        2 => proptest::sample::select(b"[]{}:,-\"'#&*!?|>\n \t\\0123456789./%".to_vec()),
    ];
    proptest::collection::vec(
        (
            any::<usize>(),
            any::<u8>(),
            proptest::collection::vec(interesting, 0..24),
        ),
        0..6,
    )
}
