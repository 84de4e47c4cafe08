//! drover-bench-gen: the data side of drover's `bench/cql-copy` benchmark.
//!
//! ```text
//! drover-bench-gen <command> --host H [--port 9042] [--keyspace bench] [options]
//!
//!   schema               create keyspace KS and tables KS.rows, KS.meta
//!                        [--replication "{'class': 'SimpleStrategy', 'replication_factor': 1}"]
//!   generate --rows N    fill KS.rows with rows 0..N (deterministic, ~1 KB each); skipped when
//!                        the marker in KS.meta says the table already holds exactly these N rows
//!                        [--concurrency 256]
//!   count                count KS.rows by scanning token ranges in parallel
//!                        [--splits 1024] [--concurrency 4]
//!   truncate             TRUNCATE KS.rows
//!   wait-idle            wait until no node of the cluster runs an sstable task (compaction)
//!                        [--timeout-s 900]
//!   info                 the node's release_version
//!
//!   every command: [--consistency ONE]: ONE, LOCAL_ONE, QUORUM, LOCAL_QUORUM or ALL
//! ```
//!
//! Results are printed on stdout as `key=value` lines; progress goes to stderr.
//!
//! Data layout: rows come in blocks of 4000 rows = 1111 partitions: one partition of 1000 rows,
//! 10 of 100, 100 of 10 and 1000 of 1, so each partition size holds a quarter of the rows.
//! Row `i` is a pure function of `i`, so a table of N rows is the first N rows of any larger one
//! (generating 5M after 1M only writes the missing 4M).
//!
//! Schema: `(p bigint, c int, t text, n int, d double, ts timestamp, b blob, PRIMARY KEY (p, c))`;
//! `t` is 300..=500 ASCII characters (mean 400), `b` 560 random bytes: 992 bytes of cell values
//! per row on average. The data size reported (`bytes=`) is the sum of the cell value sizes.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::errors::ExecutionError;
use scylla::statement::{Consistency, Statement};
use scylla::value::CqlTimestamp;

/// Bumped whenever the row layout changes: an older marker then means "regenerate".
const GEN_VERSION: i32 = 1;
const BLOCK_ROWS: u64 = 4000;
const PARTITIONS_PER_BLOCK: u64 = 1111;
const BLOB_LEN: usize = 560;
const ALPHABET: &[u8; 64] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .";

static RETRIES: AtomicU64 = AtomicU64::new(0);

struct Args {
    cmd: String,
    host: String,
    port: u16,
    keyspace: String,
    rows: Option<u64>,
    concurrency: Option<usize>,
    splits: u64,
    timeout_s: u64,
    replication: String,
    consistency: Consistency,
}

fn usage() -> ! {
    eprintln!(
        "usage: drover-bench-gen schema|generate|count|truncate|wait-idle|info --host H [--port P] \
         [--keyspace KS] [--rows N] [--concurrency C] [--splits S] [--timeout-s T] \
         [--replication MAP] [--consistency CL]"
    );
    std::process::exit(2);
}

fn parse_args() -> Result<Args> {
    let mut it = std::env::args().skip(1);
    let cmd = it.next().unwrap_or_else(|| usage());
    let mut a = Args {
        cmd,
        host: "127.0.0.1".into(),
        port: 9042,
        keyspace: "bench".into(),
        rows: None,
        concurrency: None,
        splits: 1024,
        timeout_s: 900,
        replication: "{'class': 'SimpleStrategy', 'replication_factor': 1}".into(),
        consistency: Consistency::One,
    };
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--host" => a.host = value,
            "--port" => a.port = value.parse()?,
            "--keyspace" => a.keyspace = value,
            "--rows" => a.rows = Some(value.parse()?),
            "--concurrency" => a.concurrency = Some(value.parse()?),
            "--splits" => a.splits = value.parse()?,
            "--timeout-s" => a.timeout_s = value.parse()?,
            "--replication" => a.replication = value,
            "--consistency" => {
                a.consistency = match value.as_str() {
                    "ONE" => Consistency::One,
                    "LOCAL_ONE" => Consistency::LocalOne,
                    "QUORUM" => Consistency::Quorum,
                    "LOCAL_QUORUM" => Consistency::LocalQuorum,
                    "ALL" => Consistency::All,
                    other => bail!("--consistency {other}: ONE, LOCAL_ONE, QUORUM, LOCAL_QUORUM or ALL"),
                }
            }
            _ => usage(),
        }
    }
    Ok(a)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("drover-bench-gen: error: {e:#}");
        std::process::exit(1);
    }
}

