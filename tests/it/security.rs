//! Issue 13's credentials and request checks beyond the role table of `auth`: JWTs signed in
//! the test, the tokens file and its reload, the `hash-token` helper, the audit trail, the
//! rate limit, and the Host, Origin and Content-Type refusals — in process where no socket is
//! needed, against the real binary otherwise.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::http::{Method, Request};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use test_support::{App, Daemon, Home, json_of};

pub(crate) const ISSUER: &str = "https://idp.example";
pub(crate) const AUDIENCE: &str = "drover";

pub(crate) fn sha(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// An ES256 signing key of an identity provider, made for the test.
pub(crate) struct Signer {
    key: EncodingKey,
    pub(crate) public_pem: String,
    kid: Option<String>,
}

impl Signer {
    pub(crate) fn new(kid: Option<&str>) -> Self {
        let pair = rcgen::KeyPair::generate().expect("key pair");
        Self {
            key: EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes()).expect("EC key"),
            public_pem: pair.public_key_pem(),
            kid: kid.map(str::to_string),
        }
    }

    fn jwk(&self) -> Value {
        let mut jwk = jsonwebtoken::jwk::Jwk::from_encoding_key(&self.key, Algorithm::ES256)
            .expect("JWK of the key");
        jwk.common.key_id = self.kid.clone();
        serde_json::to_value(jwk).unwrap()
    }

    pub(crate) fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = self.kid.clone();
        jsonwebtoken::encode(&header, claims, &self.key).expect("sign")
    }
}

/// Claims that pass every check, for `sub` holding `roles`.
pub(crate) fn claims(sub: &str, roles: &[&str]) -> Value {
    json!({"sub": sub, "roles": roles, "iss": ISSUER, "aud": AUDIENCE, "iat": now(), "exp": now() + 600})
}

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    claims[key] = value;
    claims
}

fn request(method: Method, path: &str, token: Option<&str>, body: Option<&Value>) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(path);
    if let Some(token) = token {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    match body {
        Some(body) => builder
            .header("content-type", "application/json")
            .body(Body::from(body.to_string())),
        None => builder.body(Body::empty()),
    }
    .unwrap()
}

async fn app_at(home: &Home, extra: &str, server: &str) -> App {
    let path = home.write_config_edited(
        extra,
        &[(
            "  diagnostics: true\n",
            &format!("  diagnostics: true\n{server}"),
        )],
    );
    App::with_config(home, &path).await
}

fn write(path: &Path, text: &str) {
    // Written aside and renamed over, as an operator's tooling would, so no reader sees half.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn wait_job() -> Value {
    json!({"durationSeconds": 30})
}

