//! schemathesis (PyPI, installed by scripts/testenv) generates requests from the committed
//! OpenAPI document — valid ones, invalid ones, odd bytes in paths, headers and bodies — and
//! sends them to a running daemon: no answer may be a 5xx, and every answer must be one the
//! document declares, with the declared media type, headers and schema.
//!
//! The daemon runs as a live-migration source with files to list and serve and the test node's
//! native port, so the live-migration and health routes answer with their real bodies rather
//! than the 404 of a disabled route.

use std::process::Command;

use test_support::{Daemon, Home, cassandra_src};

use crate::live_migration::free_port;

/// A fixed seed keeps a run reproducible (a failure names its case; `st replay` re-sends it);
/// the seed changes when the document does, since the cases are drawn from it.
const SEED: &str = "20261201";

#[tokio::test(flavor = "multi_thread")]
async fn generated_requests_get_no_5xx_and_only_documented_answers() {
    let schemathesis = std::env::var("DROVER_TEST_SCHEMATHESIS")
        .expect("DROVER_TEST_SCHEMATHESIS (source target/testenv/env after scripts/testenv up)");
    let home = Home::new();
    let root = home.path();
    for (file, bytes) in [
        ("data0/ks/t-1/nb-1-big-Data.db", vec![7u8; 50_000]),
        ("data0/ks/t-1/nb-1-big-TOC.txt", b"Data.db\n".to_vec()),
        ("commitlog/CommitLog-7-1.log", vec![1u8; 1_000]),
    ] {
        let path = root.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let addr = format!("127.0.0.1:{}", free_port());
    let config = home.write_config_at(
        &addr,
        &format!(
            "cassandra:\n  native_address: {}\n  data_file_directories: [{}/data0]\n  commitlog_directory: {}/commitlog\nlive_migration:\n  enabled: true\n  migration_map:\n    \"{addr}\": \"127.0.0.1:1\"\n",
            cassandra_src(),
            root.display(),
            root.display()
        ),
    );
    let daemon = Daemon::start_with(&home, &config).await;
    // Operations that switch the node's live migration off or end it run last, on their own:
    // run among the others they close the routes the rest are meant to reach.
    const SWITCHES: [&str; 3] = [
        "live_migration_admin_set",
        "live_migration_complete",
        "live_migration_reset",
    ];
    let mut tested = 0;
    for (filter, ops) in [
        ("--exclude-operation-id", &SWITCHES),
        ("--include-operation-id", &SWITCHES),
    ] {
        let mut args: Vec<String> = Vec::new();
        for op in ops {
            args.extend([filter.to_string(), op.to_string()]);
        }
        tested += schemathesis_run(&schemathesis, &daemon.addr.to_string(), args).await;
    }
    let total = openapi_operations();
    assert_eq!(
        tested, total,
        "every operation of the document was exercised"
    );
    // And the daemon is still serving after it.
    let (status, _) = daemon.get("/api/v1/__health").await;
    assert_eq!(status, 200, "{}", daemon.logs());
}

/// Runs schemathesis against the daemon at `addr` with every check but the two the document
/// cannot honour, and returns how many operations it tested; panics with its report when any
/// check failed.
async fn schemathesis_run(schemathesis: &str, addr: &str, filters: Vec<String>) -> usize {
    let document = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/drover.yaml");
    // schemathesis keeps a cache of found crashes in its working directory; not in the repo.
    let scratch = tempfile::tempdir().unwrap();
    let mut command = Command::new(schemathesis);
    command
        .current_dir(scratch.path())
        .args(["run", document, "--url"])
        .arg(format!("http://{addr}"))
        // `positive_data_acceptance` would need the schema of a job body to say which tables
        // exist; `unsupported_method` expects 405 where a live-migration route of the other role
        // answers 404 so that it reveals nothing (the on-demand filter comes first).
        .args(["--checks", "all"])
        .args([
            "--exclude-checks",
            "positive_data_acceptance,unsupported_method",
        ])
        .args(["--phases", "examples,coverage,fuzzing"])
        // One worker: hypothesis' strategy set-up is not thread-safe in this version.
        .args(["--max-examples", "25", "--workers", "1", "--seed", SEED])
        .args(filters);
    let out = tokio::task::spawn_blocking(move || command.output().expect("run schemathesis"))
        .await
        .unwrap();
    drop(scratch);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "schemathesis found answers the document does not allow:\n{stdout}\n{stderr}"
    );
    stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("Tested:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Tested: line in\n{stdout}"))
}

/// How many operations the committed document declares.
fn openapi_operations() -> usize {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/drover.yaml"))
        .unwrap();
    text.lines()
        .filter(|l| l.trim_start().starts_with("operationId:"))
        .count()
}