async fn run() -> Result<()> {
    let a = parse_args()?;
    let s = connect(&a).await?;
    match a.cmd.as_str() {
        "schema" => schema(&s, &a.keyspace, &a.replication).await,
        "generate" => generate(&s, &a).await,
        "count" => {
            let started = Instant::now();
            let n = count(&s, &a).await?;
            println!("count={n}");
            println!("seconds={:.1}", started.elapsed().as_secs_f64());
            Ok(())
        }
        "truncate" => truncate(&s, &a.keyspace).await,
        "wait-idle" => wait_idle(&s, a.timeout_s).await,
        "info" => {
            let r = s
                .query_unpaged("SELECT release_version, cluster_name FROM system.local", ())
                .await?
                .into_rows_result()?;
            let (version, cluster) = r.single_row::<(String, String)>()?;
            println!("release_version={version}");
            println!("cluster_name={cluster}");
            Ok(())
        }
        _ => usage(),
    }
}

async fn connect(a: &Args) -> Result<Session> {
    let profile = ExecutionProfile::builder()
        .consistency(a.consistency)
        .request_timeout(Some(Duration::from_secs(60)))
        .build();
    let address = format!("{}:{}", a.host, a.port);
    SessionBuilder::new()
        .known_node(&address)
        .default_execution_profile_handle(profile.into_handle())
        .connection_timeout(Duration::from_secs(10))
        .pool_size(scylla::client::PoolSize::PerHost(
            std::num::NonZeroUsize::new(4).expect("non-zero"),
        ))
        .build()
        .await
        .with_context(|| format!("connecting to {address}"))
}

async fn schema(s: &Session, ks: &str, replication: &str) -> Result<()> {
    for q in [
        format!("CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {replication}"),
        format!(
            "CREATE TABLE IF NOT EXISTS {ks}.rows (p bigint, c int, t text, n int, d double, \
             ts timestamp, b blob, PRIMARY KEY (p, c))"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {ks}.meta (name text PRIMARY KEY, version int, rows bigint, \
             bytes bigint, written timestamp)"
        ),
    ] {
        s.query_unpaged(q.as_str(), ())
            .await
            .with_context(|| q.clone())?;
    }
    println!("schema=ok");
    Ok(())
}

async fn truncate(s: &Session, ks: &str) -> Result<()> {
    let mut st = Statement::new(format!("TRUNCATE {ks}.rows"));
    st.set_request_timeout(Some(Duration::from_secs(300)));
    retry("truncate", || s.query_unpaged(st.clone(), ())).await?;
    println!("truncate=ok");
    Ok(())
}

/// Partition and clustering key of row `i` (see the module doc for the block layout).
fn key(i: u64) -> (i64, i32) {
    let block = i / BLOCK_ROWS;
    let r = i % BLOCK_ROWS;
    let (local, c) = match r {
        0..1000 => (0, r),
        1000..2000 => (1 + (r - 1000) / 100, (r - 1000) % 100),
        2000..3000 => (11 + (r - 2000) / 10, (r - 2000) % 10),
        _ => (111 + (r - 3000), 0),
    };
    ((block * PARTITIONS_PER_BLOCK + local) as i64, c as i32)
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

type Row = (i64, i32, String, i32, f64, CqlTimestamp, Vec<u8>);

/// Row `i` and the size of its cell values in bytes.
fn row(i: u64) -> (Row, u64) {
    let (p, c) = key(i);
    let mut s = i.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x5DEE_CE66;
    let h = splitmix(&mut s);
    let tlen = 300 + (h % 201) as usize;
    let mut t = String::with_capacity(tlen);
    while t.len() < tlen {
        let mut x = splitmix(&mut s);
        for _ in 0..10 {
            if t.len() == tlen {
                break;
            }
            t.push(ALPHABET[(x & 63) as usize] as char);
            x >>= 6;
        }
    }
    let mut b = Vec::with_capacity(BLOB_LEN + 8);
    while b.len() < BLOB_LEN {
        b.extend_from_slice(&splitmix(&mut s).to_le_bytes());
    }
    b.truncate(BLOB_LEN);
    let n = (h >> 32) as i32;
    // Quarter steps: exact in binary and in a short decimal (survives CSV round trips).
    let d = (h % 4_000_000) as f64 / 4.0;
    let ts = CqlTimestamp(1_700_000_000_000 + i as i64 * 7);
    let size = 8 + 4 + t.len() as u64 + 4 + 8 + 8 + b.len() as u64;
    ((p, c, t, n, d, ts, b), size)
}

/// Retries requests that failed for load reasons (timeouts, overload): every statement here is
/// idempotent.
async fn retry<T, F, Fut>(what: &str, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ExecutionError>>,
{
    let mut attempt = 0u32;
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if attempt < 30 => {
                attempt += 1;
                if RETRIES.fetch_add(1, Ordering::Relaxed) < 10 {
                    eprintln!("drover-bench-gen: {what}: {e} (retrying)");
                }
                tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt.min(20)))).await;
            }
            Err(e) => return Err(e).context(what.to_string()),
        }
    }
}

