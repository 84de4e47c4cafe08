//! Progress by rows against an estimated total (issue 43): at 12.8 % of rows written the
//! console showed 4.5 %, since it counted finished units; with 16 units at once a table sat
//! at 0 % for a sixteenth of its run. A real CQL → CQL copy is watched through the API while
//! it runs; the percentage shown must stay within 5 points of the rows written against the
//! rows the target holds at the end (counted by a second reader), from the first 5 % on.
//! One stopped job's percentage is then read through the API, the event stream, the CLI and
//! the console: the same figure everywhere.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use test_support::cql::{Fixture, exec, job, job_to, raw_rows};
use test_support::dynamodb::{Item, Server, fresh_table, put_all, table_name};
use test_support::{Daemon, drover_bin, ended};

/// Rows of the watched copy: 200,000 in the suite (about a minute with the fill on 2 cores);
/// `bench/progress/run` sets `DROVER_TEST_PROGRESS_ROWS=1000000` for the 1M rows.
fn rows() -> usize {
    std::env::var("DROVER_TEST_PROGRESS_ROWS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200_000)
}

fn nodetool(args: &[&str]) {
    let tool =
        std::env::var("DROVER_TEST_NODETOOL").expect("DROVER_TEST_NODETOOL (scripts/testenv env)");
    let out = std::process::Command::new(tool)
        .args(["-h", "127.0.0.1", "-p", "7199"])
        .args(args)
        .output()
        .expect("run nodetool");
    assert!(out.status.success(), "nodetool {args:?}: {out:?}");
}

/// Flushes the source table and has the node compute `system.size_estimates` now (it does
/// every 5 minutes by itself, from SSTables only), then waits until they are there.
async fn size_estimates(f: &Fixture) -> i64 {
    nodetool(&["flush", "--", f.ks, "t"]);
    nodetool(&["refreshsizeestimates"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let partitions: i64 = f
            .src
            .query_unpaged(
                "SELECT partitions_count FROM system.size_estimates \
                 WHERE keyspace_name = ? AND table_name = 't'",
                (f.ks,),
            )
            .await
            .expect("system.size_estimates")
            .into_rows_result()
            .expect("rows")
            .rows::<(i64,)>()
            .expect("bigint")
            .map(|r| r.expect("a row").0)
            .sum();
        if partitions > 0 {
            return partitions;
        }
        assert!(
            Instant::now() < deadline,
            "system.size_estimates stays empty"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn counter(job: &Value, name: &str) -> Option<u64> {
    job["progress"][name].as_u64()
}

/// `12.8 %` from 128 thousandths: how every screen writes a share done.
fn percent(permille: u64) -> String {
    format!("{}.{} %", permille / 10, permille % 10)
}

#[tokio::test]
async fn the_shown_percentage_follows_the_rows_written() {
    // 20,000 partitions of 10 rows: the statistics count partitions, the copy rows.
    let rows = rows();
    let f = Fixture::rows("progress_rows", rows, 10, 10).await;
    let partitions = size_estimates(&f).await;
    eprintln!("system.size_estimates: {partitions} partitions");
    let id = f
        .daemon
        .submit_job("/api/v1/migrations", &job(f.ks, "t", "", "", ""))
        .await;
    let mut samples: Vec<(Instant, Value)> = Vec::new();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(900);
    let last = loop {
        let (status, body) = f.daemon.get(&format!("/api/v1/jobs/{id}")).await;
        assert_eq!(status, 200, "{body}");
        if ended(&body) {
            break body;
        }
        samples.push((Instant::now(), body));
        assert!(Instant::now() < deadline, "the copy takes too long");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (took, finished) = (started.elapsed(), Instant::now());
    assert_eq!(last["state"], "SUCCEEDED", "{last}\n{}", f.daemon.logs());
    // The second reader: the target's rows, counted by the driver, not by drover.
    let actual = raw_rows(&f.dst, &format!("{}.t", f.ks), "p").await.len() as u64;
    assert_eq!(actual, rows as u64);

    let mut checked = 0;
    let mut worst: f64 = 0.0;
    // What today's screens showed before issue 43, for the record: units done of the plan.
    let mut worst_units: f64 = 0.0;
    // How far the ETA was from the time that was really left, in seconds, from 5 % on.
    let mut eta_off: Vec<f64> = Vec::new();
    let mut without_eta = 0;
    for (at, s) in samples.iter().filter(|(_, s)| s["state"] == "RUNNING") {
        let written = counter(s, "rowsWritten").unwrap_or(0);
        if written * 20 < actual {
            continue;
        }
        match counter(s, "etaSeconds") {
            Some(eta) => eta_off.push((eta as f64 - (finished - *at).as_secs_f64()).abs()),
            None => without_eta += 1,
        }
        let shown = counter(s, "progressPermille")
            .unwrap_or_else(|| panic!("no progressPermille while running: {s}"));
        let total = counter(s, "rowsTotalEstimate")
            .unwrap_or_else(|| panic!("no rowsTotalEstimate while running: {s}"));
        assert!(total >= written, "a total below the rows written: {s}");
        let truth = written as f64 * 100.0 / actual as f64;
        let off = (shown as f64 / 10.0 - truth).abs();
        worst = worst.max(off);
        let units = counter(s, "unitsDone").unwrap_or(0) as f64 * 100.0
            / counter(s, "unitsTotal").unwrap_or(1).max(1) as f64;
        worst_units = worst_units.max((units - truth).abs());
        assert!(
            off <= 5.0,
            "shown {} with {written} of {actual} rows written ({truth:.1} %): {s}",
            percent(shown)
        );
        checked += 1;
    }
    // The window needs a second of samples; after that every snapshot has an ETA.
    assert!(
        without_eta * 10 <= checked,
        "{without_eta} of {checked} snapshots without an ETA"
    );
    eta_off.sort_by(f64::total_cmp);
    let median_eta_off = eta_off.get(eta_off.len() / 2).copied().unwrap_or(0.0);
    eprintln!(
        "progress: ETA off the time really left by {median_eta_off:.1} s (median), {:.1} s (worst)",
        eta_off.last().copied().unwrap_or(0.0)
    );
    eprintln!(
        "progress: {rows} rows copied in {:.1} s; {checked} snapshots checked from 5 % on; \
         shown % worst {worst:.2} points off rows-written/rows-total (units done/units: worst \
         {worst_units:.2} points off); final {}",
        took.as_secs_f64(),
        last["progress"]
    );
    assert!(checked >= 5, "too few snapshots while running: {checked}");

    // Ended: exactly the rows copied, 100 %, no ETA, and the run's average rate (not 0).
    assert_eq!(counter(&last, "progressPermille"), Some(1000), "{last}");
    assert_eq!(counter(&last, "rowsTotalEstimate"), Some(actual), "{last}");
    assert_eq!(counter(&last, "etaSeconds"), None, "{last}");
    assert!(counter(&last, "rowsPerSecond").unwrap_or(0) > 0, "{last}");
}

#[tokio::test]
async fn api_events_cli_and_console_show_one_percentage() {
    let f = Fixture::rows("progress_screens", 50_000, 10, 10).await;
    exec(
        &f.dst,
        &format!(
            "CREATE TABLE {}.t2 (p int, c int, v text, n bigint, PRIMARY KEY (p, c))",
            f.ks
        ),
    )
    .await;
    // Slow enough to be stopped half way.
    let yaml = job_to(f.ks, "t", "t2", "", "  rowsPerSecond: 5000\n", "");
    let id = f.daemon.submit_job("/api/v1/migrations", &yaml).await;
    f.daemon
        .wait_job(&id, Duration::from_secs(120), |j| {
            counter(j, "rowsWritten").unwrap_or(0) >= 15_000 || ended(j)
        })
        .await;
    let (status, body) = f
        .daemon
        .post_json(&format!("/api/v1/jobs/{id}/cancel"), &json!({}))
        .await;
    assert!(status < 300, "{body}");
    let job = f.daemon.wait_job(&id, Duration::from_secs(60), ended).await;
    assert_eq!(job["state"], "CANCELLED", "{job}");
    let permille = counter(&job, "progressPermille").expect("a share done");
    assert!((1..1000).contains(&permille), "{job}");
    let want = percent(permille);
    let total = counter(&job, "rowsTotalEstimate").expect("an estimate");
    let written = counter(&job, "rowsWritten").unwrap();
    assert_eq!(permille, written * 1000 / total, "{job}");

    // The event stream of an ended job: one `end` event, the same counters.
    let events = f
        .daemon
        .get_text(&format!("/api/v1/jobs/{id}/events"))
        .await;
    let data: Value = events
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .unwrap_or_else(|| panic!("no event: {events}"));
    assert_eq!(
        counter(&data, "progressPermille"),
        Some(permille),
        "{events}"
    );

    // The CLI: `Progress:    37.4 % (74,800 of ~200,000 rows · units 12/32)`.
    let out = tokio::process::Command::new(drover_bin())
        .args(["job", &id])
        .env("DROVER_SERVER", f.daemon.url(""))
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("Progress:"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains(&want), "API {want}, CLI: {line}");
    assert!(line.contains(" rows · units "), "{line}");
    let listing = tokio::process::Command::new(drover_bin())
        .args(["jobs"])
        .env("DROVER_SERVER", f.daemon.url(""))
        .output()
        .await
        .unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    let row = listing
        .lines()
        .find(|l| l.contains(&id[..13]))
        .unwrap_or_else(|| panic!("{listing}"));
    assert!(row.contains(&want), "API {want}, drover jobs: {row}");

    // The console's job page and list.
    for page in [format!("/ui/jobs/{id}"), "/ui/jobs".to_string()] {
        let html = f.daemon.get_text(&page).await;
        assert!(
            html.contains(&format!("data-field=\"percent\">{want}<")),
            "API {want}, {page}: {html}"
        );
        assert!(html.contains(" rows · units "), "{page}: {html}");
    }
}

/// DynamoDB: `DescribeTable`'s item count is the total from the first item written (the test
/// servers keep it current; DynamoDB's is refreshed every 6 hours, which the units finished
/// correct), and the share follows the items written within 5 points.
#[tokio::test]
async fn a_dynamodb_copy_is_measured_against_the_tables_item_count() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let daemon = Daemon::fresh("").await;
    let c = Server::Moto.client();
    let (src, dst) = (table_name("progress_src"), table_name("progress_dst"));
    fresh_table(&c, &src, None).await;
    fresh_table(&c, &dst, None).await;
    let items = 3000u64;
    put_all(
        &c,
        &src,
        (0..items)
            .map(|i| {
                Item::from([
                    ("id".to_string(), AttributeValue::S(format!("item-{i}"))),
                    ("v".to_string(), AttributeValue::N(i.to_string())),
                ])
            })
            .collect(),
    )
    .await;
    // Segments one at a time and 600 writes a second: about 5 s, a segment a quarter of it.
    let yaml = test_support::dynamodb::job(
        (Server::Moto, &src),
        (Server::Moto, &dst),
        "  scanSegments: 4\n  maxMapTasks: 1\n",
        "  writeThroughput: 600\n",
        "",
    );
    let id = daemon.submit_job("/api/v1/migrations", &yaml).await;
    let mut checked = 0;
    let last = loop {
        let (_, job) = daemon.get(&format!("/api/v1/jobs/{id}")).await;
        if ended(&job) {
            break job;
        }
        let written = counter(&job, "rowsWritten").unwrap_or(0);
        if written > 0 {
            let total = counter(&job, "rowsTotalEstimate").unwrap_or_else(|| panic!("{job}"));
            assert!(total.abs_diff(items) * 20 <= items, "{job}");
            let shown = counter(&job, "progressPermille").unwrap() as f64 / 10.0;
            let truth = written as f64 * 100.0 / items as f64;
            assert!(
                (shown - truth).abs() <= 5.0,
                "{shown} % shown, {truth:.1} % true: {job}"
            );
            checked += 1;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(last["state"], "SUCCEEDED", "{last}\n{}", daemon.logs());
    assert!(checked >= 5, "too few snapshots while running: {checked}");
    assert_eq!(counter(&last, "rowsTotalEstimate"), Some(items), "{last}");
    assert_eq!(counter(&last, "progressPermille"), Some(1000), "{last}");
}
