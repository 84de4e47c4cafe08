//! Jobs have identity (issue 43): a name (given in the job file, or `source → target` derived
//! from what it moves, never a secret), kind, source and target, rows, bytes, duration, start
//! and end, and once ended the average rate over the run — in the API's list and job, in
//! `drover jobs` and `drover job`, and in the console's list and job page.

use std::time::Duration;

use serde_json::Value;
use test_support::cql::{Fixture, job};
use test_support::{Daemon, Home};

const WAIT: Duration = Duration::from_secs(180);

/// `drover ARGS` against `daemon`: exit code and stdout.
async fn drover(daemon: &Daemon, args: &[&str]) -> (Option<i32>, String) {
    let (code, stdout, _) = daemon.cli(args).await;
    (code, stdout)
}

/// The job `id` as `GET /api/v1/jobs` lists it.
async fn listed(daemon: &Daemon, id: &str) -> Value {
    let (status, list) = daemon.get("/api/v1/jobs").await;
    assert_eq!(status, 200, "{list}");
    list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == id)
        .unwrap_or_else(|| panic!("{id} is not listed: {list}"))
        .clone()
}

fn time(job: &Value, key: &str) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(
        job[key].as_str().unwrap_or_else(|| panic!("{key}: {job}")),
    )
    .unwrap()
    .to_utc()
}

/// The identity fields of an ended job, checked against its own times and counters: the
/// duration is endedAt − startedAt, and the average rates are rows and bytes over it.
fn check_ended(job: &Value, rows: u64) {
    assert_eq!(job["rows"], rows, "{job}");
    let bytes = job["bytes"]
        .as_u64()
        .unwrap_or_else(|| panic!("bytes: {job}"));
    assert!(bytes > 0, "{job}");
    let seconds = (time(job, "endedAt") - time(job, "startedAt"))
        .num_nanoseconds()
        .unwrap() as f64
        / 1e9;
    // durationSeconds is rounded to the millisecond.
    let duration = job["durationSeconds"].as_f64().unwrap();
    assert!(
        (duration - seconds).abs() <= 0.0005 + 1e-9,
        "{duration} vs {seconds}: {job}"
    );
    assert!(duration > 0.0, "{job}");
    let average = job["averageRowsPerSecond"].as_f64().unwrap();
    let expected = rows as f64 / seconds;
    assert!(
        (average - expected).abs() <= expected * 1e-6,
        "average {average} rows/s, rows/duration {expected}: {job}"
    );
    let average_bytes = job["averageBytesPerSecond"].as_f64().unwrap();
    let expected_bytes = bytes as f64 / seconds;
    assert!(
        (average_bytes - expected_bytes).abs() <= expected_bytes * 1e-6,
        "{job}"
    );
    // An ended job's rate counters are its averages over the run too (they were 0), over the
    // same recorded startedAt..endedAt: the one figure, rounded to a whole number per second
    // (they were a few percent apart, from the run's own clock).
    let counted = job["progress"]["rowsPerSecond"].as_u64().unwrap();
    assert!(counted > 0, "{job}");
    assert_eq!(
        counted as f64,
        average.round(),
        "rowsPerSecond against averageRowsPerSecond: {job}"
    );
    assert_eq!(
        job["progress"]["bytesPerSecond"].as_u64().unwrap() as f64,
        average_bytes.round(),
        "bytesPerSecond against averageBytesPerSecond: {job}"
    );
}

