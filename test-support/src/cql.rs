//! Helpers to set up and compare tables on the real test clusters.

use std::time::Duration;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Mutex;

use drover::connectors::cql::rows::RawRow;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;

use crate::daemon::Daemon;

/// The source cluster's node.
pub fn src_addr() -> String {
    crate::daemon::cassandra_src()
}

/// The target cluster's node.
pub fn dst_addr() -> String {
    std::env::var("DROVER_TEST_CASSANDRA_DST").unwrap_or_else(|_| "127.0.0.2:9042".to_string())
}

/// Sessions to the source and the target cluster.
pub async fn clusters() -> (Session, Session) {
    (session(&src_addr()).await, session(&dst_addr()).await)
}

/// What a test of a migration or a validation begins with: sessions to both clusters, a
/// keyspace of its own made fresh on both, and a daemon in a new home.
pub struct Fixture {
    /// The source cluster.
    pub src: Session,
    /// The target cluster.
    pub dst: Session,
    /// The keyspace, on both clusters (see [`Fixture::new`] for its name).
    pub ks: &'static str,
    /// The daemon (its home is [`Daemon::home`]).
    pub daemon: Daemon,
}

impl Fixture {
    /// A keyspace named after `base` made fresh on both clusters with `ddl` run in it (see
    /// [`fresh_keyspace`]; an empty `ddl` leaves it empty). Its name is `base` with this test
    /// process's id appended, since the runs of other checkouts share the clusters and drop
    /// and create their keyspaces at any time.
    pub async fn new(base: &'static str, ddl: &str) -> Self {
        let (src, dst) = clusters().await;
        let ks = own_keyspace(&src, &dst, base).await;
        fresh_keyspace(&src, &dst, ks, ddl).await;
        Self::started(src, dst, ks).await
    }

    /// A keyspace named after `base` (as by [`Fixture::new`]) with [`ROWS_TABLE`] on both
    /// clusters and `rows` rows in the source (see [`rows_table`]).
    pub async fn rows(base: &'static str, rows: usize, wide: usize, per_partition: usize) -> Self {
        let (src, dst) = clusters().await;
        let ks = own_keyspace(&src, &dst, base).await;
        rows_table(&src, &dst, ks, rows, wide, per_partition).await;
        Self::started(src, dst, ks).await
    }

    async fn started(src: Session, dst: Session, ks: &'static str) -> Self {
        let daemon = Daemon::fresh("").await;
        Self {
            src,
            dst,
            ks,
            daemon,
        }
    }
}

/// The keyspace of the test that names it `base`, in this process: `<base>_p<pid>`. Those of
/// test processes that have ended are dropped, so that runs leave one keyspace each behind.
async fn own_keyspace(src: &Session, dst: &Session, base: &str) -> &'static str {
    claim_keyspace(base);
    let me = std::process::id();
    let prefix = format!("{base}_p");
    for s in [src, dst] {
        for row in raw_rows(s, "system_schema.keyspaces", "keyspace_name").await {
            let name = String::from_utf8_lossy(row.cells[0].as_deref().unwrap_or_default());
            let pid = name
                .strip_prefix(&prefix)
                .and_then(|pid| pid.parse::<u32>().ok());
            if pid.is_some_and(|pid| pid != me && !Path::new(&format!("/proc/{pid}")).exists()) {
                exec(s, &format!("DROP KEYSPACE IF EXISTS {name}")).await;
            }
        }
    }
    String::leak(format!("{prefix}{me}"))
}

/// Panics when two tests of one binary (which run at once) would share a keyspace: each
/// drops and creates its own.
fn claim_keyspace(ks: &str) {
    static CLAIMED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let fresh = CLAIMED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(ks.to_string());
    assert!(fresh, "keyspace {ks} is used by two tests");
}

/// A session to the node at `addr`.
pub async fn session(addr: &str) -> Session {
    SessionBuilder::new()
        .known_node(addr)
        .connection_timeout(Duration::from_secs(10))
        .build()
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {addr} (scripts/testenv up?): {e}"))
}

