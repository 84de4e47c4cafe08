//! The Kubernetes manifests under `deploy/kubernetes`: valid against the Kubernetes API's own
//! schemas (strictly: an unknown or misspelt field fails), and the drover files they carry
//! (the daemon config, the shared job) read by drover itself.

use std::path::PathBuf;

fn manifests() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "{files:?}");
    files
}

/// Every document of every manifest, as JSON values.
fn documents() -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for file in manifests() {
        let text = std::fs::read_to_string(&file).unwrap();
        for doc in text.split("\n---\n") {
            let value: serde_json::Value =
                yaml_serde::from_str(doc).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            if !value.is_null() {
                out.push(value);
            }
        }
    }
    out
}

#[tokio::test]
async fn kubernetes_manifests_validate_against_the_api_schemas() {
    let validator = std::env::var("DROVER_TEST_KUBERNETES_VALIDATE")
        .expect("DROVER_TEST_KUBERNETES_VALIDATE (source target/testenv/env)");
    let out = tokio::process::Command::new(&validator)
        .args(["--strict", "--kubernetes-version", "1.31.0"])
        .args(manifests())
        .output()
        .await
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{report}");
    for kind in ["statefulset/", "job/", "configmap/", "secret/"] {
        assert!(
            report.contains(&format!("passed for resource {kind}")),
            "{report}"
        );
    }

    // The validator does bite: a misspelt field fails.
    let bad = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    let sidecar = manifests()
        .into_iter()
        .find(|p| p.ends_with("drover-sidecar.yaml"))
        .unwrap();
    let text = std::fs::read_to_string(sidecar)
        .unwrap()
        .replace("  replicas: 3", "  replica: 3");
    std::fs::write(bad.path(), text).unwrap();
    let out = tokio::process::Command::new(&validator)
        .args(["--strict", "--kubernetes-version", "1.31.0"])
        .arg(bad.path())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn the_drover_files_in_the_manifests_are_read_by_drover() {
    let docs = documents();
    let config = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "drover-config")
        .expect("the daemon's ConfigMap");
    let text = config["data"]["drover.yaml"].as_str().unwrap();
    // Every key known (files named in it exist only in the pod).
    let parsed: Result<drover::config::DaemonConfig, _> = yaml_serde::from_str(text);
    assert!(parsed.is_ok(), "{:?}", parsed.err());

    let job = docs
        .iter()
        .find(|d| d["kind"] == "Secret" && d["stringData"]["job.yaml"].is_string())
        .expect("the shared job's Secret");
    let job =
        drover::engine::config::JobConfig::parse(job["stringData"]["job.yaml"].as_str().unwrap())
            .unwrap();
    let coordination = job.coordination.expect("a shared job");
    assert_eq!(coordination.job_id.as_deref(), Some("orders-2026-12"));

    // Probes reach the health routes the daemon serves.
    let sts = docs.iter().find(|d| d["kind"] == "StatefulSet").unwrap();
    let drover_container = sts["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "drover")
        .unwrap();
    for (probe, path) in [
        ("livenessProbe", "/api/v1/__health"),
        ("readinessProbe", "/api/v1/cassandra/native/__health"),
    ] {
        assert_eq!(drover_container[probe]["httpGet"]["path"], path);
    }
    let k8s_job = docs.iter().find(|d| d["kind"] == "Job").unwrap();
    assert_eq!(
        k8s_job["spec"]["parallelism"],
        k8s_job["spec"]["completions"]
    );
}

fn promtool() -> String {
    std::env::var("DROVER_TEST_PROMTOOL").expect("DROVER_TEST_PROMTOOL (source target/testenv/env)")
}

fn prometheus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus")
}