/// A CQL migration without a name is called `ks.t → ks.t`, from names only: the credentials of
/// its job file appear nowhere. Its rows, bytes, duration and average rate are in the API's
/// job and list, `drover jobs` (readable in 120 columns) and `drover job`, and the console.
#[tokio::test]
async fn a_cql_migration_is_named_after_what_it_moves_with_rows_duration_and_average_rate() {
    let Fixture { ks, daemon, .. } = Fixture::rows("it_identity_cql", 3000, 100, 100).await;
    let secret = "pw-never-in-a-name-7f3a";
    let credentials = format!("  credentials:\n    username: cassandra\n    password: {secret}\n");
    let yaml = job(ks, "t", &credentials, &credentials, "");
    let ran = daemon.run_job("/api/v1/migrations", &yaml, WAIT).await;
    let id = ran["id"].as_str().unwrap().to_string();
    let name = format!("{ks}.t → {ks}.t");
    for job in [ran.clone(), listed(&daemon, &id).await] {
        assert_eq!(job["name"], name.as_str(), "{job}");
        assert_eq!(job["kind"], "migration", "{job}");
        assert_eq!(job["source"], format!("{ks}.t"), "{job}");
        assert_eq!(job["target"], format!("{ks}.t"), "{job}");
        check_ended(&job, 3000);
        assert!(!job.to_string().contains(secret), "{job}");
    }

    // The CLI: a table of at most 120 columns with the name, rows and duration; -o json has
    // every field.
    let (code, table) = drover(&daemon, &["jobs"]).await;
    assert_eq!(code, Some(0), "{table}");
    let header = table.lines().next().unwrap();
    for column in [
        "ID", "NAME", "KIND", "STATE", "PROGRESS", "ROWS", "DURATION", "AGE",
    ] {
        assert!(header.contains(column), "{header}");
    }
    let line = table
        .lines()
        .find(|l| l.starts_with(&id[..13]))
        .unwrap_or_else(|| panic!("{table}"));
    // Cut at 32 characters in the table.
    let shown: String = if name.chars().count() > 32 {
        name.chars().take(31).chain(['…']).collect()
    } else {
        name.clone()
    };
    assert!(
        line.contains(&shown) && line.contains("3,000") && line.contains("SUCCEEDED"),
        "{line}"
    );
    assert!(
        table.lines().all(|l| l.chars().count() <= 120),
        "wider than 120 columns:\n{table}"
    );
    let (_, wide) = drover(&daemon, &["jobs", "-o", "wide"]).await;
    assert!(
        wide.lines().next().unwrap().contains("SOURCE → TARGET"),
        "{wide}"
    );
    assert!(wide.contains(&id) && wide.contains(&name), "{wide}");
    assert!(
        wide.contains("rows/s") && wide.contains("average"),
        "{wide}"
    );
    let (_, json) = drover(&daemon, &["jobs", "-o", "json"]).await;
    let json: Value = serde_json::from_str(&json).unwrap();
    let cli = json["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == id.as_str())
        .unwrap();
    for key in [
        "name",
        "source",
        "target",
        "rows",
        "bytes",
        "durationSeconds",
        "averageRowsPerSecond",
        "startedAt",
        "endedAt",
    ] {
        assert!(!cli[key].is_null(), "{key}: {cli}");
    }
    let (_, one) = drover(&daemon, &["job", &id[..13]]).await;
    let field = |label: &str| {
        one.lines()
            .find_map(|l| l.strip_prefix(label))
            .map(str::trim)
            .unwrap_or_else(|| panic!("{label} {one}"))
            .to_string()
    };
    assert_eq!(field("Name:"), name);
    assert_eq!(field("Source:"), format!("{ks}.t"));
    assert_eq!(field("Rows:"), "3,000");
    assert!(field("Rate:").ends_with("average"), "{one}");
    assert!(!one.contains("0 rows/s, 0 B/s"), "{one}");

    // The console: the list names the job, with its route, rows and average rate; its page's
    // heading is the name.
    let page = daemon.get_text("/ui/jobs").await;
    assert!(page.contains(&name) && page.contains("3,000"), "{page}");
    assert!(
        page.contains("rows/s") && page.contains("average"),
        "{page}"
    );
    let page = daemon.get_text(&format!("/ui/jobs/{id}")).await;
    assert!(
        page.contains(&format!("<h1 data-field=\"name\">{name}</h1>")),
        "{page}"
    );
    assert!(
        page.contains(&format!("<title>{name} · drover</title>")),
        "{page}"
    );
    assert!(!page.contains("0 rows/s · 0 B/s"), "{page}");
    assert!(!page.contains(secret));
}

/// A name given in the job file is the job's name (ScyllaDB Migrator skips the key); one
/// that holds HTML is escaped on every page; one too long, blank or of several lines is
/// refused with the key named.
#[tokio::test]
async fn a_given_name_is_kept_escaped_and_bounded() {
    let Fixture { ks, daemon, .. } = Fixture::rows("it_identity_named", 200, 10, 10).await;
    let given = "nightly <script>alert('x')</script> & co";
    let yaml = job(ks, "t", "", "", &format!("name: \"{given}\"\n"));
    let ran = daemon.run_job("/api/v1/migrations", &yaml, WAIT).await;
    let id = ran["id"].as_str().unwrap();
    assert_eq!(ran["name"], given, "{ran}");
    assert_eq!(ran["source"], format!("{ks}.t"), "{ran}");
    check_ended(&ran, 200);
    assert_eq!(listed(&daemon, id).await["name"], given);
    let escaped = "nightly &lt;script&gt;alert('x')&lt;/script&gt; &amp; co";
    for path in ["/ui/jobs".to_string(), format!("/ui/jobs/{id}")] {
        let page = daemon.get_text(&path).await;
        assert!(page.contains(escaped), "{path}: {page}");
        assert!(!page.contains("<script>alert"), "{path}: {page}");
    }
    // Under a given name, the list says what the job moves.
    let page = daemon.get_text("/ui/jobs").await;
    assert!(
        page.contains(&format!(
            "<span class=\"route\" data-field=\"route\">{ks}.t → {ks}.t</span>"
        )),
        "{page}"
    );
    // A validation of the same file carries the same name.
    let validated = daemon.run_job("/api/v1/validations", &yaml, WAIT).await;
    assert_eq!(validated["name"], given, "{validated}");
    assert_eq!(validated["kind"], "validation");
    assert_eq!(validated["rows"], 200, "{validated}");
    check_ended(&validated, 200);

    for (name, why) in [
        (format!("\"{}\"", "n".repeat(201)), "at most 200"),
        ("\"  \"".to_string(), "blank"),
        ("\"two\\nlines\"".to_string(), "one line"),
        ("[1, 2]".to_string(), "must be a string"),
    ] {
        let (status, body) = daemon
            .post_raw(
                "/api/v1/migrations",
                "application/yaml",
                job(ks, "t", "", "", &format!("name: {name}\n")),
            )
            .await;
        assert_eq!(status, 400, "{name}: {body}");
        let message = test_support::error_message(status, &body);
        assert!(
            message.contains("name") && message.contains(why),
            "{name}: {message}"
        );
    }
}

/// Another connector: a Parquet load is called `parquet:<path> → ks.t`, with rows and
/// average rate like a CQL copy; a diagnostic job is named after what it does.
#[tokio::test]
async fn a_parquet_load_and_a_diagnostic_are_named_too() {
    let Fixture { ks, dst, .. } = Fixture::new(
        "it_identity_pq",
        "CREATE TABLE $ks.t (p bigint PRIMARY KEY, v text)",
    )
    .await;
    let data = tempfile::tempdir().unwrap();
    let d = data.path().display().to_string();
    crate::parquet::python(&format!(
        "import pyarrow as pa, pyarrow.parquet as pq\n\
         pq.write_table(pa.table({{'p': pa.array(range(500), pa.int64()), 'v': ['row'] * 500}}), '{d}/a.parquet')"
    ));
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    let ran = daemon
        .run_job(
            "/api/v1/migrations",
            &crate::parquet::load_job(&d, ks, "t", "", ""),
            WAIT,
        )
        .await;
    assert_eq!(ran["name"], format!("parquet:{d} → {ks}.t"), "{ran}");
    assert_eq!(ran["source"], format!("parquet:{d}"), "{ran}");
    assert_eq!(ran["target"], format!("{ks}.t"), "{ran}");
    check_ended(&ran, 500);
    let rows = test_support::cql::raw_rows(&dst, &format!("{ks}.t"), "p").await;
    assert_eq!(
        rows.len(),
        500,
        "the target holds what the job says it wrote"
    );

    let (status, accepted) = daemon
        .post_json(
            "/api/v1/diagnostics/jobs",
            &serde_json::json!({"durationSeconds": 1}),
        )
        .await;
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["jobId"].as_str().unwrap();
    let diagnostic = daemon.wait_job(id, WAIT, test_support::ended).await;
    assert_eq!(diagnostic["name"], "diagnostic: wait 1s", "{diagnostic}");
    assert!(diagnostic.get("source").is_none(), "{diagnostic}");
    assert!(
        diagnostic["durationSeconds"].as_f64() >= Some(1.0),
        "{diagnostic}"
    );
}