/// Runs one statement, retried a few times.
pub async fn exec(s: &Session, cql: &str) {
    // Schema changes on a fresh node are occasionally slow to settle: retry a few times.
    for attempt in 0..5 {
        match s.query_unpaged(cql, ()).await {
            Ok(_) => return,
            Err(e) if attempt < 4 => {
                eprintln!("retrying `{cql}`: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("`{cql}` failed: {e}"),
        }
    }
}

/// Creates (fresh) keyspace `ks` on both clusters and runs `ddl` (statements separated by `;`)
/// in it on both.
pub async fn fresh_keyspace(src: &Session, dst: &Session, ks: &str, ddl: &str) {
    for s in [src, dst] {
        empty_keyspace(s, ks).await;
        for stmt in ddl.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            exec(s, &stmt.replace("$ks", ks)).await;
        }
    }
}

/// The table most tests copy.
pub const ROWS_TABLE: &str =
    "CREATE TABLE $ks.t (p int, c int, v text, n bigint, PRIMARY KEY (p, c))";

/// A fresh keyspace `ks` on both clusters with [`ROWS_TABLE`], and `rows` rows in the source
/// (laid out as [`fill_many`] does).
pub async fn rows_table(
    src: &Session,
    dst: &Session,
    ks: &str,
    rows: usize,
    wide: usize,
    per_partition: usize,
) {
    fresh_keyspace(src, dst, ks, ROWS_TABLE).await;
    fill_many(src, &format!("{ks}.t"), rows, wide, per_partition).await;
}

/// Drops and creates keyspace `ks` (SimpleStrategy, RF 1) on one cluster.
pub async fn empty_keyspace(s: &Session, ks: &str) {
    exec(s, &format!("DROP KEYSPACE IF EXISTS {ks}")).await;
    exec(s, &format!("CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")).await;
}

/// Every row of `SELECT <select> FROM <table>` as raw cell bytes, in token and clustering
/// order.
pub async fn raw_rows(s: &Session, table: &str, select: &str) -> Vec<RawRow> {
    let mut st =
        scylla::statement::unprepared::Statement::new(format!("SELECT {select} FROM {table}"));
    st.set_page_size(5000);
    let pager = s.query_iter(st, ()).await.expect("scan");
    use futures::TryStreamExt;
    pager
        .rows_stream::<RawRow>()
        .expect("rows")
        .try_collect()
        .await
        .expect("rows")
}

/// One side of [`assert_same`]: its scan, read a page at a time, and when the page now being
/// compared was asked for and when it arrived.
struct Pages<'a> {
    session: &'a Session,
    statement: scylla::statement::unprepared::Statement,
    /// The next page's paging state; `None` once the last page has arrived.
    next: Option<scylla::response::PagingState>,
    rows: std::collections::VecDeque<RawRow>,
    asked: std::time::Instant,
    arrived: std::time::Instant,
}

impl<'a> Pages<'a> {
    fn new(session: &'a Session, table: &str, select: &str) -> Self {
        let mut statement =
            scylla::statement::unprepared::Statement::new(format!("SELECT {select} FROM {table}"));
        statement.set_page_size(5000);
        let now = std::time::Instant::now();
        Self {
            session,
            statement,
            next: Some(scylla::response::PagingState::start()),
            rows: Default::default(),
            asked: now,
            arrived: now,
        }
    }

    /// Reads pages until one holds a row (or the scan has ended), if no row is left.
    async fn fill(&mut self) {
        while self.rows.is_empty() {
            let Some(state) = self.next.take() else {
                return;
            };
            self.asked = std::time::Instant::now();
            let (result, response) = self
                .session
                .query_single_page(self.statement.clone(), (), state)
                .await
                .expect("scan");
            self.arrived = std::time::Instant::now();
            let rows = result.into_rows_result().expect("rows");
            for row in rows.rows::<RawRow>().expect("rows") {
                self.rows.push_back(row.expect("row"));
            }
            self.next = match response.into_paging_control_flow() {
                std::ops::ControlFlow::Continue(state) => Some(state),
                std::ops::ControlFlow::Break(()) => None,
            };
        }
    }
}

/// Asserts that both tables hold the same cells byte for byte, reading both a page at a time
/// side by side (memory stays flat for large tables). `ttl_columns` are indexes of TTL
/// expressions in the selects, compared within 5 s (a TTL is whole seconds, read at one second
/// and written at another, each rounded; the fidelity matrix allows the same) plus the time
/// that can separate the two reads of the pair: from the earlier of its two pages being asked
/// for to the later arriving. Both sides' pages are asked for together, so that is one
/// page's latency, however loaded the machine is. Returns the number of rows compared.
pub async fn assert_same(
    src: &Session,
    src_table: &str,
    dst: &Session,
    dst_table: &str,
    src_select: &str,
    dst_select: &str,
    ttl_columns: &[usize],
) -> usize {
    assert_same_aged(
        src,
        (src_table, dst, dst_table),
        (src_select, dst_select),
        ttl_columns,
        std::time::Duration::ZERO,
    )
    .await
}

