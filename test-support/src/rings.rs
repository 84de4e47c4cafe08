//! The two three-node rings of `scripts/testenv ring-up`, for the tests of migrations between
//! multi-node clusters (`tests/it/rings.rs`). They are not started by `scripts/testenv up`: the
//! first test that needs them starts them, the others find them running (each test calls
//! [`up`], which also starts again the nodes an earlier test left stopped), and
//! `scripts/testenv down` or `ring-down` stops them.

/// CQL addresses of the source ring's nodes (cluster "drover-ring-src", data center "dc1", one
/// rack per node), as scripts/testenv places them.
pub const SRC: [&str; 3] = ["127.0.0.11:9042", "127.0.0.12:9042", "127.0.0.13:9042"];
/// CQL addresses of the target ring's nodes (cluster "drover-ring-dst", data center "dc1").
pub const DST: [&str; 3] = ["127.0.0.21:9042", "127.0.0.22:9042", "127.0.0.23:9042"];
/// The data center of both rings.
pub const DC: &str = "dc1";

/// scripts/testenv's name of node `n` (1 to 3) of the source ring.
pub fn src_node(n: usize) -> String {
    format!("cassandra-ringsrc-{n}")
}

/// scripts/testenv's name of node `n` (1 to 3) of the target ring.
pub fn dst_node(n: usize) -> String {
    format!("cassandra-ringdst-{n}")
}

/// Runs `scripts/testenv args` (the script the env file names), which must succeed.
pub fn testenv(args: &[&str]) {
    let script = std::env::var("DROVER_TESTENV_SCRIPT")
        .expect("DROVER_TESTENV_SCRIPT (source target/testenv/env after scripts/testenv up)");
    let out = std::process::Command::new(script)
        .args(args)
        .output()
        .expect("run scripts/testenv");
    assert!(
        out.status.success(),
        "scripts/testenv {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts whatever node of the two rings is not running (all six at first, or the nodes a
/// test stopped) and waits until every node sees the three of its ring up and normal
/// (`scripts/testenv ring-up`: idempotent, and quick when all are up).
pub fn up() {
    testenv(&["ring-up"]);
}

/// Stops ring nodes `names` (one `scripts/testenv node-stop` each, at once).
pub fn stop(names: &[String]) {
    std::thread::scope(|s| {
        for name in names {
            s.spawn(move || testenv(&["node-stop", name]));
        }
    });
}

/// The JMX address (`host:port`) of ring node `name` (`src_node(n)` or `dst_node(n)`), as
/// scripts/testenv places it: 127.0.0.1:751n for the source ring, 752n for the target's.
pub fn jmx(name: &str) -> String {
    let n = &name[name.len() - 1..];
    if name.starts_with("cassandra-ringsrc-") {
        format!("127.0.0.1:751{n}")
    } else {
        format!("127.0.0.1:752{n}")
    }
}

/// The data directory of ring node `name`: beside the single-node source's in the test
/// environment's directory.
pub fn data_dir(name: &str) -> std::path::PathBuf {
    let src = std::env::var("DROVER_TEST_CASSANDRA_SRC_DIR").expect(
        "DROVER_TEST_CASSANDRA_SRC_DIR (source target/testenv/env after scripts/testenv up)",
    );
    std::path::Path::new(&src)
        .parent()
        .expect("the test environment's directory")
        .join(name)
        .join("data")
}
