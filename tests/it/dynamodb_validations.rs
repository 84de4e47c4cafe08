//! The validator on DynamoDB jobs, against moto and dynalite: a clean copy validates clean
//! (every value type, renames, items whose TTL passed), a damaged target is reported item by
//! item with keys and values, `copyMissingRows` writes the missing items, and an interrupted
//! validation resumes in either of its passes.

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeValue, BillingMode, KeyType, ScalarAttributeType, TimeToLiveSpecification,
};
use serde_json::Value;
use test_support::dynamodb::{
    Item, Server, attr, drop_table, job, key, put_all, table_name, wait_active,
};
use test_support::{Daemon, drover_bin, wait_until};

use crate::dynamodb_migrator::migrate;

const VALIDATIONS: &str = "/api/v1/validations";
const WAIT: Duration = Duration::from_secs(180);

/// `drover validate --config` of `yaml` (with `RUST_LOG` when given): exit code, stdout,
/// stderr.
async fn validate_cli(yaml: &str, log: Option<&str>) -> (Option<i32>, String, String) {
    let path = test_support::cql::write_job(yaml);
    let mut cmd = tokio::process::Command::new(drover_bin());
    cmd.args(["validate", "--config"])
        .arg(&path)
        .kill_on_drop(true);
    if let Some(filter) = log {
        cmd.env("RUST_LOG", filter);
    }
    let out = tokio::time::timeout(WAIT, cmd.output())
        .await
        .expect("drover validate ends")
        .expect("run drover");
    let _ = std::fs::remove_file(&path);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_string())
}

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// A table keyed by `id` (S) and `sk` (N), on demand.
async fn keyed_table(c: &Client, table: &str) {
    drop_table(c, table).await;
    c.create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key("id", KeyType::Hash))
        .key_schema(key("sk", KeyType::Range))
        .attribute_definitions(attr("id", ScalarAttributeType::S))
        .attribute_definitions(attr("sk", ScalarAttributeType::N))
        .send()
        .await
        .expect("create table");
    wait_active(c, table).await;
}

