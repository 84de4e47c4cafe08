//! Secrets never leak: a distinct value is planted everywhere one can be given (job
//! credentials of both sides and both connectors, the daemon's Cassandra password, the peer
//! token file, the API token), jobs are run that succeed, stop and are refused, and every
//! output — logs, every response body, savepoints, every file the daemon wrote — is searched
//! for each value. Only the kept job file (mode 0600, needed to resume) may hold them.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use test_support::dynamodb::{self as ddb, Server};
use test_support::{Daemon, Home, cql, poll};

/// The API token; the config holds its SHA-256 only.
const TOKEN: &str = "drover-secret-token-7f3a9";
const TOKEN_SHA256: &str = "182176f0b1210d7e6b3c5e75fa88b41a09fc3090b576e63edf69ab9dabdf78c3";
const CASSANDRA_PASSWORD: &str = "drover-secret-daemon-cassandra-41c2";
const PEER_TOKEN: &str = "drover-secret-peer-token-9d0e";
const CQL_SOURCE_PASSWORD: &str = "drover-secret-cql-source-5b7d";
const CQL_TARGET_PASSWORD: &str = "drover-secret-cql-target-c81a";
const AWS_SOURCE_ACCESS_KEY: &str = "DROVERSECRETSRCACCESS0a1b";
const AWS_SOURCE_SECRET_KEY: &str = "drover-secret-aws-source-secret-2c3d";
const AWS_TARGET_ACCESS_KEY: &str = "DROVERSECRETDSTACCESS4e5f";
const AWS_TARGET_SECRET_KEY: &str = "drover-secret-aws-target-secret-6a7b";
/// Secrets given in a field of the wrong type: the error refusing them must not quote them.
const NUMERIC_PASSWORD: &str = "91827364554637";
const NUMERIC_SECRET_KEY: &str = "56473829101928";
const NUMERIC_ACCESS_KEY: &str = "10293847561029";
/// A password on a line YAML cannot parse.
const BROKEN_PASSWORD: &str = "drover-secret-broken-yaml-8e9f";

const SECRETS: &[&str] = &[
    TOKEN,
    CASSANDRA_PASSWORD,
    PEER_TOKEN,
    CQL_SOURCE_PASSWORD,
    CQL_TARGET_PASSWORD,
    AWS_SOURCE_ACCESS_KEY,
    AWS_SOURCE_SECRET_KEY,
    AWS_TARGET_ACCESS_KEY,
    AWS_TARGET_SECRET_KEY,
    NUMERIC_PASSWORD,
    NUMERIC_SECRET_KEY,
    NUMERIC_ACCESS_KEY,
    BROKEN_PASSWORD,
];

/// Every body the API answered, with what was asked, to be searched at the end.
#[derive(Default)]
struct Seen(Vec<(String, String)>);

struct Api<'a> {
    daemon: &'a Daemon,
    seen: std::cell::RefCell<Seen>,
}