fn run(cmd: &mut std::process::Command) -> (bool, String) {
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn alert_rules_pass_promtool_and_their_unit_tests() {
    let dir = prometheus_dir();
    let (ok, report) = run(std::process::Command::new(promtool())
        .args(["check", "rules"])
        .arg(dir.join("drover-alerts.yaml")));
    assert!(ok, "{report}");
    assert!(report.contains("SUCCESS: 8 rules found"), "{report}");
    let (ok, report) = run(std::process::Command::new(promtool())
        .current_dir(&dir)
        .args(["test", "rules", "drover-alerts.test.yaml"]));
    assert!(ok, "{report}");

    // The unit tests bite: a rule with another threshold fails them.
    let tmp = tempfile::tempdir().unwrap();
    let rules = std::fs::read_to_string(dir.join("drover-alerts.yaml")).unwrap();
    let changed = rules.replace("streamLagSeconds\"} > 300", "streamLagSeconds\"} > 900");
    assert_ne!(changed, rules);
    std::fs::write(tmp.path().join("drover-alerts.yaml"), changed).unwrap();
    std::fs::copy(
        dir.join("drover-alerts.test.yaml"),
        tmp.path().join("drover-alerts.test.yaml"),
    )
    .unwrap();
    let (ok, report) = run(std::process::Command::new(promtool())
        .current_dir(tmp.path())
        .args(["test", "rules", "drover-alerts.test.yaml"]));
    assert!(!ok, "a changed threshold passed the unit tests:\n{report}");
    assert!(report.contains("DroverReplicationLagHigh"), "{report}");
}

/// Every query of every panel, with the dashboard's variables given values.
fn dashboard_queries(dashboard: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            out.push(target["expr"].as_str().unwrap().replace("$instance", ".*"));
        }
    }
    out
}

/// `drover_...` names a query uses.
fn metric_names(query: &str) -> Vec<String> {
    let re = regex::Regex::new(r"\bdrover_[a-z_]+\b").unwrap();
    re.find_iter(query)
        .map(|m| m.as_str().to_string())
        .collect()
}