#[tokio::test]
async fn jwt_roles_apply_and_bad_tokens_get_401_without_echoing_them() {
    let home = Home::new();
    let idp = Signer::new(None);
    let key_file = home.path().join("idp.pem");
    std::fs::write(&key_file, &idp.public_pem).unwrap();
    let extra = format!(
        "auth:\n  tokens:\n    - {{id: hashed, sha256: {}, roles: [reader]}}\n  admin_identities: ['jwt:{ISSUER}#root@example']\n  jwt:\n    public_key_file: {}\n    issuer: {ISSUER}\n    audience: {AUDIENCE}\n",
        sha("plain-token"),
        key_file.display()
    );
    let app = app_at(&home, &extra, "").await;

    let reader = idp.sign(&claims("alice", &["reader"]));
    let (status, body) = app
        .send(request(Method::GET, "/api/v1/jobs", Some(&reader), None))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = app
        .send(request(
            Method::POST,
            "/api/v1/diagnostics/jobs",
            Some(&reader),
            Some(&wait_job()),
        ))
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("alice does not hold the operator role"),
        "{body}"
    );

    let operator = idp.sign(&claims("ops", &["operator", "not-a-role"]));
    let (status, body) = app
        .send(request(
            Method::POST,
            "/api/v1/diagnostics/jobs",
            Some(&operator),
            Some(&wait_job()),
        ))
        .await;
    assert_eq!(status, 202, "{body}");
    let (status, _) = app
        .send(request(Method::GET, "/api/v1/jobs", Some(&operator), None))
        .await;
    assert_eq!(status, 403, "roles do not imply one another");

    // An identity named in admin_identities holds every role, whatever its claim says.
    let root = idp.sign(&claims("root@example", &[]));
    let (status, body) = app
        .send(request(
            Method::PUT,
            "/api/v1/admin/live-migration",
            Some(&root),
            Some(&json!({"enabled": false})),
        ))
        .await;
    assert_eq!(status, 200, "{body}");

    // A token that is not a JWT is still looked up among the hashes.
    let (status, _) = app
        .send(request(
            Method::GET,
            "/api/v1/jobs",
            Some("plain-token"),
            None,
        ))
        .await;
    assert_eq!(status, 200);

    let other_idp = Signer::new(None);
    let hs256 = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims("alice", &["reader"]),
        &EncodingKey::from_secret(b"guessable").unwrap(),
    )
    .unwrap();
    let base = claims("alice", &["reader"]);
    let bad: [(&str, String, &str); 8] = [
        (
            "expired",
            idp.sign(&with(base.clone(), "exp", json!(now() - 3600))),
            "expired",
        ),
        (
            "not yet valid",
            idp.sign(&with(base.clone(), "nbf", json!(now() + 3600))),
            "not valid yet",
        ),
        (
            "wrong audience",
            idp.sign(&with(base.clone(), "aud", json!("someone-else"))),
            "audience",
        ),
        (
            "wrong issuer",
            idp.sign(&with(base.clone(), "iss", json!("https://evil.example"))),
            "issuer",
        ),
        ("wrong key", other_idp.sign(&base), "signature"),
        ("shared-secret algorithm", hs256, "algorithm"),
        (
            "no exp",
            idp.sign(&json!({"sub": "alice", "roles": ["reader"], "iss": ISSUER, "aud": AUDIENCE})),
            "exp",
        ),
        (
            "no subject",
            idp.sign(
                &json!({"roles": ["reader"], "iss": ISSUER, "aud": AUDIENCE, "exp": now() + 600}),
            ),
            "\"sub\"",
        ),
    ];
    for (what, token, reason) in bad {
        let (status, headers, body) = app
            .respond(request(Method::GET, "/api/v1/jobs", Some(&token), None))
            .await;
        assert_eq!(status, 401, "{what}: {body}");
        assert!(headers.contains_key("www-authenticate"), "{what}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(reason), "{what}: {message}");
        for part in token.split('.') {
            assert!(
                !message.contains(part),
                "{what}: the token is echoed: {message}"
            );
        }
    }
    // Tampering with the claims of a valid token breaks its signature.
    let mut parts: Vec<String> = reader.split('.').map(str::to_string).collect();
    let forged = serde_json::to_vec(&claims("alice", &["reader", "admin"])).unwrap();
    parts[1] = base64_url(&forged);
    let forged = parts.join(".");
    let (status, _) = app
        .send(request(Method::GET, "/api/v1/jobs", Some(&forged), None))
        .await;
    assert_eq!(status, 401);
}