impl Api<'_> {
    async fn send(&self, request: reqwest::RequestBuilder, what: String) -> (u16, Value) {
        let res = request.bearer_auth(TOKEN).send().await.expect("request");
        let status = res.status().as_u16();
        let text = res.text().await.expect("body");
        self.seen.borrow_mut().0.push((what, text.clone()));
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let c = self.daemon.client();
        self.send(c.get(self.daemon.url(path)), format!("GET {path}"))
            .await
    }

    async fn post_yaml(&self, path: &str, body: &str) -> (u16, Value) {
        let c = self.daemon.client();
        self.send(
            c.post(self.daemon.url(path))
                .header("content-type", "application/yaml")
                .body(body.to_string()),
            format!("POST {path} (a job file)"),
        )
        .await
    }

    async fn post_empty(&self, path: &str) -> (u16, Value) {
        let c = self.daemon.client();
        self.send(
            c.post(self.daemon.url(path))
                .header("content-type", "application/json")
                .body("{}"),
            format!("POST {path}"),
        )
        .await
    }

    /// Submits a job that must be accepted; returns its status URL.
    async fn submit(&self, resource: &str, job: &str) -> String {
        let (status, body) = self.post_yaml(resource, job).await;
        assert_eq!(status, 202, "{body}\n{}", self.daemon.logs());
        body["statusUrl"].as_str().unwrap().to_string()
    }

    /// Waits until the job at `url` has ended; returns its last status.
    async fn wait_ended(&self, url: &str) -> Value {
        poll(Duration::from_secs(120), async || {
            let (status, body) = self.get(url).await;
            assert_eq!(status, 200, "{body}");
            if test_support::ended(&body) {
                Ok(body)
            } else {
                Err(body)
            }
        })
        .await
        .unwrap_or_else(|last| panic!("{url} did not end: {last}\n{}", self.daemon.logs()))
    }

    async fn run(&self, resource: &str, job: &str) -> String {
        let url = self.submit(resource, job).await;
        let end = self.wait_ended(&url).await;
        assert_eq!(end["state"], "SUCCEEDED", "{end}\n{}", self.daemon.logs());
        url
    }
}

fn credentials(password: &str) -> String {
    format!("  credentials:\n    username: drover-user-is-not-secret\n    password: {password}\n")
}

fn aws(access: &str, secret: &str) -> String {
    format!("  credentials:\n    accessKey: {access}\n    secretKey: {secret}\n")
}

fn savepoints(dir: &Path) -> String {
    format!(
        "savepoints:\n  path: {}\n  intervalSeconds: 1\n",
        dir.display()
    )
}

