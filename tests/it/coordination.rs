//! One job shared by several daemons (`coordination: {type: target-table}`): units leased
//! through lightweight transactions on the target, a dead daemon's units taken over once its
//! leases lapse, and every daemon's status showing the whole job.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use test_support::cql::{self, Fixture, assert_same, job};
use test_support::{Daemon, drover_bin, listener_pid};

const WAIT: Duration = Duration::from_secs(300);
/// Long enough that a daemon of a loaded two-core machine (the whole suite runs beside this
/// test) renews its leases in time; the killed daemon's units then wait this long.
const LEASE_MS: i64 = 10_000;

type LeaseRecord = (
    String,
    i64,
    String,
    String,
    Option<i64>,
    Option<i64>,
    Option<String>,
);

/// Three daemons share a job; one is killed with `kill -9` mid-way. The two others finish
/// it, taking over the dead one's units once their leases lapse; both report the whole job;
/// the validator finds the target identical; and the lease records show no unit held by two
/// daemons at once (a unit is taken again only after its last holder's lease lapsed).
#[tokio::test]
async fn three_daemons_share_a_job_and_finish_it_when_one_is_killed() {
    let rows = 100_000;
    let Fixture {
        src,
        dst,
        ks,
        daemon: first,
    } = Fixture::rows("it_coord", rows, 100, 100).await;
    let base = job(ks, "t", "", "  rowsPerSecond: 2500\n", "");
    let yaml = format!(
        "{base}coordination:\n  type: target-table\n  leaseSeconds: {}\n",
        LEASE_MS / 1000
    );
    let mut second = Daemon::fresh("").await;
    let third = Daemon::fresh("").await;
    let mut ids = Vec::new();
    for d in [&first, &second, &third] {
        ids.push(d.submit_job("/api/v1/migrations", &yaml).await);
    }
    first
        .wait_job(&ids[0], WAIT, |j| {
            j["progress"]["unitsDone"].as_u64() >= Some(8)
        })
        .await;
    let killed_pid = listener_pid(&second.addr.to_string());
    second.kill9();

    let mut ended = Vec::new();
    for (d, id) in [(&first, &ids[0]), (&third, &ids[2])] {
        let done = d
            .wait_job(id, WAIT, |j| {
                !matches!(j["state"].as_str(), Some("RUNNING" | "QUEUED"))
            })
            .await;
        assert_eq!(done["state"], "SUCCEEDED", "{done}\n{}", d.logs());
        let p = &done["progress"];
        assert_eq!(
            p["unitsDone"], p["unitsTotal"],
            "each daemon shows the whole job: {done}"
        );
        assert!(p["coordinationLwtRequests"].as_u64() > Some(0), "{done}");
        ended.push(done);
    }
    for done in &ended {
        let written = done["progress"]["rowsWritten"].as_u64().unwrap();
        assert!(
            written < rows as u64,
            "each survivor copied a share of the job, not all of it: {done}"
        );
    }

    // The lease records.
    let result = dst
        .query_unpaged(
            format!(
                "SELECT unit, taken_at, owner, holder, renewed_at, ended_at, ended FROM {ks}.drover_units_leases"
            ),
            (),
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap();
    let records: Vec<LeaseRecord> = result.rows().unwrap().collect::<Result<_, _>>().unwrap();
    let mut by_unit: BTreeMap<String, Vec<LeaseRecord>> = BTreeMap::new();
    for r in records {
        by_unit.entry(r.0.clone()).or_default().push(r);
    }
    let total = ended[0]["progress"]["unitsTotal"].as_u64().unwrap() as usize;
    assert_eq!(by_unit.len(), total, "every unit was leased");
    let mut taken_over = 0;
    for (unit, mut leases) in by_unit {
        leases.sort_by_key(|l| l.1);
        let done: Vec<_> = leases
            .iter()
            .filter(|l| l.6.as_deref() == Some("done"))
            .collect();
        // The end of a lease is recorded after the unit is marked complete: the killed daemon
        // may have completed its last unit and died before recording it.
        let killed_last = leases
            .last()
            .is_some_and(|l| l.5.is_none() && l.3.contains(&format!("\"pid\":{killed_pid}")));
        assert!(
            done.len() == 1 || (done.is_empty() && killed_last),
            "{unit}: completed once: {leases:?}"
        );
        for pair in leases.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            // Only a holder that died leaves a lease without an end; the next taker came
            // after it lapsed.
            assert!(
                a.5.is_none() && a.3.contains(&format!("\"pid\":{killed_pid}")),
                "{unit}: taken again while held by a live daemon: {leases:?}"
            );
            // The database counts TTLs in whole seconds.
            let written = a.4.expect("renewed_at is set when a lease is taken");
            let lapsed = written / 1000 * 1000 + LEASE_MS;
            assert!(
                b.1 >= lapsed,
                "{unit}: taken at {} before the lease of {} lapsed at {lapsed}: {leases:?}",
                b.1,
                a.2
            );
            taken_over += 1;
        }
    }
    assert!(
        taken_over > 0,
        "the killed daemon held units that the others took over"
    );

    let select = "p, c, v, n";
    assert_eq!(
        assert_same(
            &src,
            &format!("{ks}.t"),
            &dst,
            &format!("{ks}.t"),
            select,
            select,
            &[]
        )
        .await,
        rows
    );
    let validate = tokio::process::Command::new(drover_bin())
        .args(["validate", "--config"])
        .arg(cql::write_job(&base))
        .output()
        .await
        .unwrap();
    assert_eq!(
        validate.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&validate.stderr)
    );

    // Submitted again, the job finds every unit done.
    let again = first.submit_job("/api/v1/migrations", &yaml).await;
    let done: Value = first
        .wait_job(&again, WAIT, |j| j["state"] == "SUCCEEDED")
        .await;
    assert_eq!(done["progress"]["rowsWritten"], 0, "{done}");
}

/// What a shared job may not be: savepoints beside it, a non-CQL target, a bad lease.
#[tokio::test]
async fn coordination_is_checked_when_the_job_is_submitted() {
    let daemon = Daemon::fresh("").await;
    let base = job("ks", "t", "", "", "");
    for (extra, says) in [
        (
            "coordination:\n  type: target-table\nsavepoints:\n  path: /tmp/x\n  intervalSeconds: 5\n",
            "coordination: a shared job keeps its progress per unit",
        ),
        (
            "coordination:\n  type: zookeeper\n",
            "coordination.type: unknown type \"zookeeper\"",
        ),
        (
            "coordination:\n  type: target-table\n  leaseSeconds: 1\n",
            "coordination.leaseSeconds",
        ),
        (
            "coordination:\n  type: target-table\n  table: 'a-b'\n",
            "coordination.table",
        ),
    ] {
        let (status, body) = daemon
            .post_raw(
                "/api/v1/migrations",
                "application/yaml",
                format!("{base}{extra}"),
            )
            .await;
        assert_eq!(status, 400, "{body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
    }
}