/// [`assert_same`] for a copy whose TTLs count from when it wrote them, not from when it read
/// them (a file unloaded, then loaded: the TTL written is what was left at the unload):
/// TTLs may also differ by `aged`, at most the time from the unload's start to the load's end,
/// which the caller measures.
pub async fn assert_same_aged(
    src: &Session,
    (src_table, dst, dst_table): (&str, &Session, &str),
    (src_select, dst_select): (&str, &str),
    ttl_columns: &[usize],
    aged: std::time::Duration,
) -> usize {
    let aged = aged.as_secs() as i64 + i64::from(aged.subsec_nanos() > 0);
    let mut a = Pages::new(src, src_table, src_select);
    let mut b = Pages::new(dst, dst_table, dst_select);
    let mut n = 0;
    loop {
        tokio::join!(a.fill(), b.fill());
        let (x, y) = match (a.rows.pop_front(), b.rows.pop_front()) {
            (None, None) => return n,
            (Some(x), Some(y)) => (x, y),
            (x, _) => panic!(
                "row counts differ after {n} rows: the {} has more",
                if x.is_some() { "source" } else { "target" }
            ),
        };
        let apart = a.arrived.max(b.arrived) - a.asked.min(b.asked);
        let slack = 5 + aged + apart.as_secs() as i64 + i64::from(apart.subsec_nanos() > 0);
        for (i, (cx, cy)) in x.cells.iter().zip(&y.cells).enumerate() {
            if ttl_columns.contains(&i) {
                let ttls = |c: &Option<bytes::Bytes>| {
                    drover::connectors::cql::codec::read_int_list(c).unwrap_or_else(|| {
                        vec![drover::connectors::cql::codec::read_i32(c).map(i64::from)]
                    })
                };
                let (tx, ty) = (ttls(cx), ttls(cy));
                assert_eq!(tx.len(), ty.len(), "row {n} column {i}: TTL shapes differ");
                for (p, q) in tx.iter().zip(&ty) {
                    match (p, q) {
                        (Some(p), Some(q)) => assert!(
                            (p - q).abs() <= slack,
                            "row {n} column {i}: TTL {p} vs {q} (allowed {slack} s: the two pages were read within {apart:.1?}, the copy aged its TTLs by up to {aged} s)"
                        ),
                        _ => assert_eq!(p, q, "row {n} column {i}: TTL {p:?} vs {q:?}"),
                    }
                }
            } else {
                assert_eq!(
                    cx, cy,
                    "row {n} column {i} of `{src_select}` differs:\nsource {x:?}\ntarget {y:?}"
                );
            }
        }
        n += 1;
    }
}

/// A job file copying `ks.table` from the source to the target, with `extra_source` and
/// `extra_target` lines in those sections and `extra` top-level keys.
pub fn job(ks: &str, table: &str, extra_source: &str, extra_target: &str, extra: &str) -> String {
    job_to(ks, table, table, extra_source, extra_target, extra)
}

/// The same, into `target_table`.
pub fn job_to(
    ks: &str,
    table: &str,
    target_table: &str,
    extra_source: &str,
    extra_target: &str,
    extra: &str,
) -> String {
    let (sh, sp) = src_addr()
        .rsplit_once(':')
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .unwrap();
    let (dh, dp) = dst_addr()
        .rsplit_once(':')
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .unwrap();
    format!(
        "source:\n  type: cassandra\n  host: {sh}\n  port: {sp}\n  keyspace: {ks}\n  table: {table}\n  splitCount: 32\n{extra_source}target:\n  type: scylla\n  host: {dh}\n  port: {dp}\n  keyspace: {ks}\n  table: {target_table}\n{extra_target}{extra}"
    )
}

/// Writes a job file that outlives the test (a CLI may still read it), returning its path.
pub fn write_job(yaml: &str) -> std::path::PathBuf {
    let file = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    let (_, path) = file.keep().unwrap();
    std::fs::write(&path, yaml).unwrap();
    path
}

/// Writes `rows` rows into `table (p int, c int, v text, n bigint)` of the source: partition 0
/// holds `wide` rows, the others `per_partition` each. Same-partition batches keep this quick.
pub async fn fill_many(
    src: &scylla::client::session::Session,
    table: &str,
    rows: usize,
    wide: usize,
    per_partition: usize,
) {
    use futures::StreamExt;
    let insert = src
        .prepare(format!(
            "INSERT INTO {table} (p, c, v, n) VALUES (?, ?, ?, ?)"
        ))
        .await
        .unwrap();
    let mut chunks = Vec::new();
    let mut left = rows;
    let mut p = 0i32;
    while left > 0 {
        let size = if p == 0 {
            wide.min(left)
        } else {
            per_partition.min(left)
        };
        for start in (0..size).step_by(100) {
            chunks.push((p, start as i32, (start + 100).min(size) as i32));
        }
        left -= size;
        p += 1;
    }
    futures::stream::iter(chunks)
        .map(|(p, from, to)| {
            let insert = insert.clone();
            async move {
                let mut batch = scylla::statement::batch::Batch::new(
                    scylla::statement::batch::BatchType::Unlogged,
                );
                let mut values = Vec::new();
                for c in from..to {
                    batch.append_statement(insert.clone());
                    values.push((
                        p,
                        c,
                        format!("value {p}/{c} {}", "x".repeat((c % 50) as usize)),
                        i64::from(p) * 1_000_000 + i64::from(c),
                    ));
                }
                src.batch(&batch, values).await.expect("batch insert");
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
}
