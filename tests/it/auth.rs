//! Authentication and authorization at the HTTP edge: every route of the OpenAPI document,
//! asked with each kind of caller, answers 401, 403, or reaches its handler.

use axum::body::Body;
use axum::http::{Method, Request};
use test_support::App;

const AUTH: &str = "auth:
  tokens:
    - {id: r, sha256: ba5005a40cf5212e4ac0190104cc127edab013294bb71279a975b27a80982d45, roles: [reader]}
    - {id: o, sha256: 0850123315d21ab90f4f7236408a52ef6dbd6a02a6550e5c10dc73f4d993680e, roles: [operator]}
    - {id: p, sha256: 493a178d1badd6ef2187860f907ec6be297f4154380d4c2a4952936655ea66fb, roles: [peer]}
    - {id: a, sha256: 10a4c7c9fc5206d6f36dc6944a81bb6f4a3cb0e25014ae3b12e6c3e52712292a, roles: [admin]}
    - {id: boss, sha256: 673e0b86626e1976dc1d5d4723c64674b0057b4f5b0f65f51758814a3d82c458, roles: []}
  admin_identities: ['token:boss']
";

/// Every operation of the API: method and a concrete path.
fn operations() -> Vec<(Method, String)> {
    let doc = drover::api::openapi();
    let mut ops = Vec::new();
    for (path, item) in &doc.paths.paths {
        let concrete = path
            .replace("{id}", "nope")
            .replace("{taskId}", "nope")
            .replace("{dirType}", "data")
            .replace("{dirIndex}", "0")
            .replace("{path}", "x");
        for (method, op) in [
            (Method::GET, &item.get),
            (Method::POST, &item.post),
            (Method::PUT, &item.put),
            (Method::PATCH, &item.patch),
            (Method::DELETE, &item.delete),
        ] {
            if op.is_some() {
                ops.push((method, concrete.clone()));
            }
        }
    }
    ops
}

/// Whether a route is one of the Sidecar's cluster-metadata routes, which need an operator or
/// a peer (the callers of the bulk routes they lead to) and are always on.
fn sidecar_metadata(path: &str) -> bool {
    path.starts_with("/api/v1/cassandra/settings")
        || path.starts_with("/api/v1/cassandra/ring")
        || path == "/api/v1/time-skew"
        || path.ends_with("/schema")
        || path.ends_with("/token-range-replicas")
}

/// The role a route needs, as the API documentation promises it; `None` for health.
fn role_of(method: &Method, path: &str) -> Option<&'static str> {
    if path.ends_with("__health") {
        return None;
    }
    Some(if path.starts_with("/api/v1/live-migration/files") {
        "peer"
    } else if path == "/api/v1/admin/live-migration" && method == Method::PUT
        || path == "/api/v1/live-migration/status" && method != Method::GET
    {
        "admin"
    } else if method == Method::GET {
        "reader"
    } else {
        "operator"
    })
}

async fn ask(app: &App, method: &Method, path: &str, token: Option<&str>) -> (u16, bool) {
    let (status, body) = ask_body(app, method, path, token).await;
    (status, body.is_object())
}

async fn ask_body(
    app: &App,
    method: &Method,
    path: &str,
    token: Option<&str>,
) -> (u16, serde_json::Value) {
    let mut request = Request::builder().method(method.clone()).uri(path);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    if method != Method::GET && method != Method::DELETE {
        request = request.header("content-type", "application/json");
    }
    let request = request.body(Body::from("{}")).expect("request");
    app.send(request).await
}

