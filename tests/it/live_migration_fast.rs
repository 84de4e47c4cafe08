//! The drover-to-drover fast paths of live migration: small files in batches (synced together,
//! renamed only once durable), changed files fetched by delta after the prefix their block
//! digests match, and a copy over an emulated distant link (network namespaces, bench/linkem).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use test_support::{Daemon, Home, ended};

use crate::live_migration::{
    SourceNode, content, destination, node_dirs, set_mtime, staging_files, start_copy, write,
};

const WAIT: Duration = Duration::from_secs(180);

/// The small files of the batch test: `n` files of 1-20 KB in tables of 100.
fn small_files(root: &Path, n: usize) -> Vec<(String, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let rel = format!("data0/ks/t-{}/nb-{i}-big-Data.db", i / 100);
            let c = content(i as u64 + 1000, 1000 + (i * 7919) % 19_000);
            write(&root.join(&rel), &c);
            (rel, c)
        })
        .collect()
}

/// Every file at a final path below `dst` is the source's, whole: a final path never holds a
/// partial file, whatever was killed. Returns how many are there.
fn only_whole_files(dst: &Path, files: &[(String, Vec<u8>)]) -> usize {
    let mut present = 0;
    for (rel, c) in files {
        match std::fs::read(dst.join(rel)) {
            Ok(got) => {
                assert!(
                    got == *c,
                    "{rel}: a partial or wrong file at its final path"
                );
                present += 1;
            }
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{rel}"),
        }
    }
    present
}

