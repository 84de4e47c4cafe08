//! The DynamoDB resume scenario of ScyllaDB Migrator's test report
//! (`shared/seeds/dynamodb-to-alternator-resume-test-report.txt`), on dynalite: a table of
//! 200 000 items copied in 10 scan segments with a savepoint every second, the copy killed
//! with `kill -9` half way, the validator saying the copy is incomplete, the same job run
//! again skipping exactly the segments the newest savepoint records (and reading none of
//! their items), then the validator saying the tables are equal.
//!
//! A test binary of its own: cargo runs test binaries one after the other, so the load of a
//! large table and a copy timed by a kill never share the DynamoDB test server with other
//! tests.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, Select};
use serde_json::Value;
use test_support::dynamodb::{Item, Server, drop_table, fresh_table, job, put_all, table_name};
use test_support::{drover_bin, wait_until};

const ITEMS: usize = 200_000;
const SEGMENTS: u32 = 10;

/// Savepoint files of `dir`, oldest first.
fn savepoint_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("savepoint_"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The segments the newest savepoint of `dir` records as done, and its name.
fn newest_done(dir: &Path) -> Option<(String, BTreeSet<u32>)> {
    let name = savepoint_files(dir).pop()?;
    let doc: Value = yaml_serde::from_str(&std::fs::read_to_string(dir.join(&name)).ok()?).ok()?;
    let done = serde_json::from_value(doc.get("skipSegments")?.clone()).ok()?;
    Some((name, done))
}

/// Items of segment `segment` of the parallel scan of `table` in [`SEGMENTS`] segments.
async fn count_segment(c: &Client, table: &str, segment: u32) -> u64 {
    let mut n = 0;
    let mut start = None;
    loop {
        let page = c
            .scan()
            .table_name(table)
            .segment(segment as i32)
            .total_segments(SEGMENTS as i32)
            .select(Select::Count)
            .set_exclusive_start_key(start)
            .send()
            .await
            .expect("count scan");
        n += page.count as u64;
        start = page.last_evaluated_key;
        if start.is_none() {
            return n;
        }
    }
}

fn command(what: &str, config: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(drover_bin());
    cmd.args([what, "--config"])
        .arg(config)
        .env("RUST_LOG", "drover=info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Runs `drover <what> --config <config>` to its end: exit code, stdout, stderr.
async fn run(what: &str, config: &Path) -> (Option<i32>, String, String) {
    let out = tokio::time::timeout(Duration::from_secs(300), command(what, config).output())
        .await
        .unwrap_or_else(|_| panic!("drover {what} ends"))
        .expect("run drover");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `segments [0-1, 5] (3)`, as drover's log lines write a set of segments.
fn runs(set: &BTreeSet<u32>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut it = set.iter().copied().peekable();
    while let Some(start) = it.next() {
        let mut end = start;
        while it.peek() == Some(&(end + 1)) {
            end = it.next().unwrap();
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    format!("segments [{}] ({})", parts.join(", "), set.len())
}

/// Prints the lines of `output` that contain one of `wanted` (shown with `--nocapture`).
fn show(what: &str, output: &str, wanted: &[&str]) {
    eprintln!("{what}:");
    for line in output
        .lines()
        .filter(|l| wanted.iter().any(|w| l.contains(w)))
    {
        eprintln!("  {line}");
    }
}

#[tokio::test]
async fn kill_9_mid_copy_then_the_same_job_skips_the_saved_segments_and_validates_clean() {
    let started = Instant::now();
    let c = Server::Dynalite.client();
    let (src, dst) = (table_name("dr_resume_src"), table_name("dr_resume_dst"));
    fresh_table(&c, &src, None).await;
    drop_table(&c, &dst).await;
    let items: Vec<Item> = (0..ITEMS)
        .map(|i| {
            [
                ("id".to_string(), AttributeValue::S(format!("i{i:06}"))),
                ("v".to_string(), AttributeValue::N(i.to_string())),
            ]
            .into_iter()
            .collect()
        })
        .collect();
    put_all(&c, &src, items).await;
    let loaded = started.elapsed();
    let per_segment: Vec<u64> =
        futures::future::join_all((0..SEGMENTS).map(|s| count_segment(&c, &src, s))).await;
    assert_eq!(per_segment.iter().sum::<u64>(), ITEMS as u64);
    eprintln!(
        "loaded in {loaded:.1?}, counted at {:.1?}",
        started.elapsed()
    );

    let home = tempfile::tempdir().unwrap();
    let savepoints = home.path().join("savepoints");
    // Two segments at a time, writes held to 8 000 items/s: the copy takes about 25 s, and
    // segments finish every few seconds, so a savepoint records some of them well before
    // the end.
    let yaml = job(
        (Server::Dynalite, &src),
        (Server::Dynalite, &dst),
        &format!("  scanSegments: {SEGMENTS}\n  maxMapTasks: 2\n"),
        "  writeThroughput: 8000\n",
        &format!(
            "savepoints:\n  path: {}\n  intervalSeconds: 1\n",
            savepoints.display()
        ),
    );
    let config = home.path().join("job.yaml");
    std::fs::write(&config, &yaml).unwrap();

    // The copy, killed once a savepoint records finished segments.
    let copy_started = Instant::now();
    let mut child = command("migrate", &config).spawn().expect("spawn drover");
    wait_until(
        "a savepoint recording at least two finished segments",
        Duration::from_secs(120),
        || newest_done(&savepoints).is_some_and(|(_, done)| done.len() >= 2),
    )
    .await;
    child.start_kill().expect("kill -9");
    let out = child.wait_with_output().await.unwrap();
    let killed_after = copy_started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), None, "killed by a signal: {stderr}");
    let (newest, done) = newest_done(&savepoints).expect("a savepoint");
    show("the killed copy", &stderr, &["created a savepoint"]);
    assert!(
        done.len() < SEGMENTS as usize,
        "killed mid-copy, not after it: {done:?}"
    );
    // What the savepoint's log line said as it was written (unless the kill came between
    // the file and its line).
    assert!(
        !stderr.contains(&newest)
            || stderr.contains(&format!("done in all, skipped on resume: {}", runs(&done))),
        "{stderr}"
    );

    // The validator sees the copy incomplete: exit 5, items missing, none extra.
    let (code, stdout, stderr) = run("validate", &config).await;
    assert_eq!(code, Some(5), "{stdout}\n{stderr}");
    assert!(stdout.starts_with("DIFFERENCES FOUND"), "{stdout}");
    assert!(
        stdout.contains("missing rows (not in the target): "),
        "{stdout}"
    );
    assert!(!stdout.contains("extra rows"), "{stdout}");
    let first_validation = started.elapsed();
    eprintln!("counted and copied until the kill, validated at {first_validation:.1?}");
    show(
        "the first validation",
        &stdout,
        &["DIFFERENCES", "missing rows"],
    );

    // A savepoint is not a job file: its secrets are redacted. The same job file is.
    let (code, _, stderr) = run("migrate", &savepoints.join(&newest)).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("it is a savepoint"), "{stderr}");

    // The same job again: it resumes from the newest savepoint, skips its segments and reads
    // exactly the items of the others.
    let (code, _, stderr) = run("migrate", &config).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "resuming from the newest savepoint of this migration; skipping what it records as done: {}",
            runs(&done)
        )) && stderr.contains(&newest),
        "{stderr}"
    );
    let left = SEGMENTS as usize - done.len();
    assert!(
        stderr.contains(&format!(
            "{SEGMENTS} units, {} of them skipped as done",
            done.len()
        )) && stderr.contains(&format!("{left} to copy")),
        "{stderr}"
    );
    let not_skipped: u64 = (0..SEGMENTS)
        .filter(|s| !done.contains(s))
        .map(|s| per_segment[s as usize])
        .sum();
    assert!(not_skipped < ITEMS as u64);
    assert!(
        stderr.contains(&format!(
            "migration complete: {not_skipped} rows read, {not_skipped} rows"
        )) && stderr.contains(&format!("{SEGMENTS} units ({} skipped)", done.len())),
        "the rerun reads only the segments not skipped ({not_skipped} items): {stderr}"
    );

    eprintln!("resumed copy done at {:.1?}", started.elapsed());
    show(
        "the resumed copy",
        &stderr,
        &["resuming from", "units, ", "migration complete"],
    );
    // Now the tables hold the same items.
    let (code, stdout, stderr) = run("validate", &config).await;
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with(&format!("no differences: {ITEMS} rows compared")),
        "{stdout}"
    );
    show(
        "the last validation",
        &format!("{stdout}{stderr}"),
        &["no differences"],
    );
    drop_table(&c, &src).await;
    drop_table(&c, &dst).await;
    eprintln!(
        "load {loaded:.1?}, killed after {killed_after:.1?} with {} of {SEGMENTS} segments saved, first validation at {first_validation:.1?}, all {:.1?}",
        done.len(),
        started.elapsed()
    );
}
