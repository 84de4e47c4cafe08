use std::path::Path;

use crate::support::drover_bin;

#[test]
fn committed_openapi_document_is_current() {
    let committed =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi/drover.yaml"))
            .expect("openapi/drover.yaml");
    let generated = drover::api::openapi_yaml();
    assert!(
        committed == generated,
        "openapi/drover.yaml is stale: run `cargo run -- openapi > openapi/drover.yaml` and commit it"
    );
    // The CLI prints the same document.
    let out = std::process::Command::new(drover_bin())
        .arg("openapi")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), generated);
}

#[test]
fn every_route_is_documented_with_the_error_shape() {
    let doc = drover::api::openapi();
    let paths: Vec<_> = doc.paths.paths.keys().cloned().collect();
    for expected in [
        "/api/v1/__health",
        "/api/v1/cassandra/native/__health",
        "/api/v1/jobs",
        "/api/v1/jobs/{id}",
        "/api/v1/jobs/{id}/cancel",
        "/api/v1/diagnostics/jobs",
        "/metrics",
    ] {
        assert!(
            paths.iter().any(|p| p == expected),
            "{expected} missing from {paths:?}"
        );
    }
    let schemas = &doc.components.as_ref().unwrap().schemas;
    assert!(schemas.contains_key("ErrorBody"));
}
