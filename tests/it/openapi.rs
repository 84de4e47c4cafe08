use std::path::Path;

use serde_json::Value;

use axum::body::Body;
use axum::http::Request;
use test_support::{App, drover_bin};

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

/// The committed document, as JSON values (read independently of the generator's types).
fn committed() -> Value {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi/drover.yaml"))
            .expect("openapi/drover.yaml");
    yaml_serde::from_str(&text).expect("openapi/drover.yaml parses as YAML")
}

const METHODS: [&str; 5] = ["get", "put", "post", "delete", "patch"];

/// Every operation of the document: (method, path, operation).
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in METHODS {
            if let Some(op) = item.get(method) {
                out.push((method.to_string(), path.clone(), op.clone()));
            }
        }
    }
    out
}

/// The schema reference of a response's JSON body, if any.
fn json_schema_ref(response: &Value) -> Option<&str> {
    response["content"]["application/json"]["schema"]["$ref"].as_str()
}

const ERROR_REF: &str = "#/components/schemas/ErrorBody";

#[test]
fn every_operation_declares_its_errors_with_the_error_schema() {
    let doc = committed();
    let error = &doc["components"]["schemas"]["ErrorBody"];
    let mut required: Vec<&str> = error["required"]
        .as_array()
        .expect("ErrorBody.required")
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    required.sort();
    assert_eq!(required, ["code", "message", "status"], "{error}");
    assert_eq!(error["properties"]["status"]["type"], "string", "{error}");
    assert_eq!(error["properties"]["code"]["type"], "integer", "{error}");
    assert_eq!(error["properties"]["message"]["type"], "string", "{error}");

    let ops = operations(&doc);
    assert!(ops.len() >= 30, "{} operations", ops.len());
    let mut ids = std::collections::BTreeSet::new();
    for (method, path, op) in &ops {
        let what = format!("{} {path}", method.to_uppercase());
        let id = op["operationId"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: no operationId"));
        assert!(
            ids.insert(id.to_string()),
            "{what}: operationId {id} is not unique"
        );
        let responses = op["responses"]
            .as_object()
            .unwrap_or_else(|| panic!("{what}: no responses"));
        for (code, response) in responses {
            let code: u16 = code
                .parse()
                .unwrap_or_else(|_| panic!("{what}: response {code}"));
            // The node's health answers its own NOT_OK body, as the Sidecar's does.
            let node_health =
                path == "/api/v1/cassandra/native/__health" || path == "/api/v1/cassandra/__health";
            if code >= 400 && !(node_health && code == 503) {
                assert_eq!(
                    json_schema_ref(response),
                    Some(ERROR_REF),
                    "{what}: response {code} must carry the error shape: {response}"
                );
            }
        }
        // An id in the path can name nothing; a body can be malformed.
        if path.contains('{') {
            assert!(
                responses.contains_key("404"),
                "{what} has a path parameter but no 404"
            );
        }
        if op.get("requestBody").is_some() {
            assert!(
                responses.contains_key("400"),
                "{what} takes a body but declares no 400"
            );
        }
    }
}

/// Checked by a validator that shares nothing with the generator (openapi-spec-validator from
/// PyPI, installed by scripts/testenv): the structure of OpenAPI 3.1 itself, unique operation
/// ids, resolvable references.
#[test]
fn the_document_passes_an_independent_openapi_validator() {
    let validator = std::env::var("DROVER_TEST_OPENAPI_VALIDATOR").expect(
        "DROVER_TEST_OPENAPI_VALIDATOR (source target/testenv/env after scripts/testenv up)",
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi/drover.yaml");
    let out = std::process::Command::new(&validator)
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("run {validator}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(": OK"),
        "{validator} refused openapi/drover.yaml:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every route, called the wrong way (ids that name nothing, bodies that are not JSON, query
/// values that mean nothing), answers an error the document declares for it, in the error shape.
/// The router in process: what it answers is the daemon's answer.
#[tokio::test]
async fn errors_the_daemon_answers_are_the_ones_the_document_declares() {
    let doc = committed();
    let app = App::new("").await;
    let mut errors_seen = 0;
    for (method, path, op) in operations(&doc) {
        let mut url = path.clone();
        let mut query = Vec::new();
        for param in op["parameters"].as_array().into_iter().flatten() {
            let name = param["name"].as_str().unwrap();
            match param["in"].as_str().unwrap() {
                "path" => url = url.replace(&format!("{{{name}}}"), "no-such-thing"),
                "query" => query.push((name.to_string(), "no-such-value".to_string())),
                _ => {}
            }
        }
        let uri = if query.is_empty() {
            url.clone()
        } else {
            let pairs: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{url}?{}", pairs.join("&"))
        };
        let req = Request::builder()
            .method(method.to_uppercase().as_str())
            .uri(uri);
        let req = if matches!(method.as_str(), "post" | "put" | "patch") {
            req.header("content-type", "application/json")
                .body(Body::from("{\"not json"))
        } else {
            req.body(Body::empty())
        };
        let (status, body) = app.send(req.unwrap()).await;
        let what = format!("{} {url}", method.to_uppercase());
        if status < 400 {
            continue;
        }
        errors_seen += 1;
        assert!(
            body.is_object(),
            "{what}: {status} without a JSON body: {body}"
        );
        assert_eq!(body["code"], status, "{what}: {body}");
        assert!(
            body["status"].is_string() && body["message"].is_string(),
            "{what}: {body}"
        );
        let declared = &op["responses"][status.to_string()];
        assert!(
            !declared.is_null(),
            "{what} answered {status}, which the document does not declare: {body}"
        );
        if path != "/api/v1/cassandra/native/__health" {
            assert_eq!(json_schema_ref(declared), Some(ERROR_REF), "{what}");
        }
    }
    // Most routes must have been driven into an error, or this test proves nothing.
    assert!(
        errors_seen >= 25,
        "only {errors_seen} routes answered an error"
    );
}