/// Unpadded base64url, for forging a token's middle part.
fn base64_url(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ABC[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

#[tokio::test]
async fn jwks_keys_are_picked_by_kid_rotated_by_rewriting_the_file_and_roles_read_from_a_nested_claim()
 {
    let home = Home::new();
    let (old, new) = (Signer::new(Some("2025")), Signer::new(Some("2026")));
    let jwks = home.path().join("jwks.json");
    write(&jwks, &json!({"keys": [old.jwk(), new.jwk()]}).to_string());
    let extra = format!(
        "auth:\n  jwt:\n    jwks_file: {}\n    issuer: {ISSUER}\n    audience: {AUDIENCE}\n    algorithms: [ES256]\n    roles_claim: realm_access.roles\n    identity_claim: email\n",
        jwks.display()
    );
    let app = app_at(&home, &extra, "").await;
    let token = |signer: &Signer| {
        signer.sign(&json!({"email": "bob@example", "realm_access": {"roles": ["reader"]}, "iss": ISSUER, "aud": [AUDIENCE, "other"], "exp": now() + 600}))
    };
    let get = async |token: &str| {
        app.send(request(Method::GET, "/api/v1/jobs", Some(token), None))
            .await
    };
    let (old_token, new_token) = (token(&old), token(&new));
    assert_eq!(get(&old_token).await.0, 200);
    assert_eq!(get(&new_token).await.0, 200);
    // A kid names one key: signed by one, claimed to be by the other, it fails.
    let liar = Signer {
        key: old.key.clone(),
        public_pem: String::new(),
        kid: Some("2026".into()),
    };
    assert_eq!(get(&token(&liar)).await.0, 401);
    // The claim path: roles at the top level are not the configured claim.
    let flat = new.sign(&json!({"email": "bob@example", "roles": ["reader"], "iss": ISSUER, "aud": AUDIENCE, "exp": now() + 600}));
    assert_eq!(get(&flat).await.0, 403);

    // Rotation: the old key leaves the set, without a restart.
    write(&jwks, &json!({"keys": [new.jwk()]}).to_string());
    assert_eq!(get(&old_token).await.0, 401);
    assert_eq!(get(&new_token).await.0, 200);
    // A broken rewrite keeps the keys in force.
    write(&jwks, "{\"keys\": [");
    assert_eq!(get(&new_token).await.0, 200);
}

#[tokio::test]
async fn a_config_with_unusable_jwt_keys_is_refused_at_start() {
    let home = Home::new();
    let pair = rcgen::KeyPair::generate().unwrap();
    let private = home.path().join("private.pem");
    std::fs::write(&private, pair.serialize_pem()).unwrap();
    let oct = home.path().join("oct.json");
    std::fs::write(&oct, r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#).unwrap();
    let cases = [
        (
            format!("public_key_file: {}", private.display()),
            "private key",
        ),
        (format!("jwks_file: {}", oct.display()), "shared secret"),
        (
            "public_key_file: /nonexistent/key.pem".to_string(),
            "cannot read",
        ),
        (
            format!(
                "public_key_file: {}\n    algorithms: [HS256]",
                private.display()
            ),
            "shared-secret algorithm",
        ),
    ];
    for (keys, expected) in cases {
        let text = format!("auth:\n  jwt:\n    {keys}\n    issuer: i\n    audience: a\n");
        let err = drover::config::DaemonConfig::parse(
            "t.yaml",
            &text,
            home.path(),
            |_| None,
            drover::daemon::SECTION_CHECKS,
        )
        .expect_err(expected)
        .to_string();
        assert!(err.contains("auth.jwt.") && err.contains(expected), "{err}");
    }
}

#[tokio::test]
async fn the_tokens_file_is_read_again_when_it_changes() {
    let home = Home::new();
    let file = home.path().join("tokens.yaml");
    write(
        &file,
        &format!("- {{id: ci, sha256: {}, roles: [reader]}}\n", sha("first")),
    );
    let app = app_at(
        &home,
        &format!("auth:\n  tokens_file: {}\n", file.display()),
        "",
    )
    .await;
    let get = async |token: &str| {
        app.send(request(Method::GET, "/api/v1/jobs", Some(token), None))
            .await
            .0
    };
    assert_eq!(get("first").await, 200);
    assert_eq!(get("second").await, 401);

    // Rotation: the new hash replaces the old one.
    write(
        &file,
        &format!("- {{id: ci, sha256: {}, roles: [reader]}}\n", sha("second")),
    );
    assert_eq!(get("second").await, 200);
    assert_eq!(get("first").await, 401);

    // Edited in place (same inode), the change is seen too.
    std::fs::write(
        &file,
        format!(
            "- {{id: ci2, sha256: {}, roles: [reader, operator]}}\n",
            sha("third")
        ),
    )
    .unwrap();
    assert_eq!(get("third").await, 200);

    // An edit that does not parse leaves the entries in force; deleting the file revokes them.
    write(&file, "- {id: ci2, sha256: nothex}\n");
    assert_eq!(get("third").await, 200);
    std::fs::remove_file(&file).unwrap();
    assert_eq!(get("third").await, 401);
}

#[test]
fn hash_token_prints_the_hash_and_an_entry_the_config_accepts() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let run = |args: &[&str], stdin: &str| {
        let mut child = Command::new(test_support::drover_bin())
            .args(["auth", "hash-token"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let entry_of = |stdout: &str| -> String {
        stdout
            .lines()
            .find(|l| l.starts_with("- "))
            .expect("an entry")
            .to_string()
    };

    let (code, stdout, stderr) = run(
        &["--id", "ci: deploy", "--roles", "reader,operator"],
        "s3cret\n",
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains(&format!("sha256: {}", sha("s3cret"))),
        "{stdout}"
    );
    assert!(
        !stdout.contains("s3cret"),
        "the token itself is not printed: {stdout}"
    );
    let auth: drover::config::AuthConfig =
        yaml_serde::from_str(&format!("tokens:\n  {}\n", entry_of(&stdout)))
            .expect("the entry parses");
    let who = drover::auth::identify_token(&auth, "s3cret").expect("the entry accepts the token");
    assert_eq!(who.name, "token:ci: deploy");
    assert!(who.has(drover::auth::Role::Operator) && who.has(drover::auth::Role::Reader));

    let (code, stdout, _) = run(&["--generate"], "");
    assert_eq!(code, Some(0));
    let token = stdout
        .lines()
        .find_map(|l| l.strip_prefix("token: "))
        .expect("the new token");
    assert_eq!(token.len(), 64, "{token}");
    assert!(
        stdout.contains(&format!("sha256: {}", sha(token))),
        "{stdout}"
    );
    let (_, again, _) = run(&["--generate"], "");
    assert_ne!(again, stdout, "each token is new");

    let (code, _, stderr) = run(&[], "");
    assert_eq!(code, Some(2));
    assert!(stderr.contains("no token"), "{stderr}");
    let (code, _, stderr) = run(&["--roles", "root"], "x");
    assert_eq!(code, Some(2));
    assert!(stderr.contains("unknown role"), "{stderr}");
}

#[tokio::test]
async fn over_the_rate_limit_a_caller_gets_429_with_retry_after_and_others_are_not_slowed() {
    let home = Home::new();
    let extra = format!(
        "auth:\n  tokens:\n    - {{id: busy, sha256: {}, roles: [reader]}}\n    - {{id: calm, sha256: {}, roles: [reader]}}\n  rate_limit: {{per_second: 1, burst: 2}}\n",
        sha("busy"),
        sha("calm")
    );
    let app = app_at(&home, &extra, "").await;
    let ask = async |token: Option<&str>, path: &str| {
        app.respond(request(Method::GET, path, token, None)).await
    };
    // The burst is served whatever the clock does.
    assert_eq!(ask(Some("busy"), "/api/v1/jobs").await.0, 200);
    assert_eq!(ask(Some("busy"), "/api/v1/jobs").await.0, 200);
    // At one request a second, a long run of requests cannot all pass, however slow the test.
    let mut limited = None;
    for _ in 0..50 {
        let (status, headers, body) = ask(Some("busy"), "/api/v1/jobs").await;
        if status == 429 {
            limited = Some((headers, body));
            break;
        }
    }
    let (headers, body) = limited.expect("a 429 within 50 requests at 1/s");
    let retry: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry), "Retry-After {retry}");
    assert_eq!(body["code"], 429, "{body}");
    assert_eq!(body["status"], "Too Many Requests");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("auth.rate_limit"),
        "{body}"
    );

    // Another identity has its own bucket; health is never limited.
    assert_eq!(ask(Some("calm"), "/api/v1/jobs").await.0, 200);
    for _ in 0..20 {
        assert_eq!(ask(None, "/api/v1/__health").await.0, 200);
    }
    // Guessing tokens is limited too: callers without a valid credential share the
    // anonymous bucket (per address when the listener gives one).
    let mut statuses = Vec::new();
    for i in 0..50 {
        statuses.push(ask(Some(&format!("guess-{i}")), "/api/v1/jobs").await.0);
    }
    assert!(statuses.starts_with(&[401, 401]), "{statuses:?}");
    assert!(statuses.contains(&429), "{statuses:?}");
}

#[tokio::test]
async fn host_origin_and_content_type_refusals() {
    let home = Home::new();
    let extra = "live_migration:\n  migration_map:\n    src.example:9043: dst.example\n";
    let app = app_at(
        &home,
        extra,
        "  allowed_hosts: [drover.internal]\n  allowed_origins: ['https://console.example']\n",
    )
    .await;
    let with_header = |name: &str, value: &str| {
        Request::builder()
            .uri("/api/v1/jobs")
            .header(name, value)
            .body(Body::empty())
            .unwrap()
    };
    for host in [
        "localhost:9043",
        "127.0.0.1",
        "[::1]:9043",
        "drover.internal",
        "DST.example.",
        "src.example:9043",
    ] {
        let (status, body) = app.send(with_header("host", host)).await;
        assert_eq!(status, 200, "{host}: {body}");
    }
    for host in [
        "evil.example",
        "localhost.evil.example:9043",
        "drover.internal.evil",
    ] {
        let (status, body) = app.send(with_header("host", host)).await;
        assert_eq!(status, 421, "{host}: {body}");
        assert!(body["message"].as_str().unwrap().contains(host), "{body}");
    }
    // A rebinding name is refused on every route, health and unknown paths included.
    for path in ["/api/v1/__health", "/nope"] {
        let req = Request::builder()
            .uri(path)
            .header("host", "evil.example")
            .body(Body::empty())
            .unwrap();
        assert_eq!(app.send(req).await.0, 421, "{path}");
    }
    // What is echoed is capped.
    let long = format!("{}.example", "a".repeat(10_000));
    let (status, body) = app.send(with_header("host", &long)).await;
    assert_eq!(status, 421);
    assert!(body.to_string().len() < 1000, "{}", body.to_string().len());

    let (status, body) = app
        .send(with_header("origin", "https://evil.example"))
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("https://evil.example"),
        "{body}"
    );
    assert_eq!(app.send(with_header("origin", "null")).await.0, 403);
    assert_eq!(
        app.send(with_header("origin", "https://console.example"))
            .await
            .0,
        200
    );

    // A body without Content-Type, announced by its headers or not, is 415; a bodyless POST
    // and a typed body are served.
    let post = |headers: &[(&str, &str)], body: &str| {
        let mut builder = Request::builder()
            .method(Method::POST)
            .uri("/api/v1/diagnostics/jobs");
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        builder.body(Body::from(body.to_string())).unwrap()
    };
    let job = wait_job().to_string();
    let len = job.len().to_string();
    for headers in [
        vec![],
        vec![("content-length", len.as_str())],
        vec![("transfer-encoding", "chunked")],
    ] {
        let (status, body) = app.send(post(&headers, &job)).await;
        assert_eq!(status, 415, "{headers:?}: {body}");
        assert!(
            body["message"].as_str().unwrap().contains("Content-Type"),
            "{body}"
        );
    }
    // The job-file routes read their body raw: the same rule holds there.
    let req = Request::builder()
        .method(Method::POST)
        .uri("/api/v1/migrations")
        .body(Body::from("source: {}\n"))
        .unwrap();
    assert_eq!(app.send(req).await.0, 415);
    let (status, body) = app
        .send(post(&[("content-type", "application/json")], &job))
        .await;
    assert_eq!(status, 202, "{body}");
    let id = body["jobId"].as_str().unwrap();
    let (status, body) = app
        .call(Method::POST, &format!("/api/v1/jobs/{id}/cancel"))
        .await;
    assert!(
        status < 300,
        "a bodyless POST needs no Content-Type: {status} {body}"
    );
}

/// Audit records of the daemon's JSON log.
pub(crate) fn audit_lines(logs: &str) -> Vec<Value> {
    logs.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == "audit")
        .collect()
}