/// Requests answered by `d` for a route template, from its `/metrics`.
async fn requests(d: &Daemon, route: &str) -> u64 {
    d.get_text("/metrics")
        .await
        .lines()
        .filter(|l| {
            l.starts_with("drover_http_requests_total{")
                && l.contains(&format!("route=\"{route}\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test]
async fn a_batch_of_5000_small_files_survives_kill_9_of_either_side_and_resumes() {
    let src = SourceNode::new("");
    let files = small_files(src.root(), 5000);
    let mut source = src.start().await;
    let home = Home::new();
    let mut dst = destination(&home, &src.addr, "").await;
    // Paced so that both kills come mid-batch.
    let (url, _) = start_copy(
        &dst,
        &json!({"maxIterations": 5, "successThreshold": 1.0, "maxConcurrency": 4, "maxBytesPerSecond": 8_000_000}),
    )
    .await;
    // Placed files count once renamed into place.
    dst.wait_for(&url, WAIT, |t| {
        t["status"][0]["filesDownloaded"].as_u64() > Some(1000)
    })
    .await;
    dst.kill9();
    let after_dst_kill = only_whole_files(home.path(), &files);
    assert!(
        after_dst_kill > 1000 && after_dst_kill < files.len(),
        "killed mid-copy: {after_dst_kill} of {} files placed",
        files.len()
    );
    // The batch route did the work: far fewer requests than files.
    let batches = requests(&source, "/api/v1/live-migration/files-batch").await;
    let singles = requests(
        &source,
        "/api/v1/live-migration/files/{dirType}/{dirIndex}/{*path}",
    )
    .await;
    assert!(
        batches > 0 && singles == 0,
        "{batches} batches, {singles} single files"
    );

    // The restarted destination resumes its task; then the source is killed mid-batch.
    let dst = destination(&home, &src.addr, "").await;
    dst.wait_for(&url, WAIT, |t| {
        t["state"] == "RUNNING"
            && t["status"]
                .as_array()
                .and_then(|s| s.last())
                .and_then(|i| i["filesDownloaded"].as_u64())
                > Some(500)
    })
    .await;
    source.kill9();
    let after_src_kill = only_whole_files(home.path(), &files);
    assert!(
        after_src_kill >= after_dst_kill,
        "{after_src_kill} < {after_dst_kill}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    source = src.start().await;
    let task = dst.wait_for(&url, WAIT, ended).await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
    assert_eq!(only_whole_files(home.path(), &files), files.len());
    crate::live_migration::same_tree(src.root(), home.path(), &files);
    assert!(
        staging_files(home.path()).is_empty(),
        "{:?}",
        staging_files(home.path())
    );
    drop(source);
}

/// The first iteration's status of a task that ran to its end.
async fn copy_once(dst: &Daemon) -> Value {
    let (url, _) = start_copy(
        dst,
        &json!({"maxIterations": 1, "successThreshold": 1.0, "maxConcurrency": 4}),
    )
    .await;
    let task = dst.wait_for(&url, WAIT, ended).await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
    task["status"][0].clone()
}

#[tokio::test]
async fn changed_files_cost_only_the_blocks_that_differ() {
    const MIB: usize = 1 << 20;
    let src = SourceNode::new("");
    let root = src.root().to_path_buf();
    // A commit-log segment that grows, a table file changed inside its second block, a
    // segment changed in place in its last block with its size and time kept (as a memory-
    // mapped write leaves it), and a file smaller than a delta is worth.
    let grown = "commitlog/CommitLog-7-2.log";
    let inside = "data0/ks/t-1/nb-2-big-Data.db";
    let mapped = "commitlog/CommitLog-7-3.log";
    let small = "data0/ks/t-1/nb-3-big-Index.db";
    let mut files = vec![
        (grown, content(21, 8 * MIB)),
        (inside, content(22, 4 * MIB)),
        (mapped, content(23, 3 * MIB)),
        (small, content(24, 300_000)),
    ];
    for (p, c) in &files {
        write(&root.join(p), c);
    }
    let _source = src.start().await;
    let home = Home::new();
    let dst = destination(&home, &src.addr, "").await;
    copy_once(&dst).await;

    let mtime_of = |p: &str| {
        std::fs::metadata(root.join(p))
            .unwrap()
            .modified()
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    };
    let appended = content(25, MIB);
    files[0].1.extend_from_slice(&appended);
    files[1].1[MIB + MIB / 2] ^= 0xff;
    let mapped_mtime = mtime_of(mapped);
    let end = files[2].1.len() - 10;
    files[2].1[end] ^= 0xff;
    files[3].1[0] ^= 0xff;
    for (p, c) in &files {
        write(&root.join(p), c);
    }
    set_mtime(&root.join(mapped), mapped_mtime);

    let it = copy_once(&dst).await;
    for (p, c) in &files {
        let got = std::fs::read(home.path().join(p)).unwrap();
        assert!(got == *c, "{p}: differs from the source");
    }
    // Kept: the 8 blocks of the grown segment, the three blocks of the table file around the
    // changed one, the two first blocks of the mapped segment. Fetched: the appended MiB, the
    // changed block of the table file, the last block of the mapped segment, the whole small
    // file.
    assert_eq!(
        it["bytesKept"],
        json!(8 * MIB + 3 * MIB + 2 * MIB),
        "{it:#}"
    );
    assert_eq!(
        it["bytesDownloaded"],
        json!(MIB + MIB + MIB + 300_000),
        "{it:#}"
    );
    assert!(staging_files(home.path()).is_empty());

    // A changed first block costs that block only.
    files[0].1[10] ^= 0xff;
    write(&root.join(grown), &files[0].1);
    let it = copy_once(&dst).await;
    assert_eq!(it["bytesKept"], json!(8 * MIB), "{it:#}");
    assert_eq!(it["bytesDownloaded"], json!(MIB), "{it:#}");
    assert_eq!(std::fs::read(home.path().join(grown)).unwrap(), files[0].1);
}

/// A network namespace of this test, deleted when dropped.
struct Netns(String);

impl Netns {
    fn new(name: String) -> Self {
        let _ = run("ip", &["netns", "del", &name]);
        run("ip", &["netns", "add", &name]).expect("ip netns add (needs root)");
        run("ip", &["-n", &name, "link", "set", "lo", "up"]).unwrap();
        Self(name)
    }

    /// A command run inside the namespace.
    fn command(&self, program: &str) -> std::process::Command {
        let mut c = std::process::Command::new("ip");
        c.args(["netns", "exec", &self.0, program]);
        c
    }

    /// `curl` inside the namespace: the body of the answer as JSON.
    fn curl(&self, args: &[&str]) -> Value {
        let out = self.command("curl").arg("-sS").args(args).output().unwrap();
        assert!(
            out.status.success(),
            "curl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "curl {args:?}: {e}: {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run("ip", &["netns", "del", &self.0]);
    }
}

fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A child process killed when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// bench/linkem, built into its own target directory (not this build's, which cargo holds).
fn linkem() -> std::path::PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = std::process::Command::new(env!("CARGO"))
        .args(["build", "--release", "--quiet", "--manifest-path"])
        .arg(repo.join("bench/linkem/Cargo.toml"))
        .arg("--target-dir")
        .arg(repo.join("target/linkem"))
        .status()
        .unwrap();
    assert!(status.success(), "building bench/linkem");
    repo.join("target/linkem/release/linkem")
}

#[tokio::test]
async fn a_copy_over_an_emulated_distant_link_works_and_the_link_is_removed() {
    let bin = linkem();
    let tag = std::process::id() % 10_000;
    let (a, b) = (
        Netns::new(format!("drvA{tag}")),
        Netns::new(format!("drvB{tag}")),
    );
    // 20 ms round trip, 100 Mbit/s.
    let mut link = std::process::Command::new(&bin)
        .args([&a.0, &b.0, "10", "100"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(link.stdout.take().unwrap()),
        &mut ready,
    )
    .unwrap();
    assert_eq!(ready.trim(), "ready");
    let link = Child(link);
    let subnet = 10 + tag % 200;
    let (src_ip, dst_ip) = (format!("10.{subnet}.77.1"), format!("10.{subnet}.77.2"));
    for (ns, ip) in [(&a, &src_ip), (&b, &dst_ip)] {
        run(
            "ip",
            &[
                "-n",
                &ns.0,
                "addr",
                "add",
                &format!("{ip}/24"),
                "dev",
                "lm0",
            ],
        )
        .unwrap();
        run(
            "ip",
            &["-n", &ns.0, "link", "set", "lm0", "mtu", "9000", "up"],
        )
        .unwrap();
    }

    // 38 MB: two segments and 300 small files.
    let (src_home, dst_home) = (Home::new(), Home::new());
    let mut files = vec![
        (
            "commitlog/CommitLog-7-1.log".to_string(),
            content(31, 20_000_000),
        ),
        (
            "data0/ks/t-1/nb-1-big-Data.db".to_string(),
            content(32, 15_000_000),
        ),
    ];
    files.extend(small_files(src_home.path(), 300));
    for (p, c) in &files[..2] {
        write(&src_home.path().join(p), c);
    }
    let total: usize = files.iter().map(|(_, c)| c.len()).sum();
    let (src_addr, dst_addr) = (format!("{src_ip}:9043"), format!("{dst_ip}:9043"));
    let map = format!(
        "live_migration:\n  enabled: true\n  migration_map:\n    \"{src_addr}\": \"{dst_addr}\"\n"
    );
    let start = |ns: &Netns, home: &Home, addr: &str| {
        // Off loopback, inside a namespace of its own that nothing outside reaches.
        let config = home.path().join("drover.yaml");
        std::fs::write(
            &config,
            format!(
                "server:\n  listen: {addr}\n  insecure: true\nstate_dir: {}\n{}{map}",
                home.state_dir().display(),
                node_dirs(home.path())
            ),
        )
        .unwrap();
        Child(
            ns.command(test_support::drover_bin().to_str().unwrap())
                .args(["serve", "--config"])
                .arg(config)
                .stderr(std::fs::File::create(home.path().join("daemon.log")).unwrap())
                .spawn()
                .unwrap(),
        )
    };
    let source = start(&a, &src_home, &src_addr);
    let dest = start(&b, &dst_home, &dst_addr);
    let health = |ns: &Netns, addr: &str| {
        ns.command("curl")
            .args(["-sf", &format!("http://{addr}/api/v1/__health")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    // A loaded machine (the whole suite on two cores) can take seconds to start a daemon.
    let up = (0..600).any(|_| {
        let both = health(&a, &src_addr) && health(&b, &dst_addr);
        if !both {
            std::thread::sleep(Duration::from_millis(100));
        }
        both
    });
    assert!(
        up,
        "the daemons did not answer in 60 s:\n{}\n{}",
        std::fs::read_to_string(src_home.path().join("daemon.log")).unwrap_or_default(),
        std::fs::read_to_string(dst_home.path().join("daemon.log")).unwrap_or_default()
    );
    // The source answers across the link, one round trip later.
    let t = std::time::Instant::now();
    b.curl(&[&format!("http://{src_addr}/api/v1/live-migration/status")]);
    assert!(
        t.elapsed() >= Duration::from_millis(20),
        "{:?}",
        t.elapsed()
    );

    let accepted = b.curl(&[
        "-XPOST",
        "-H",
        "Content-Type: application/json",
        &format!("http://{dst_addr}/api/v1/live-migration/data-copy-tasks"),
        "-d",
        r#"{"maxIterations": 2, "successThreshold": 1.0, "maxConcurrency": 8}"#,
    ]);
    let status_url = format!(
        "http://{dst_addr}{}",
        accepted["statusUrl"].as_str().unwrap()
    );
    let started = std::time::Instant::now();
    let task = loop {
        let task = b.curl(&[&status_url]);
        if ended(&task) {
            break task;
        }
        assert!(started.elapsed() < WAIT, "{task:#}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        task["state"],
        "SUCCEEDED",
        "{task:#}\n{}",
        std::fs::read_to_string(dst_home.path().join("daemon.log")).unwrap_or_default()
    );
    assert_eq!(task["status"][0]["bytesDownloaded"], json!(total));
    for (p, c) in &files {
        assert!(std::fs::read(dst_home.path().join(p)).unwrap() == *c, "{p}");
    }
    // At 100 Mbit/s the bytes take this long at the least: they did cross the slow link.
    let floor = Duration::from_secs_f64(total as f64 * 8.0 / 100e6);
    assert!(
        started.elapsed() >= floor,
        "{:?} < {floor:?}",
        started.elapsed()
    );

    drop((source, dest, link));
    drop((a, b));
    let listed = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    let names = String::from_utf8_lossy(&listed.stdout);
    assert!(
        !names.contains(&format!("drvA{tag}")) && !names.contains(&format!("drvB{tag}")),
        "{names}"
    );
}