async fn marker(s: &Session, ks: &str) -> Result<Option<(i32, i64, i64)>> {
    let r = s
        .query_unpaged(
            format!("SELECT version, rows, bytes FROM {ks}.meta WHERE name = 'rows'"),
            (),
        )
        .await?
        .into_rows_result()?;
    Ok(r.maybe_first_row::<(Option<i32>, Option<i64>, Option<i64>)>()?
        .and_then(|(v, r, b)| Some((v?, r?, b?))))
}

async fn generate(s: &Session, a: &Args) -> Result<()> {
    let ks = &a.keyspace;
    let Some(n) = a.rows else { bail!("generate needs --rows N") };
    let started = Instant::now();
    let (start, mut bytes) = match marker(s, ks).await? {
        Some((v, r, b)) if v == GEN_VERSION && r as u64 == n => {
            eprintln!("drover-bench-gen: {ks}.rows already holds these {n} rows (marker); skipping");
            println!("rows={n}\nbytes={b}\ngenerated=0\nseconds=0.0");
            return Ok(());
        }
        Some((v, r, b)) if v == GEN_VERSION && (r as u64) < n && (r as u64).is_multiple_of(BLOCK_ROWS) => {
            eprintln!("drover-bench-gen: {ks}.rows holds rows 0..{r}; adding {r}..{n}");
            (r as u64, b as u64)
        }
        _ => (0, 0),
    };
    // Remove the marker first: an interrupted run leaves none, and the next one starts over.
    s.query_unpaged(format!("DELETE FROM {ks}.meta WHERE name = 'rows'"), ())
        .await?;
    if start == 0 {
        truncate(s, ks).await?;
    }
    let mut insert = s
        .prepare(format!(
            "INSERT INTO {ks}.rows (p, c, t, n, d, ts, b) VALUES (?, ?, ?, ?, ?, ?, ?)"
        ))
        .await?;
    insert.set_is_idempotent(true);
    let insert = &insert;
    let done = Arc::new(AtomicU64::new(0));
    let reporter = {
        let done = done.clone();
        let total = n - start;
        tokio::spawn(async move {
            let t0 = Instant::now();
            let mut tick = tokio::time::interval(Duration::from_secs(10));
            tick.tick().await;
            loop {
                tick.tick().await;
                let d = done.load(Ordering::Relaxed);
                eprintln!(
                    "drover-bench-gen: {d}/{total} rows, {:.0} rows/s, {} retries",
                    d as f64 / t0.elapsed().as_secs_f64(),
                    RETRIES.load(Ordering::Relaxed)
                );
            }
        })
    };
    let mut writes = futures::stream::iter(start..n)
        .map(|i| async move {
            let (values, size) = row(i);
            retry("insert", || s.execute_unpaged(insert, &values)).await?;
            Ok::<u64, anyhow::Error>(size)
        })
        .buffer_unordered(a.concurrency.unwrap_or(256));
    while let Some(r) = writes.next().await {
        bytes += r?;
        done.fetch_add(1, Ordering::Relaxed);
    }
    reporter.abort();
    s.query_unpaged(
        format!(
            "INSERT INTO {ks}.meta (name, version, rows, bytes, written) \
             VALUES ('rows', ?, ?, ?, toTimestamp(now()))"
        ),
        (GEN_VERSION, n as i64, bytes as i64),
    )
    .await?;
    println!("rows={n}");
    println!("bytes={bytes}");
    println!("generated={}", n - start);
    println!("seconds={:.1}", started.elapsed().as_secs_f64());
    println!("retries={}", RETRIES.load(Ordering::Relaxed));
    Ok(())
}

