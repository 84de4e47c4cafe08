//! The first hour as the docs tell it: the job file and commands of README.md's five-minute
//! migration and of docs/first-migration.md, taken from the documents themselves and run
//! against a real daemon, so that a document that stops working fails the suite.

use test_support::cql::{Fixture, assert_same, exec};
use test_support::{Daemon, drover_bin};

/// The text between the first line that starts with `open` and the next line that starts with
/// `close`, in `doc`.
fn block(doc: &str, open: &str, close: &str) -> String {
    let mut lines = doc.lines().skip_while(|l| !l.starts_with(open));
    assert!(lines.next().is_some(), "no line starting {open:?}");
    lines
        .take_while(|l| !l.starts_with(close))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `drover ARGS` in `dir` against `daemon`: exit code and both outputs.
async fn drover(daemon: &Daemon, dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let out = tokio::process::Command::new(drover_bin())
        .args(args)
        .current_dir(dir)
        .env("DROVER_SERVER", daemon.url(""))
        .output()
        .await
        .unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Runs a documented job file: the keyspace `shop` becomes the test's own, `./savepoints` a
/// directory of the test (the daemon's working directory is not the test's). Submitted and
/// followed, then validated, as the documents say, each exiting 0; the target then holds the
/// source's rows, each cell with its writetime and TTL, read through the driver.
async fn run_documented(fixture: &Fixture, job: &str, name: &str) {
    let Fixture {
        ks,
        src,
        dst,
        daemon,
        ..
    } = fixture;
    let dir = daemon.home().path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let job = job
        .replace("keyspace: shop", &format!("keyspace: {ks}"))
        .replace(
            "./savepoints",
            &dir.join("savepoints").display().to_string(),
        );
    assert!(job.contains(&format!("keyspace: {ks}")), "{job}");
    std::fs::write(dir.join("job.yaml"), &job).unwrap();
    exec(dst, &format!("TRUNCATE {ks}.orders")).await;

    let (code, said) = drover(daemon, &dir, &["submit", "job.yaml", "--follow"]).await;
    assert_eq!(
        code,
        Some(0),
        "{name}: drover submit job.yaml --follow\n{job}\n{said}"
    );
    let (code, said) = drover(daemon, &dir, &["validate", "--config", "job.yaml"]).await;
    assert_eq!(code, Some(0), "{name}: drover validate\n{said}");
    assert!(said.contains("no differences"), "{name}: {said}");

    let select = "id, customer, total, items, writetime(customer), ttl(customer), writetime(total), ttl(total)";
    let table = format!("{ks}.orders");
    let rows = assert_same(src, &table, dst, &table, select, select, &[5, 7]).await;
    assert_eq!(rows, 2, "{name}");
}

#[tokio::test]
async fn the_first_migration_runs_as_the_readme_and_its_page_write_it() {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/first-migration.md"
    ))
    .unwrap();
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    // The page's CQL: the keyspace statement is the test's own, the table and rows the page's.
    let cql = block(&page, "```sql", "```");
    let statements: Vec<&str> = cql
        .split(';')
        .map(|s| {
            s.lines()
                .filter(|l| !l.trim_start().starts_with("--"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .map(|s| Box::leak(s.into_boxed_str()) as &str)
        .collect();
    let create = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE"))
        .expect("the page creates its table")
        .replace("shop.", "$ks.")
        .replace("IF NOT EXISTS ", "");
    let fixture = Fixture::new("it_docs_first", &create).await;
    for insert in statements.iter().filter(|s| s.starts_with("INSERT")) {
        exec(
            &fixture.src,
            &insert.replace("shop.", &format!("{}.", fixture.ks)),
        )
        .await;
    }

    let readme_job = block(&readme, "cat > job.yaml <<'EOF'", "EOF");
    run_documented(&fixture, &readme_job, "readme").await;
    let page_job = block(&page, "```yaml", "```");
    run_documented(&fixture, &page_job, "first-migration").await;
}
