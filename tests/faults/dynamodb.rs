//! A DynamoDB target that stops answering in the middle of a copy. Source and target are
//! dynalites of this test's own, so freezing one disturbs nobody; both are killed when the test
//! ends, passed or failed, with everything they hold.

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::Value;
use test_support::dynamodb::{
    Item, OwnDynalite, assert_same_items, fresh_table, job_between, put_all, scan_by_key,
};
use test_support::{Daemon, Home, ended};

use crate::Frozen;

/// Items in the source table.
const ITEMS: usize = 20_000;
/// Items written per second (`writeThroughput`, items under 1 KB): the copy takes about 13 s
/// when nothing stops it, time enough to freeze the target half way.
const RATE: usize = 1_500;

fn progress(job: &Value, counter: &str) -> u64 {
    job["progress"][counter]
        .as_u64()
        .unwrap_or_else(|| panic!("no progress.{counter}: {job}"))
}

/// Savepoints every second; once some segments are recorded done, the target is frozen: the
/// job stays `RUNNING`, its phase says it waits for the target, `retries` grows, `lastError`
/// says what failed and `rowsWritten` stands still. The daemon is then killed (`kill -9`), the
/// target thawed, and a new daemon on the same state directory resumes the job from the newest
/// savepoint: it skips the segments that savepoint records and the target ends equal to the
/// source.
#[tokio::test]
async fn a_frozen_dynamodb_target_holds_the_job_waiting_and_a_new_daemon_resumes_from_the_newest_savepoint()
 {
    let (source, target) = tokio::join!(OwnDynalite::start(), OwnDynalite::start());
    let src = source.client();
    let (src_table, dst_table) = ("fz_dynamo_src", "fz_dynamo_dst");
    fresh_table(&src, src_table, None).await;
    let items: Vec<Item> = (0..ITEMS)
        .map(|i| {
            [
                ("id", AttributeValue::S(format!("k{i:05}"))),
                ("n", AttributeValue::N(i.to_string())),
                ("v", AttributeValue::S("v".repeat(200))),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
        })
        .collect();
    put_all(&src, src_table, items).await;
    let savepoints = tempfile::tempdir().unwrap();
    let yaml = job_between(
        (source.url(), src_table),
        (target.url(), dst_table),
        "  scanSegments: 16\n  maxMapTasks: 4\n",
        &format!("  writeThroughput: {RATE}\n"),
        &format!(
            // Every savepoint kept, so the one resumed from can still be listed at the end.
            "savepoints:\n  path: {}\n  intervalSeconds: 1\n  keep: 1000\n",
            savepoints.path().display()
        ),
    );
    let home = Home::new();
    let mut daemon = Daemon::start(&home, "").await;
    let id = daemon.submit_job("/api/v1/migrations", &yaml).await;
    let status = format!("/api/v1/migrations/{id}");

    daemon
        .wait_for(
            &format!("{status}/savepoints"),
            Duration::from_secs(60),
            |list| list["savepoints"][0]["segments"].as_u64() >= Some(1),
        )
        .await;
    let (_, before) = daemon.get(&status).await;
    assert!(
        progress(&before, "rowsWritten") < ITEMS as u64,
        "the copy ended before the target was frozen: {before}"
    );
    let frozen = Frozen::new(target.pid());

    // Requests time out after 10 s (`ATTEMPT_TIMEOUT`): then the job shows it is waiting.
    let waiting = daemon
        .wait_for(&status, Duration::from_secs(60), |j| {
            j["phase"]
                .as_str()
                .is_some_and(|p| p.starts_with("waiting: writing to the target"))
        })
        .await;
    let phase = waiting["phase"].as_str().unwrap();
    assert!(
        phase.contains(&format!("BatchWriteItem to {dst_table:?}"))
            && phase.contains("no answer in time"),
        "{waiting}"
    );
    assert_eq!(
        waiting["lastError"]
            .as_str()
            .map(|e| format!("waiting: {e}")),
        Some(phase.to_string()),
        "lastError holds what the job waits for: {waiting}"
    );
    let (retries, written) = (
        progress(&waiting, "retries"),
        progress(&waiting, "rowsWritten"),
    );
    assert!(retries > 0, "{waiting}");
    let watched = Instant::now();
    let mut last = waiting;
    while watched.elapsed() < Duration::from_secs(12) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        last = daemon.get(&status).await.1;
        assert_eq!(last["state"], "RUNNING", "{last}");
        assert!(
            last["phase"]
                .as_str()
                .is_some_and(|p| p.starts_with("waiting: writing to the target")),
            "{last}"
        );
        assert_eq!(
            progress(&last, "rowsWritten"),
            written,
            "nothing is written while the target is frozen: {last}"
        );
    }
    assert!(
        progress(&last, "retries") > retries,
        "retries grow while the target is frozen: {retries}, then {last}"
    );

    daemon.kill9();
    drop(frozen);
    let newest = std::fs::read_dir(savepoints.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("savepoint_"))
        .max()
        .expect("savepoints were written");

    let daemon = Daemon::start(&home, "").await;
    // It finds the job INTERRUPTED and resumes it by itself (`jobs.resume_interrupted`).
    let done = daemon
        .wait_job(&id, Duration::from_secs(120), |j| {
            ended(j) && j["state"] != "INTERRUPTED"
        })
        .await;
    assert_eq!(done["state"], "SUCCEEDED", "{done}\n{}", daemon.logs());
    let logs = daemon.logs();
    assert!(
        logs.lines()
            .any(|l| l.contains("migration resumes from a savepoint") && l.contains(&newest)),
        "the resumed job names the newest savepoint, {newest}:\n{logs}"
    );
    let (_, list) = daemon.get(&format!("{status}/savepoints")).await;
    let recorded = list["savepoints"]
        .as_array()
        .and_then(|l| l.iter().find(|s| s["name"] == newest.as_str()))
        .and_then(|s| s["segments"].as_u64())
        .unwrap_or_else(|| panic!("{newest} is not among {list}"));
    assert!(recorded > 0, "{list}");
    let (_, done) = daemon.get(&status).await;
    assert_eq!(
        progress(&done, "unitsSkipped"),
        recorded,
        "the segments of the newest savepoint are skipped: {done}"
    );
    assert!(progress(&done, "rowsWritten") < ITEMS as u64, "{done}");

    let dst = target.client();
    let (a, b) = tokio::join!(
        scan_by_key(&src, src_table, 8),
        scan_by_key(&dst, dst_table, 8)
    );
    assert_eq!(a.len(), ITEMS);
    assert_same_items("after the resume", &a, &b);
}