#[tokio::test]
async fn the_dashboard_loads_and_queries_what_the_daemon_exports() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana/drover-dashboard.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    // What Grafana needs to load it: a uid and title, a schema version it migrates from, panels
    // with unique ids and a place on the grid, and the data source as a variable (so that an
    // import asks for one).
    assert_eq!(dashboard["uid"], "drover-overview");
    assert!(dashboard["schemaVersion"].as_u64().unwrap() >= 36);
    let variables: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(variables, ["datasource", "instance"]);
    let mut ids = std::collections::BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        assert!(
            ids.insert(panel["id"].as_u64().unwrap()),
            "duplicate id: {panel}"
        );
        let grid = &panel["gridPos"];
        for key in ["x", "y", "w", "h"] {
            assert!(grid[key].is_u64(), "{panel}");
        }
        assert!(
            grid["x"].as_u64().unwrap() + grid["w"].as_u64().unwrap() <= 24,
            "{panel}"
        );
        if panel["type"] != "row" {
            assert_eq!(panel["datasource"]["uid"], "${datasource}", "{panel}");
            assert!(!panel["targets"].as_array().unwrap().is_empty(), "{panel}");
        }
    }
    let queries = dashboard_queries(&dashboard);
    assert!(queries.len() >= 20, "{}", queries.len());

    // Every query is PromQL that Prometheus parses: promtool checks them as recording rules.
    let rules = serde_json::json!({
        "groups": [{
            "name": "dashboard",
            "rules": queries.iter().enumerate().map(|(i, q)| serde_json::json!({
                "record": format!("dashboard:query_{i}"),
                "expr": q,
            })).collect::<Vec<_>>(),
        }]
    });
    let file = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    std::fs::write(file.path(), yaml_serde::to_string(&rules).unwrap()).unwrap();
    let (ok, report) = run(std::process::Command::new(promtool())
        .args(["check", "rules"])
        .arg(file.path()));
    assert!(ok, "{report}");

    // And every metric they and the alert rules name is one a running daemon exports.
    // A daemon that has served requests (an audited one among them) and runs a job, so that
    // every family has a series to show.
    let daemon = test_support::Daemon::fresh("").await;
    let (status, accepted) = daemon
        .post_json(
            "/api/v1/diagnostics/jobs",
            &serde_json::json!({"durationSeconds": 60}),
        )
        .await;
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["jobId"].as_str().unwrap().to_string();
    daemon
        .wait_job(&id, std::time::Duration::from_secs(30), |j| {
            j["progress"]["secondsElapsed"].as_u64() >= Some(1)
        })
        .await;
    daemon.get_text("/metrics").await;
    let metrics = daemon.get_text("/metrics").await;
    daemon
        .post_json(&format!("/api/v1/jobs/{id}/cancel"), &serde_json::json!({}))
        .await;
    let families: std::collections::BTreeSet<&str> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let alerts = std::fs::read_to_string(prometheus_dir().join("drover-alerts.yaml")).unwrap();
    let named: std::collections::BTreeSet<String> = queries
        .iter()
        .map(String::as_str)
        .chain([alerts.as_str()])
        .flat_map(metric_names)
        .collect();
    for name in &named {
        let family = ["_total", "_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        assert!(
            families.contains(name.as_str()) || families.contains(family),
            "{name} is queried but not exported; /metrics has {families:?}"
        );
    }
    // The instance picker reads a family every daemon exports from its start.
    let picker = dashboard["templating"]["list"][1]["query"]["query"]
        .as_str()
        .unwrap();
    assert_eq!(picker, "label_values(drover_build_info, instance)");
    assert!(families.contains("drover_build_info"), "{families:?}");

    // Every panel that does not select one job counter by name resolves: evaluated by
    // Prometheus' engine (promtool test rules) over the series of this daemon's /metrics, no
    // query comes back empty. (A counter a job publishes only exists while such a job runs,
    // and a healthy daemon has answered no 5xx: those panels are checked by name, above and
    // below.)
    let series: Vec<serde_json::Value> = metrics
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap();
            serde_json::json!({"series": series, "values": format!("{value}+0x20")})
        })
        .collect();
    let resolvable: Vec<&String> = queries
        .iter()
        .filter(|q| !q.contains("counter=") && !q.contains("status=~\"5..\""))
        .collect();
    assert!(resolvable.len() >= 18, "{}", resolvable.len());
    let dir = tempfile::tempdir().unwrap();
    let rules = serde_json::json!({
        "groups": [{
            "name": "dashboard",
            "rules": resolvable.iter().enumerate().map(|(i, q)| serde_json::json!({
                "alert": format!("Empty{i}"),
                "expr": format!("absent({q})"),
            })).collect::<Vec<_>>(),
        }]
    });
    std::fs::write(
        dir.path().join("rules.yaml"),
        yaml_serde::to_string(&rules).unwrap(),
    )
    .unwrap();
    let test = serde_json::json!({
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": (0..resolvable.len()).map(|i| serde_json::json!({
                "eval_time": "10m",
                "alertname": format!("Empty{i}"),
                "exp_alerts": [],
            })).collect::<Vec<_>>(),
        }]
    });
    std::fs::write(
        dir.path().join("test.yaml"),
        yaml_serde::to_string(&test).unwrap(),
    )
    .unwrap();
    let (ok, report) = run(std::process::Command::new(promtool())
        .current_dir(dir.path())
        .args(["test", "rules", "test.yaml"]));
    let queries_by_alert: Vec<String> = resolvable
        .iter()
        .enumerate()
        .map(|(i, q)| format!("Empty{i}: {q}"))
        .collect();
    assert!(
        ok,
        "dashboard queries that come back empty on a daemon's /metrics:\n{report}\n{}",
        queries_by_alert.join("\n")
    );

    // The job counters they select by name are counters jobs publish.
    let sources = [
        "src/engine",
        "src/validate/progress.rs",
        "src/livemigration/tasks/jobs.rs",
        "src/jobs/running.rs",
        "src/connectors/dynamodb",
        "src/migrate",
    ];
    let mut code = String::new();
    for s in sources {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(s);
        let files: Vec<PathBuf> = if p.is_dir() { walk(&p) } else { vec![p] };
        for f in files {
            code.push_str(&std::fs::read_to_string(f).unwrap());
        }
    }
    let counter = regex::Regex::new(r#"counter=~?"([A-Za-z|]+)""#).unwrap();
    for text in queries.iter().map(String::as_str).chain([alerts.as_str()]) {
        for c in counter.captures_iter(text) {
            for name in c[1].split('|') {
                assert!(
                    code.contains(&format!("\"{name}\"")),
                    "counter {name} is queried but no job publishes it"
                );
            }
        }
    }
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}