/// The dynamodb job of `test_support`, with these credentials instead of its dummy ones.
fn dynamo_job(
    (server, src): (Server, &str),
    dst: &str,
    source_keys: (&str, &str),
    target_keys: (&str, &str),
    extra: &str,
) -> String {
    let dummy = "  credentials:\n    accessKey: dummy\n    secretKey: dummy\n";
    let job = ddb::job((server, src), (server, dst), "", "", extra);
    let (source, target) = job.split_once("target:\n").unwrap();
    format!(
        "{}target:\n{}",
        source.replacen(dummy, &aws(source_keys.0, source_keys.1), 1),
        target.replacen(dummy, &aws(target_keys.0, target_keys.1), 1)
    )
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[tokio::test]
async fn planted_secrets_appear_nowhere_but_in_the_kept_job_file() {
    // The clusters and tables: CQL rows, and DynamoDB items on dynalite (which takes any
    // credentials, so the planted keys are the ones used).
    let fixture = cql::Fixture::rows("secrets", 40, 0, 4).await;
    let ks = fixture.ks;
    drop(fixture.daemon);
    let server = Server::Dynalite;
    let client = server.client();
    let (src_table, dst_table) = (
        ddb::table_name("secrets_src"),
        ddb::table_name("secrets_dst"),
    );
    ddb::fresh_table(&client, &src_table, None).await;
    ddb::fresh_table(&client, &dst_table, None).await;
    let items = (0..30)
        .map(|i| {
            [(
                "id".to_string(),
                aws_sdk_dynamodb::types::AttributeValue::S(format!("item{i}")),
            )]
            .into_iter()
            .collect()
        })
        .collect();
    ddb::put_all(&client, &src_table, items).await;

    let home = Home::new();
    let peer_token_file = home.path().join("peer-token");
    std::fs::write(&peer_token_file, format!("{PEER_TOKEN}\n")).unwrap();
    let config = home.write_config(&format!(
        "auth:\n  tokens:\n    - {{id: ops, sha256: {TOKEN_SHA256}, roles: [reader, operator]}}\n\
         cassandra:\n  native_address: \"{}\"\n  username: drover\n  password: {CASSANDRA_PASSWORD}\n\
         live_migration:\n  peer_token_file: {}\n",
        cql::src_addr(),
        peer_token_file.display()
    ));
    let daemon = Daemon::start_with(&home, &config).await;
    let api = Api {
        daemon: &daemon,
        seen: Default::default(),
    };
    let sp = |name: &str| home.path().join("savepoints").join(name);

    // Jobs that succeed.
    let cql_job = cql::job(
        ks,
        "t",
        &credentials(CQL_SOURCE_PASSWORD),
        &credentials(CQL_TARGET_PASSWORD),
        &savepoints(&sp("cql")),
    );
    let migration = api.run("/api/v1/migrations", &cql_job).await;
    let validation = api.run("/api/v1/validations", &cql_job).await;
    let dynamo = dynamo_job(
        (server, &src_table),
        &dst_table,
        (AWS_SOURCE_ACCESS_KEY, AWS_SOURCE_SECRET_KEY),
        (AWS_TARGET_ACCESS_KEY, AWS_TARGET_SECRET_KEY),
        &savepoints(&sp("dynamo")),
    );
    let dynamo_migration = api.run("/api/v1/migrations", &dynamo).await;
    let dynamo_validation = api.run("/api/v1/validations", &dynamo).await;

    // A job stopped while it runs keeps its job file (a resume needs the credentials),
    // readable by the daemon's user only.
    let slow = cql::job(
        ks,
        "t",
        &credentials(CQL_SOURCE_PASSWORD),
        &format!("{}  rowsPerSecond: 1\n", credentials(CQL_TARGET_PASSWORD)),
        &savepoints(&sp("slow")),
    );
    let stopped = api.submit("/api/v1/migrations", &slow).await;
    let id = stopped.rsplit('/').next().unwrap().to_string();
    let kept = home.state_dir().join("jobs").join(format!("{id}.job.yaml"));
    assert!(kept.exists(), "no kept job file at {kept:?}");
    let mode = std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the kept job file has mode {mode:o}");
    let text = std::fs::read_to_string(&kept).unwrap();
    assert!(text.contains(CQL_SOURCE_PASSWORD) && text.contains(CQL_TARGET_PASSWORD));
    api.wait_for_phase(&stopped).await;
    let (status, body) = api.post_empty(&format!("{stopped}/cancel")).await;
    assert_eq!(status, 202, "{body}");
    let end = api.wait_ended(&stopped).await;
    assert_ne!(end["state"], "SUCCEEDED", "{end}");
    assert!(kept.exists(), "a stopped job keeps its job file");

    // Jobs refused: after reaching the clusters with the credentials (400), unable to reach
    // them (502), and for the types of their own secrets (400).
    let refusals = [
        (
            cql::job(
                "drover_secrets_no_such_keyspace",
                "t",
                &credentials(CQL_SOURCE_PASSWORD),
                &credentials(CQL_TARGET_PASSWORD),
                "",
            ),
            400,
        ),
        (
            format!(
                "source:\n  type: cassandra\n  host: 127.0.0.1\n  port: 1\n{}  keyspace: ks\n  table: t\ntarget:\n  type: cassandra\n  host: 127.0.0.1\n  port: 1\n{}  keyspace: ks\n  table: t\n",
                credentials(CQL_SOURCE_PASSWORD),
                credentials(CQL_TARGET_PASSWORD)
            ),
            502,
        ),
        (
            cql::job(ks, "t", &credentials(NUMERIC_PASSWORD), "", ""),
            400,
        ),
        (
            cql::job(
                ks,
                "t",
                "",
                &credentials(&format!("{BROKEN_PASSWORD}: [")),
                "",
            ),
            400,
        ),
        (
            dynamo_job(
                (server, &src_table),
                &dst_table,
                (AWS_SOURCE_ACCESS_KEY, NUMERIC_SECRET_KEY),
                (NUMERIC_ACCESS_KEY, AWS_TARGET_SECRET_KEY),
                "",
            ),
            400,
        ),
        (
            dynamo_job(
                (server, "drover_secrets_no_such_table"),
                &dst_table,
                (AWS_SOURCE_ACCESS_KEY, AWS_SOURCE_SECRET_KEY),
                (AWS_TARGET_ACCESS_KEY, AWS_TARGET_SECRET_KEY),
                "",
            ),
            400,
        ),
    ];
    for (job, want) in &refusals {
        for resource in ["/api/v1/migrations", "/api/v1/validations"] {
            let (status, body) = api.post_yaml(resource, job).await;
            assert_eq!(status, *want, "{resource}: {body}\n{job}");
        }
    }

    // Every read route, of every job.
    let mut reads = vec![
        "/api/v1/jobs".to_string(),
        "/api/v1/migrations".to_string(),
        "/api/v1/validations".to_string(),
        "/metrics".to_string(),
        "/api/v1/__health".to_string(),
        "/api/v1/cassandra/native/__health".to_string(),
        "/api/v1/admin/live-migration".to_string(),
        "/api/v1/live-migration/status".to_string(),
    ];
    for url in [&migration, &dynamo_migration, &stopped] {
        reads.push(url.clone());
        reads.push(format!("{url}/savepoints"));
    }
    for url in [&validation, &dynamo_validation] {
        reads.push(url.clone());
        reads.push(format!("{url}/report"));
    }
    let (_, jobs) = api.get("/api/v1/jobs").await;
    for job in jobs["jobs"].as_array().expect("a list of jobs") {
        reads.push(format!("/api/v1/jobs/{}", job["id"].as_str().unwrap()));
    }
    for path in &reads {
        let (status, body) = api.get(path).await;
        assert!(status < 500, "GET {path}: {status} {body}");
    }
    let (status, body) = api.get(&format!("{migration}/savepoints")).await;
    assert_eq!(status, 200, "{body}");

    // Savepoints were written: the search below covers them.
    let mut files = Vec::new();
    files_under(home.path(), &mut files);
    for dir in ["cql", "dynamo", "slow"] {
        assert!(
            files.iter().any(|f| f.starts_with(sp(dir))
                && f.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("savepoint_")),
            "no savepoint in {dir}: {files:?}"
        );
    }

    // The search finds what is there: the kept job file and the config hold their secrets.
    let found = |path: &Path| -> Vec<&str> {
        let text = String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned();
        SECRETS
            .iter()
            .copied()
            .filter(|s| text.contains(s))
            .collect()
    };
    assert_eq!(found(&kept), [CQL_SOURCE_PASSWORD, CQL_TARGET_PASSWORD]);
    assert_eq!(found(&config), [CASSANDRA_PASSWORD]);

    // The search. Allowed to hold secrets: the daemon's config and the peer token file (the
    // operator's own inputs) and the kept job file.
    let mut leaks = Vec::new();
    for (asked, body) in &api.seen.borrow().0 {
        for secret in SECRETS {
            if body.contains(secret) {
                leaks.push(format!("response to {asked}: {secret} in {body}"));
            }
        }
    }
    let logs = daemon.logs();
    assert!(logs.contains("migration"), "the daemon logged nothing?");
    for secret in SECRETS {
        if logs.contains(secret) {
            leaks.push(format!("daemon log: {secret}"));
        }
    }
    for file in &files {
        if *file == config || *file == peer_token_file || *file == kept {
            continue;
        }
        let bytes = std::fs::read(file).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        for secret in SECRETS {
            if text.contains(secret) {
                leaks.push(format!("{}: {secret}", file.display()));
            }
        }
    }
    assert!(leaks.is_empty(), "secrets leaked:\n{}", leaks.join("\n"));
}

impl Api<'_> {
    /// Waits until the job at `url` is running (its kept file and first savepoint exist).
    async fn wait_for_phase(&self, url: &str) {
        poll(Duration::from_secs(60), async || {
            let (_, body) = self.get(url).await;
            if body["state"] == "RUNNING" {
                Ok(())
            } else {
                Err(body)
            }
        })
        .await
        .unwrap_or_else(|last| panic!("{url} never ran: {last}"));
    }
}