/// Counts KS.rows with `COUNT(*)` over `splits` equal token ranges, a few at a time.
async fn count(s: &Session, a: &Args) -> Result<u64> {
    let ks = &a.keyspace;
    let splits = a.splits.max(1) as i128;
    let mut stmt = s
        .prepare(format!(
            "SELECT COUNT(*) FROM {ks}.rows WHERE token(p) > ? AND token(p) <= ?"
        ))
        .await?;
    stmt.set_request_timeout(Some(Duration::from_secs(120)));
    stmt.set_is_idempotent(true);
    let stmt = &stmt;
    let (min, max) = (i64::MIN as i128, i64::MAX as i128);
    let bound = |k: i128| (min + (max - min) * k / splits) as i64;
    let mut counts = futures::stream::iter(0..splits)
        .map(|k| async move {
            let (lo, hi) = (bound(k), bound(k + 1));
            let r = retry("count", || s.execute_unpaged(stmt, (lo, hi))).await?;
            let (n,) = r.into_rows_result()?.single_row::<(i64,)>()?;
            Ok::<u64, anyhow::Error>(n as u64)
        })
        .buffer_unordered(a.concurrency.unwrap_or(4));
    let mut total = 0;
    while let Some(n) = counts.next().await {
        total += n?;
    }
    Ok(total)
}

/// Waits until `system_views.sstable_tasks` (running compactions and the like) of every node is
/// empty twice in a row, so a copy does not compete with the compactions of the previous step.
async fn wait_idle(s: &Session, timeout_s: u64) -> Result<()> {
    use scylla::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
    let started = Instant::now();
    let mut quiet = 0;
    loop {
        let mut tasks = 0;
        // The table is each node's own: ask each.
        for node in s.get_cluster_state().get_nodes_info() {
            let mut st = Statement::new("SELECT kind FROM system_views.sstable_tasks");
            st.set_load_balancing_policy(Some(SingleTargetLoadBalancingPolicy::new(
                NodeIdentifier::Node(node.clone()),
                None,
            )));
            tasks += s.query_unpaged(st, ()).await?.into_rows_result()?.rows_num();
        }
        quiet = if tasks == 0 { quiet + 1 } else { 0 };
        if quiet >= 2 {
            break;
        }
        if started.elapsed().as_secs() >= timeout_s {
            eprintln!("drover-bench-gen: still {tasks} sstable tasks after {timeout_s}s; going on");
            break;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    println!("idle_wait_seconds={:.0}", started.elapsed().as_secs_f64());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_hold_partitions_of_1000_100_10_and_1_rows() {
        let mut sizes = std::collections::BTreeMap::<i64, u64>::new();
        for i in 0..BLOCK_ROWS {
            *sizes.entry(key(i).0).or_default() += 1;
        }
        assert_eq!(sizes.len() as u64, PARTITIONS_PER_BLOCK);
        let mut by_size = std::collections::BTreeMap::<u64, u64>::new();
        for n in sizes.values() {
            *by_size.entry(*n).or_default() += 1;
        }
        assert_eq!(by_size, [(1, 1000), (10, 100), (100, 10), (1000, 1)].into());
        assert_eq!(key(BLOCK_ROWS), (PARTITIONS_PER_BLOCK as i64, 0));
    }

    #[test]
    fn rows_are_about_a_kilobyte_and_deterministic() {
        let total: u64 = (0..10_000).map(|i| row(i).1).sum();
        let mean = total / 10_000;
        assert!((950..1050).contains(&mean), "{mean}");
        assert_eq!(row(42).0.2, row(42).0.2);
    }
}