#[tokio::test]
async fn the_real_daemon_applies_roles_audits_mutating_calls_and_refuses_unsafe_requests() {
    let extra = format!(
        "logging:\n  format: json\nauth:\n  tokens:\n    - {{id: reader-1, sha256: {}, roles: [reader]}}\n    - {{id: operator-1, sha256: {}, roles: [operator]}}\n    - {{id: admin-1, sha256: {}, roles: [admin]}}\n",
        sha("r-token"),
        sha("o-token"),
        sha("a-token")
    );
    let daemon = Daemon::fresh(&extra).await;
    let client = daemon.client();
    let call = async |method: Method, path: &str, token: Option<&str>, body: Option<Value>| {
        let mut req = client.request(method, daemon.url(path));
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        json_of(req.send().await.unwrap()).await
    };

    // Roles, end to end.
    assert_eq!(call(Method::GET, "/api/v1/jobs", None, None).await.0, 401);
    assert_eq!(
        call(Method::GET, "/api/v1/jobs", Some("r-token"), None)
            .await
            .0,
        200
    );
    assert_eq!(
        call(Method::GET, "/api/v1/jobs", Some("o-token"), None)
            .await
            .0,
        403
    );
    assert_eq!(
        call(Method::GET, "/api/v1/__health", None, None).await.0,
        200
    );
    let (status, body) = call(
        Method::POST,
        "/api/v1/diagnostics/jobs",
        Some("r-token"),
        Some(wait_job()),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = call(
        Method::POST,
        "/api/v1/diagnostics/jobs",
        None,
        Some(wait_job()),
    )
    .await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = call(
        Method::POST,
        "/api/v1/diagnostics/jobs",
        Some("o-token"),
        Some(wait_job()),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let id = body["jobId"].as_str().unwrap().to_string();
    let (status, body) = call(
        Method::POST,
        &format!("/api/v1/jobs/{id}/cancel"),
        Some("o-token"),
        None,
    )
    .await;
    assert!(status < 300, "{status} {body}");
    let (status, body) = call(
        Method::PUT,
        "/api/v1/admin/live-migration",
        Some("o-token"),
        Some(json!({"enabled": true})),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = call(
        Method::PUT,
        "/api/v1/admin/live-migration",
        Some("a-token"),
        Some(json!({"enabled": false})),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // The shapes a web page can send: a foreign Host, a foreign Origin, an untyped body.
    let res = client
        .get(daemon.url("/api/v1/jobs"))
        .header("host", "rebound.evil.example")
        .bearer_auth("r-token")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 421);
    let res = client
        .post(daemon.url("/api/v1/diagnostics/jobs"))
        .header("origin", "https://evil.example")
        .bearer_auth("o-token")
        .json(&wait_job())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 403);
    let res = client
        .post(daemon.url("/api/v1/diagnostics/jobs"))
        .bearer_auth("o-token")
        .body(wait_job().to_string())
        .send()
        .await
        .unwrap();
    let (status, body) = json_of(res).await;
    assert_eq!(status, 415, "{body}");

    // The audit trail: every mutating call above, in order, with who, what, which, outcome.
    let expected: [(&str, &str, Option<&str>, u16); 6] = [
        ("token:reader-1", "POST /api/v1/diagnostics/jobs", None, 403),
        ("anonymous", "POST /api/v1/diagnostics/jobs", None, 401),
        (
            "token:operator-1",
            "POST /api/v1/diagnostics/jobs",
            Some(&id),
            202,
        ),
        (
            "token:operator-1",
            "POST /api/v1/jobs/{id}/cancel",
            Some(&id),
            0,
        ),
        (
            "token:operator-1",
            "PUT /api/v1/admin/live-migration",
            None,
            403,
        ),
        (
            "token:admin-1",
            "PUT /api/v1/admin/live-migration",
            None,
            200,
        ),
    ];
    let lines = test_support::poll(Duration::from_secs(10), async || {
        let lines = audit_lines(&daemon.logs());
        if lines.len() > expected.len() {
            Ok(lines)
        } else {
            Err(lines)
        }
    })
    .await
    .unwrap_or_else(|lines| panic!("audit lines: {lines:#?}\n{}", daemon.logs()));
    for (line, (identity, action, object, outcome)) in lines.iter().zip(expected) {
        assert_eq!(line["identity"], identity, "{line}");
        assert_eq!(line["action"], action, "{line}");
        if let Some(object) = object {
            assert_eq!(line["object"], object, "{line}");
        }
        if outcome != 0 {
            assert_eq!(line["outcome"], outcome, "{line}");
        } else {
            assert!(line["outcome"].as_u64().unwrap() < 300, "{line}");
        }
    }
    // The 415 is audited too (the Origin and Host refusals happen before anyone is known).
    assert_eq!(lines[6]["outcome"], 415, "{:#?}", lines);
    // No GET is audited.
    assert!(
        lines
            .iter()
            .all(|l| !l["action"].as_str().unwrap().starts_with("GET")),
        "{lines:#?}"
    );
    // No token appears in the log.
    let logs = daemon.logs();
    for token in ["r-token", "o-token", "a-token"] {
        assert!(!logs.contains(token), "{token} is logged");
    }

    let res = client
        .get(daemon.url("/metrics"))
        .bearer_auth("r-token")
        .send()
        .await
        .unwrap();
    let metrics = res.text().await.unwrap();
    assert!(
        metrics.contains(
            r#"drover_audit_events_total{action="POST /api/v1/diagnostics/jobs",outcome="202"} 1"#
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"drover_audit_events_total{action="PUT /api/v1/admin/live-migration",outcome="403"} 1"#),
        "{metrics}"
    );
}