/// Item `i`: every DynamoDB type (numbers of 38 digits, empty strings, nested maps and
/// lists, the three kinds of set), and `foo`, which the job renames to `quux`.
fn every_type(i: usize) -> Item {
    let mut item: Item = [
        ("id", s(&format!("k{i:05}"))),
        ("sk", n(i % 3)),
        ("s", s(&format!("text {i} with 'quotes'"))),
        ("empty", s("")),
        (
            "big",
            n(format!("1234567890123456789012345678901234567.{}", i % 10)),
        ),
        ("neg", n(format!("-{i}.25"))),
        (
            "bin",
            AttributeValue::B(Blob::new(vec![0, 1, (i % 256) as u8, 255])),
        ),
        ("flag", AttributeValue::Bool(i.is_multiple_of(2))),
        ("nothing", AttributeValue::Null(true)),
        ("foo", s(&format!("renamed {i}"))),
        (
            "tags",
            AttributeValue::Ss(vec![format!("t{i}"), "common".into(), "z".into()]),
        ),
        (
            "scores",
            AttributeValue::Ns(vec![i.to_string(), "3.14".into(), "-1".into()]),
        ),
        (
            "blobs",
            AttributeValue::Bs(vec![
                Blob::new(vec![1]),
                Blob::new(vec![2, (i % 256) as u8]),
            ]),
        ),
        (
            "list",
            AttributeValue::L(vec![n(i), s("x"), AttributeValue::Bool(true)]),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let nested: Item = [
        ("n", n(i * 7)),
        (
            "inner",
            AttributeValue::L(vec![AttributeValue::M(Item::new())]),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    item.insert("map".into(), AttributeValue::M(nested));
    item
}

async fn get(c: &Client, table: &str, id: &str, sk: usize) -> Option<Item> {
    c.get_item()
        .table_name(table)
        .key("id", s(id))
        .key("sk", n(sk))
        .consistent_read(true)
        .send()
        .await
        .expect("get item")
        .item
}

fn examples<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    report["examples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .collect()
}

/// The counts of a report that say what it found (not its examples).
fn counts(report: &Value) -> Value {
    let mut r = report.clone();
    r.as_object_mut().unwrap().remove("examples");
    r
}

/// The scenario on one server, source and target tables both on it.
async fn damage_is_reported_and_missing_items_copied(server: Server, items: usize) {
    let started = Instant::now();
    let c = server.client();
    let daemon = Daemon::fresh("").await;
    let name = server.name();
    let (src, dst) = (
        table_name(&format!("dv_src_{name}")),
        table_name(&format!("dv_dst_{name}")),
    );
    keyed_table(&c, &src).await;
    drop_table(&c, &dst).await;
    let mut data: Vec<Item> = (0..items).map(every_type).collect();
    // moto has TTL: an item whose TTL passed is neither copied nor missing.
    let ttl = server == Server::Moto;
    if ttl {
        c.update_time_to_live()
            .table_name(&src)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .enabled(true)
                    .attribute_name("exp")
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .expect("enable TTL");
        let now = chrono::Utc::now().timestamp();
        let mut gone = every_type(items);
        gone.insert("exp".into(), n(now - 3600));
        data.push(gone);
        data[1].insert("exp".into(), n(now + 86_400));
    }
    put_all(&c, &src, data).await;
    let live = items as u64;
    let yaml = |validation: &str| {
        job(
            (server, &src),
            (server, &dst),
            "  scanSegments: 3\n  maxMapTasks: 2\n",
            "",
            &format!(
                "renames:\n  - from: foo\n    to: quux\nvalidation:\n  failuresToFetch: 10\n{validation}"
            ),
        )
    };
    // Migrator's own DynamoDB files set CQL-only keys: accepted, warned of, ignored.
    let clean = yaml("  compareTimestamps: true\n  writetimeToleranceMillis: 1000\n");
    let (code, stderr) = migrate(&clean).await;
    assert_eq!(code, Some(0), "{stderr}");

    // A clean copy: exit 0, nothing to report.
    let (code, stdout, stderr) = validate_cli(&clean, None).await;
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with(&format!(
            "no differences: {live} rows compared ({live} source, {live} target), {live} matched"
        )),
        "{stdout}"
    );
    for key in ["compareTimestamps", "writetimeToleranceMillis"] {
        assert!(
            stderr.contains(&format!("validation.{key}")) && stderr.contains("ignored"),
            "{key}: {stderr}"
        );
    }
    let report = daemon.run_job(VALIDATIONS, &clean, WAIT).await["result"].clone();
    assert_eq!(report["rowsCompared"], live, "{report:#}");
    assert_eq!(report["rowsMatched"], live, "{report:#}");
    assert_eq!(report["rowsWithDifferences"], 0, "{report:#}");
    assert_eq!(report["rowsSkipped"], u64::from(ttl), "{report:#}");

    // Damage the target: one item deleted, one attribute changed (a renamed one), one item
    // only the target has.
    c.delete_item()
        .table_name(&dst)
        .key("id", s("k00005"))
        .key("sk", n(2))
        .send()
        .await
        .unwrap();
    let mut changed = get(&c, &dst, "k00007", 1).await.expect("copied");
    changed.insert("quux".into(), s("changed in the target"));
    let mut extra = every_type(0);
    extra.insert("id".into(), s("only-in-target"));
    put_all(&c, &dst, vec![changed, extra]).await;

    let damaged = yaml("");
    let report = daemon.run_job(VALIDATIONS, &damaged, WAIT).await["result"].clone();
    let d = &report["differences"];
    assert_eq!(
        (
            &d["missingRows"],
            &d["extraRows"],
            &d["differentValues"],
            &d["missingValues"],
            &d["extraValues"]
        ),
        (&1.into(), &1.into(), &1.into(), &0.into(), &0.into()),
        "{report:#}"
    );
    assert_eq!(report["rowsWithDifferences"], 3, "{report:#}");
    assert_eq!(report["rowsCompared"], live + 1, "{report:#}");
    assert_eq!(report["sourceRows"], live, "{report:#}");
    assert_eq!(report["targetRows"], live, "{report:#}");
    let missing = examples(&report, "missingRow");
    assert_eq!(missing.len(), 1, "{report:#}");
    assert_eq!(
        missing[0]["key"], r#""id" = 'k00005' AND "sk" = 2"#,
        "{report:#}"
    );
    assert!(missing[0].get("token").is_none(), "{report:#}");
    let extra = examples(&report, "extraRow");
    assert_eq!(extra[0]["key"], r#""id" = 'only-in-target' AND "sk" = 0"#);
    let different = examples(&report, "differentRow");
    assert_eq!(different[0]["key"], r#""id" = 'k00007' AND "sk" = 1"#);
    assert_eq!(
        different[0]["columns"],
        serde_json::json!([{
            "column": "foo", "targetColumn": "quux", "difference": "value",
            "source": "'renamed 7'", "target": "'changed in the target'"
        }]),
        "{report:#}"
    );
    if server == Server::Dynalite {
        interrupted_validation_resumes(&damaged, &report).await;
    }
    let (code, stdout, stderr) = validate_cli(&damaged, None).await;
    assert_eq!(code, Some(5), "{stdout}\n{stderr}");
    for line in [
        "DIFFERENCES FOUND: ",
        "missing rows (not in the target): 1",
        "extra rows (not in the source): 1",
        "rows with different values: 1",
        r#"- missing row: "id" = 'k00005' AND "sk" = 2"#,
        r#"- extra row: "id" = 'only-in-target' AND "sk" = 0"#,
        "    foo (target quux): value: source 'renamed 7' | target 'changed in the target'",
    ] {
        assert!(stdout.contains(line), "{line:?} not in\n{stdout}");
    }

    // copyMissingRows writes the missing item (renamed as the copy writes it), nothing else.
    let repair = yaml("  copyMissingRows: true\n");
    let report = daemon.run_job(VALIDATIONS, &repair, WAIT).await["result"].clone();
    assert_eq!(report["rowsCopied"], 1, "{report:#}");
    assert_eq!(report["differences"]["missingRows"], 1, "{report:#}");
    let mut want = every_type(5);
    let renamed = want.remove("foo").unwrap();
    want.insert("quux".into(), renamed);
    assert_eq!(get(&c, &dst, "k00005", 2).await, Some(want));
    let (code, stdout, stderr) = validate_cli(&damaged, None).await;
    assert_eq!(code, Some(5), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("rows compared") && !stdout.contains("missing rows"),
        "{stdout}"
    );
    let report = daemon.run_job(VALIDATIONS, &damaged, WAIT).await["result"].clone();
    let d = &report["differences"];
    assert_eq!(
        (&d["missingRows"], &d["extraRows"], &d["differentValues"]),
        (&0.into(), &1.into(), &1.into()),
        "{report:#}"
    );
    assert_eq!(report["rowsWithDifferences"], 2, "{report:#}");
    assert_eq!(report["rowsCopied"], 0, "{report:#}");
    drop_table(&c, &src).await;
    drop_table(&c, &dst).await;
    eprintln!("{name}: {items} items in {:.1?}", started.elapsed());
}

/// A validation of `yaml` (whose full report is `whole`) stopped by SIGINT once its savepoints
/// record units of both passes, then run again: it resumes, skips what it compared and reports
/// exactly what one run reports.
async fn interrupted_validation_resumes(yaml: &str, whole: &Value) {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("validation");
    // One segment at a time, each held to 400 read units per second: a lookup of 100 keys
    // costs 100 units, so each of the 6 segments takes about 2 s.
    let yaml = format!(
        "{}savepoints:\n  path: {}\n  intervalSeconds: 1\n",
        yaml.replace(
            "  maxMapTasks: 2\n",
            "  maxMapTasks: 1\n  readThroughput: 400\n"
        ),
        dir.path().display()
    );
    let path = test_support::cql::write_job(&yaml);
    let child = tokio::process::Command::new(drover_bin())
        .args(["validate", "--json", "--config"])
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn drover validate");
    let newest = |key: &str| -> Option<Value> {
        let name = crate::resume::savepoint_files(&saved).pop()?;
        let text = std::fs::read_to_string(saved.join(name)).ok()?;
        let doc: Value = yaml_serde::from_str(&text).ok()?;
        doc.get(key).cloned()
    };
    wait_until(
        "a validation savepoint with a unit of the second pass",
        Duration::from_secs(60),
        || {
            newest("validationTargetUnits")
                .and_then(|t| t["skipSegments"].as_array().map(Vec::len))
                .is_some_and(|n| (1..3).contains(&n))
        },
    )
    .await;
    let pid = child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("validation stopped"), "{stderr}");
    let source_done = newest("skipSegments").unwrap();
    let target_done = newest("validationTargetUnits").unwrap()["skipSegments"].clone();
    assert_eq!(source_done, serde_json::json!([0, 1, 2]), "{stderr}");
    let target_done = target_done.as_array().unwrap().len();

    let (code, stdout, stderr) = validate_cli(&yaml, Some("drover=info")).await;
    let _ = std::fs::remove_file(&path);
    assert_eq!(code, Some(5), "{stdout}\n{stderr}");
    for line in stderr
        .lines()
        .filter(|l| l.contains("resuming") || l.contains(" units: "))
    {
        eprintln!("resumed validation: {line}");
    }
    assert!(
        stderr.contains("resuming the validation from savepoint"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "6 units: 3 of the source, looked up in the target (3 skipped as compared: segments [0-2] (3)), then 3 of the target, looked up in the source ({target_done} skipped"
        )),
        "{stderr}"
    );
    // The text report of the resumed run counts every item once.
    let text_counts = format!(
        "DIFFERENCES FOUND: {} rows compared ({} source, {} target), {} matched, 3 with differences",
        whole["rowsCompared"], whole["sourceRows"], whole["targetRows"], whole["rowsMatched"]
    );
    assert!(stdout.starts_with(&text_counts), "{stdout}");
    let last = crate::resume::savepoint_files(&saved).pop().unwrap();
    let doc: Value =
        yaml_serde::from_str(&std::fs::read_to_string(saved.join(last)).unwrap()).unwrap();
    assert_eq!(doc["validationComplete"], true);
    assert_eq!(counts(&doc["validationReport"]), counts(whole));
}

/// moto keeps numbers as written (`1.50`), dynalite normalises them (`1.5`) as DynamoDB does:
/// a copy from one to the other validates clean, since numbers compare by value.
#[tokio::test]
async fn numbers_compare_by_value_across_servers() {
    let (src_c, dst_c) = (Server::Moto.client(), Server::Dynalite.client());
    let (src, dst) = (table_name("dv_numbers_src"), table_name("dv_numbers_dst"));
    keyed_table(&src_c, &src).await;
    drop_table(&dst_c, &dst).await;
    let items: Vec<Item> = (0..40)
        .map(|i| {
            [
                ("id", s(&format!("n{i}"))),
                ("sk", n(i)),
                ("price", n("1.50")),
                ("big", n("1E+2")),
                ("tiny", n("0.000100")),
                ("set", AttributeValue::Ns(vec!["2.50".into(), "1.0".into()])),
                ("nested", AttributeValue::L(vec![n("-0.0"), n("10.10")])),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
        })
        .collect();
    put_all(&src_c, &src, items).await;
    let yaml = job(
        (Server::Moto, &src),
        (Server::Dynalite, &dst),
        "  scanSegments: 2\n",
        "",
        "",
    );
    let (code, stderr) = migrate(&yaml).await;
    assert_eq!(code, Some(0), "{stderr}");
    let stored = get(&dst_c, &dst, "n3", 3).await.unwrap();
    assert_eq!(stored["price"], n("1.5"), "dynalite normalises numbers");
    assert_eq!(
        get(&src_c, &src, "n3", 3).await.unwrap()["price"],
        n("1.50"),
        "moto keeps them as written"
    );
    let (code, stdout, stderr) = validate_cli(&yaml, None).await;
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("no differences: 40 rows compared"),
        "{stdout}"
    );
    // A different value is still found, and shown as each server stores it.
    put_all(
        &dst_c,
        &dst,
        vec![{
            let mut it = stored.clone();
            it.insert("price".into(), n("1.51"));
            it
        }],
    )
    .await;
    let (code, stdout, stderr) = validate_cli(&yaml, None).await;
    assert_eq!(code, Some(5), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(
            "- different row: \"id\" = 'n3' AND \"sk\" = 3\n    price: value: source 1.50 | target 1.51"
        ),
        "{stdout}"
    );
    drop_table(&src_c, &src).await;
    drop_table(&dst_c, &dst).await;
}

/// A TCP proxy to `upstream` that can be cut: while cut, it closes every connection it holds
/// and every new one at once, as a server that went away.
struct Proxy {
    port: u16,
    cut: tokio::sync::watch::Sender<bool>,
}

impl Proxy {
    async fn start(upstream: String) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (cut, watch) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    return;
                };
                if *watch.borrow() {
                    continue; // dropped: closed at once
                }
                let upstream = upstream.clone();
                let mut watch = watch.clone();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = watch.wait_for(|cut| *cut) => {}
                    }
                });
            }
        });
        Self { port, cut }
    }

    fn set_cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }
}