#[tokio::test]
async fn every_route_answers_each_caller_by_its_role() {
    let app = App::new(AUTH).await;
    let callers: [(&str, Option<&str>, &[&str]); 7] = [
        ("no credentials", None, &[]),
        ("bad token", Some("guess"), &[]),
        ("reader", Some("reader-token"), &["reader"]),
        ("operator", Some("operator-token"), &["operator"]),
        ("peer", Some("peer-token"), &["peer"]),
        ("admin", Some("admin-token"), &["admin"]),
        (
            "admin_identities",
            Some("boss-token"),
            &["reader", "operator", "peer", "admin"],
        ),
    ];
    let ops = operations();
    assert!(ops.len() >= 35, "{} operations", ops.len());
    for (method, path) in &ops {
        for (who, token, roles) in &callers {
            let (status, json) = ask(&app, method, path, *token).await;
            assert!(
                status < 400 || json,
                "{method} {path} as {who}: not the JSON error shape"
            );
            let role = role_of(method, path);
            // Clearing the status is the step after a node has left migration_map (Sidecar's
            // last phase): a node that is not in the map answers it as any route.
            let cleanup = path == "/api/v1/live-migration/status" && method == Method::DELETE;
            if (path.starts_with("/api/v1/live-migration")
                || path.starts_with("/api/v1/uploads/")
                || path.starts_with("/api/v1/keyspaces/"))
                && !cleanup
                && !sidecar_metadata(path)
            {
                // Live migration, SSTable uploads and snapshots are off: 404 whoever asks, so the route's
                // existence is not revealed to an unauthenticated caller.
                assert_eq!(status, 404, "{method} {path} as {who}");
                // Nor that it is a live-migration route: the answer is an unknown path's.
                let (_, body) = ask_body(&app, method, path, *token).await;
                assert_eq!(
                    body["message"],
                    format!("no route for {path}"),
                    "{method} {path} as {who}"
                );
                continue;
            }
            let expected = match role {
                None => "through",
                Some(_) if sidecar_metadata(path) => {
                    if token.is_none() || *who == "bad token" {
                        "401"
                    } else if roles.contains(&"operator") || roles.contains(&"peer") {
                        "through"
                    } else {
                        "403"
                    }
                }
                Some(_) if token.is_none() || *who == "bad token" => "401",
                Some(role) if roles.contains(&role) => "through",
                Some(_) => "403",
            };
            match expected {
                "through" => assert!(
                    status != 401 && status != 403,
                    "{method} {path} as {who}: {status}"
                ),
                code => assert_eq!(status.to_string(), code, "{method} {path} as {who}"),
            }
        }
    }
}

#[tokio::test]
async fn health_can_be_closed() {
    let app = App::new(&format!("{AUTH}  health_open: false\n")).await;
    let (status, body) = app.get("/api/v1/__health").await;
    assert_eq!(status, 401);
    assert_eq!(body["code"], 401);
    let request = Request::builder()
        .uri("/api/v1/__health")
        .header("authorization", "Bearer reader-token")
        .body(Body::empty())
        .expect("request");
    assert_eq!(app.send(request).await.0, 200);
}

#[tokio::test]
async fn without_an_auth_section_the_api_stays_open() {
    let app = App::new("").await;
    assert_eq!(app.get("/api/v1/jobs").await.0, 200);
}

#[tokio::test]
async fn sstable_snapshots_need_an_operator_or_a_peer() {
    let app = App::new(&format!(
        "{AUTH}sstable_snapshots:\n  enabled: true\ncassandra:\n  data_file_directories: [/nonexistent]\n"
    ))
    .await;
    let base = "/api/v1/keyspaces/ks/tables/t/snapshots/s";
    let routes = [
        (Method::GET, base.to_string()),
        (Method::DELETE, base.to_string()),
        (Method::GET, format!("{base}/components/nb-1-big-Data.db")),
    ];
    for (method, path) in &routes {
        for (who, token, want) in [
            ("no credentials", None, 401),
            ("reader", Some("reader-token"), 403),
            ("admin", Some("admin-token"), 403),
            // Through to the handler: there is no such snapshot.
            ("operator", Some("operator-token"), 404),
            ("peer", Some("peer-token"), 404),
        ] {
            let (status, body) = ask_body(&app, method, path, token).await;
            assert_eq!(status, want, "{method} {path} as {who}: {body}");
            if want == 404 {
                assert!(
                    body["message"]
                        .as_str()
                        .unwrap()
                        .contains("Snapshot 's' not found"),
                    "{body}"
                );
            }
        }
    }
}

#[tokio::test]
async fn sstable_uploads_need_an_operator_or_a_peer() {
    let app = App::new(&format!("{AUTH}sstable_uploads:\n  enabled: true\n")).await;
    let id = "0190c0de-7d3e-7cbe-8a7c-0000000000c3";
    let routes = [
        (
            Method::PUT,
            format!("/api/v1/uploads/{id}/keyspaces/ks/tables/t/import"),
        ),
        (Method::DELETE, format!("/api/v1/uploads/{id}")),
    ];
    for (method, path) in &routes {
        for (who, token, want) in [
            ("no credentials", None, 401),
            ("reader", Some("reader-token"), 403),
            ("admin", Some("admin-token"), 403),
            // Through to the handler: there is no such upload.
            ("operator", Some("operator-token"), 404),
            ("peer", Some("peer-token"), 404),
        ] {
            let (status, body) = ask_body(&app, method, path, token).await;
            assert_eq!(status, want, "{method} {path} as {who}: {body}");
            if want == 404 {
                assert!(
                    body["message"].as_str().unwrap().contains("no upload"),
                    "{body}"
                );
            }
        }
    }
}
