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
        drover::migrate::config::JobConfig::parse(job["stringData"]["job.yaml"].as_str().unwrap())
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