/// A target that drops every connection for a while: the validation retries, its phase says
/// `waiting: ...` with the failing request, and once the target answers again it ends with
/// the report of a clean table, each item counted once.
#[tokio::test]
async fn a_target_that_goes_away_shows_waiting_and_the_validation_completes() {
    let server = Server::Dynalite;
    let c = server.client();
    let (src, dst) = (table_name("dv_wait_src"), table_name("dv_wait_dst"));
    keyed_table(&c, &src).await;
    drop_table(&c, &dst).await;
    let items = 3000;
    put_all(&c, &src, (0..items).map(every_type).collect()).await;
    // One segment at a time, 300 read units per second: a lookup of 100 keys costs 100, so
    // the validation takes about 10 s per pass.
    let yaml = job(
        (server, &src),
        (server, &dst),
        "  scanSegments: 3\n  maxMapTasks: 1\n  readThroughput: 300\n",
        "",
        "",
    );
    let (code, stderr) = migrate(&yaml).await;
    assert_eq!(code, Some(0), "{stderr}");
    let url = server.url();
    let proxy = Proxy::start(url.trim_start_matches("http://").to_string()).await;
    let (_, port) = server.endpoint();
    let through_proxy = {
        // The target's endpoint is the second one.
        let at = yaml.rfind(&format!("port: {port}\n")).unwrap();
        let mut y = yaml.clone();
        y.replace_range(
            at..at + format!("port: {port}\n").len(),
            &format!("port: {}\n", proxy.port),
        );
        y
    };
    let daemon = Daemon::fresh("").await;
    let id = daemon.submit_job(VALIDATIONS, &through_proxy).await;
    let url = format!("{VALIDATIONS}/{id}");
    daemon
        .wait_for(&url, WAIT, |j| {
            j["progress"]["sourceRows"].as_u64() > Some(0)
        })
        .await;
    proxy.set_cut(true);
    let waiting = daemon
        .wait_for(&url, WAIT, |j| {
            j["state"] != "RUNNING"
                || j["phase"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("waiting: "))
        })
        .await;
    assert_eq!(waiting["state"], "RUNNING", "{waiting}");
    let phase = waiting["phase"].as_str().unwrap();
    assert!(
        phase.contains("target") && phase.contains(&dst),
        "the phase names the failing request: {phase}"
    );
    assert!(
        waiting["progress"]["retries"].as_u64() > Some(0),
        "{waiting}"
    );
    eprintln!("phase while the target is away: {phase}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    proxy.set_cut(false);
    let done = daemon.wait_for(&url, WAIT, test_support::ended).await;
    assert_eq!(done["state"], "SUCCEEDED", "{done}\n{}", daemon.logs());
    let report = &done["result"];
    assert_eq!(report["rowsCompared"], items, "{report:#}");
    assert_eq!(report["rowsMatched"], items, "{report:#}");
    assert_eq!(report["rowsWithDifferences"], 0, "{report:#}");
    drop_table(&c, &src).await;
    drop_table(&c, &dst).await;
}

#[tokio::test]
async fn moto_damage_is_reported_by_key_and_missing_items_copied() {
    damage_is_reported_and_missing_items_copied(Server::Moto, 300).await;
}

#[tokio::test]
async fn dynalite_damage_is_reported_by_key_and_missing_items_copied() {
    damage_is_reported_and_missing_items_copied(Server::Dynalite, 2500).await;
}
