use super::*;

const WAIT: Duration = Duration::from_secs(5);

fn options() -> RegistryOptions {
    RegistryOptions {
        max_running: 2,
        flush_interval: Duration::from_millis(50),
        ..Default::default()
    }
}

async fn until_cancelled(h: JobHandle) -> JobResult {
    h.set_phase("waiting");
    h.cancelled().cancelled().await;
    Err(JobFailure::Stopped)
}

/// The record on disk once it satisfies `ok`: the registry writes in the background, so what a
/// test expects reaches the disk a moment after memory, later still on a loaded machine.
async fn record_on_disk(dir: &Path, id: &str, ok: impl Fn(&JobRecord) -> bool) -> JobRecord {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let record = read_record(dir, id);
        if ok(&record) || tokio::time::Instant::now() > deadline {
            return record;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn read_record(dir: &Path, id: &str) -> JobRecord {
    let bytes = std::fs::read(dir.join(format!("{id}.json"))).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test]
async fn successful_job_records_progress_and_end() {
    let dir = tempfile::tempdir().unwrap();
    let reg = JobRegistry::open(dir.path(), options()).await.unwrap();
    let job = reg
        .submit("test", serde_json::json!({"n": 3}), |h| async move {
            for _ in 0..3 {
                h.add("rows", 10);
            }
            h.set("units", 7);
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(job.state, JobState::Queued);
    let done = reg.wait_finished(&job.id, WAIT).await.unwrap();
    assert_eq!(done.state, JobState::Succeeded);
    assert_eq!(done.progress["rows"], 30);
    assert_eq!(done.progress["units"], 7);
    assert_eq!(done.attempts, 1);
    assert!(done.started_at.is_some() && done.ended_at.is_some());
    // What is on disk is what the API shows.
    assert_eq!(
        record_on_disk(dir.path(), &job.id, |r| *r == done).await,
        done
    );
}

#[tokio::test]
async fn failing_and_panicking_jobs_end_failed_with_their_error() {
    let dir = tempfile::tempdir().unwrap();
    let reg = JobRegistry::open(dir.path(), options()).await.unwrap();
    let failed = reg
        .submit("test", serde_json::Value::Null, |_| async {
            Err(std::io::Error::other("disk on fire").into())
        })
        .await
        .unwrap();
    let panicked = reg
        .submit("test", serde_json::Value::Null, |_| async { panic!("bug") })
        .await
        .unwrap();
    let failed = reg.wait_finished(&failed.id, WAIT).await.unwrap();
    assert_eq!(failed.state, JobState::Failed);
    assert_eq!(failed.error.as_deref(), Some("disk on fire"));
    let panicked = reg.wait_finished(&panicked.id, WAIT).await.unwrap();
    assert_eq!(panicked.state, JobState::Failed);
    assert!(panicked.error.unwrap().contains("panicked"));
}

#[tokio::test]
async fn cancel_stops_running_and_queued_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let reg = JobRegistry::open(dir.path(), options()).await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(
            reg.submit("test", serde_json::Value::Null, until_cancelled)
                .await
                .unwrap()
                .id,
        );
    }
    // Two slots: the third job waits.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let states: Vec<_> = ids.iter().map(|id| reg.get(id).unwrap().state).collect();
    assert_eq!(
        states,
        [JobState::Running, JobState::Running, JobState::Queued]
    );

    for id in &ids {
        reg.cancel(id).unwrap();
    }
    for id in &ids {
        assert_eq!(
            reg.wait_finished(id, WAIT).await.unwrap().state,
            JobState::Cancelled
        );
    }
    let err = reg.cancel(&ids[0]).unwrap_err();
    assert!(matches!(err, JobError::WrongState { .. }), "{err}");
    assert!(matches!(reg.cancel("nope"), Err(JobError::NotFound { .. })));
}

#[tokio::test]
async fn a_process_that_dies_leaves_interrupted_jobs_that_can_resume() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let reg = JobRegistry::open(dir.path(), options()).await.unwrap();
        let job = reg
            .submit("test", serde_json::json!({"table": "t"}), |h| async move {
                h.add("rows", 5);
                until_cancelled(h).await
            })
            .await
            .unwrap();
        // Let the progress flush reach the disk, then vanish without any shutdown, as kill -9.
        let on_disk = record_on_disk(dir.path(), &job.id, |r| {
            r.state == JobState::Running && r.progress.contains_key("rows")
        })
        .await;
        assert_eq!(on_disk.state, JobState::Running);
        std::mem::forget(reg);
        job.id
    };

    let reg = JobRegistry::open(dir.path(), options()).await.unwrap();
    let record = reg.get(&id).unwrap();
    assert_eq!(record.state, JobState::Interrupted);
    assert_eq!(record.progress["rows"], 5);
    assert_eq!(record.spec, serde_json::json!({"table": "t"}));
    assert_eq!(read_record(dir.path(), &id).state, JobState::Interrupted);

    let resumed = reg
        .resume(&id, |h| async move {
            h.add("rows", 1);
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(resumed.state, JobState::Queued);
    let done = reg.wait_finished(&id, WAIT).await.unwrap();
    assert_eq!(done.state, JobState::Succeeded);
    assert_eq!(done.progress["rows"], 6);
    assert_eq!(done.attempts, 2);
    let again = reg.resume(&id, |_| async { Ok(()) }).await.unwrap_err();
    assert!(matches!(again, JobError::WrongState { .. }));
}

#[tokio::test]
async fn shutdown_interrupts_jobs_and_refuses_new_ones() {
    let dir = tempfile::tempdir().unwrap();
    let reg = JobRegistry::open(dir.path(), options()).await.unwrap();
    let polite = reg
        .submit("test", serde_json::Value::Null, until_cancelled)
        .await
        .unwrap();
    let stubborn = reg
        .submit("test", serde_json::Value::Null, |_| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(())
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let left = reg.shutdown(Duration::from_millis(300)).await;
    assert_eq!(left, 1);
    for id in [&polite.id, &stubborn.id] {
        assert_eq!(reg.get(id).unwrap().state, JobState::Interrupted);
        assert_eq!(read_record(dir.path(), id).state, JobState::Interrupted);
    }
    assert!(
        reg.get(&stubborn.id)
            .unwrap()
            .error
            .unwrap()
            .contains("shutdown timeout")
    );
    let refused = reg
        .submit("test", serde_json::Value::Null, |_| async { Ok(()) })
        .await;
    assert!(matches!(refused, Err(JobError::ShuttingDown)));
}

#[tokio::test]
async fn unreadable_records_are_set_aside_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("garbage.json"), b"{not json").unwrap();
    std::fs::write(dir.path().join(".x.json.1.tmp"), b"half").unwrap();
    let reg = JobRegistry::open(dir.path(), options()).await.unwrap();
    assert!(reg.list(None).is_empty());
    assert!(dir.path().join("garbage.json.corrupt").exists());
    assert!(!dir.path().join(".x.json.1.tmp").exists());
}

#[test]
fn states_parse_and_print() {
    for state in JobState::ALL {
        assert_eq!(state.as_str().parse::<JobState>().unwrap(), state);
        assert_eq!(
            serde_json::to_string(&state).unwrap(),
            format!("\"{state}\"")
        );
    }
    assert!("running".parse::<JobState>().is_ok());
    assert!("DONE".parse::<JobState>().is_err());
}

#[test]
fn retention_keeps_the_most_recently_ended_and_the_young() {
    let now = Utc::now();
    let ago = |s: i64| now - chrono::Duration::seconds(s);
    let finished = vec![
        ("a".to_string(), ago(50)),
        ("b".to_string(), ago(10)),
        ("c".to_string(), ago(30)),
        ("d".to_string(), ago(5)),
    ];
    let by_count = Retention {
        count: Some(2),
        age: None,
    };
    let mut dropped = by_count.expired(finished.clone(), now);
    dropped.sort();
    assert_eq!(dropped, ["a", "c"]);
    let by_age = Retention {
        count: None,
        age: Some(Duration::from_secs(20)),
    };
    let mut dropped = by_age.expired(finished.clone(), now);
    dropped.sort();
    assert_eq!(dropped, ["a", "c"]);
    let both = Retention {
        count: Some(3),
        age: Some(Duration::from_secs(40)),
    };
    assert_eq!(both.expired(finished.clone(), now), ["a"]);
    assert!(Retention::default().expired(finished, now).is_empty());
}

#[tokio::test]
async fn finished_jobs_beyond_the_retention_are_dropped_with_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let reg = JobRegistry::open(
        dir.path(),
        RegistryOptions {
            keep_finished: Retention {
                count: Some(1),
                age: None,
            },
            ..options()
        },
    )
    .await
    .unwrap();
    let running = reg
        .submit("test", serde_json::Value::Null, until_cancelled)
        .await
        .unwrap();
    let first = reg
        .submit("test", serde_json::Value::Null, |_| async { Ok(()) })
        .await
        .unwrap();
    reg.wait_finished(&first.id, WAIT).await.unwrap();
    let kept = dir.path().join(super::kept::file_name(&first.id));
    std::fs::write(&kept, "kept").unwrap();
    let second = reg
        .submit("test", serde_json::Value::Null, |_| async { Ok(()) })
        .await
        .unwrap();
    reg.wait_finished(&second.id, WAIT).await.unwrap();
    // The end of the second job dropped the first; the running one is never dropped.
    let deadline = tokio::time::Instant::now() + WAIT;
    while reg.get(&first.id).is_ok() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(matches!(reg.get(&first.id), Err(JobError::NotFound { .. })));
    assert!(!dir.path().join(format!("{}.json", first.id)).exists());
    assert!(!kept.exists());
    assert_eq!(reg.get(&second.id).unwrap().state, JobState::Succeeded);
    assert_eq!(reg.get(&running.id).unwrap().state, JobState::Running);
}

#[tokio::test]
async fn delete_forgets_ended_jobs_only() {
    let dir = tempfile::tempdir().unwrap();
    let reg = JobRegistry::open(dir.path(), options()).await.unwrap();
    let running = reg
        .submit("test", serde_json::Value::Null, until_cancelled)
        .await
        .unwrap();
    reg.wait_finished(&running.id, Duration::from_millis(100))
        .await
        .unwrap();
    assert!(matches!(
        reg.delete(&running.id).await,
        Err(JobError::WrongState { .. })
    ));
    reg.cancel(&running.id).unwrap();
    reg.wait_finished(&running.id, WAIT).await.unwrap();
    let kept = dir.path().join(super::kept::file_name(&running.id));
    std::fs::write(&kept, "kept").unwrap();
    assert_eq!(
        reg.delete(&running.id).await.unwrap().state,
        JobState::Cancelled
    );
    assert!(!dir.path().join(format!("{}.json", running.id)).exists());
    assert!(!kept.exists());
    assert!(matches!(
        reg.delete(&running.id).await,
        Err(JobError::NotFound { .. })
    ));
    // Gone for good: a registry opened again does not know it.
    drop(reg);
    let reg = JobRegistry::open(dir.path(), options()).await.unwrap();
    assert!(reg.list(None).is_empty());
}

/// Waits until job `id` runs (however loaded the machine is).
async fn until_running(reg: &JobRegistry, id: &str) {
    while reg.get(id).unwrap().state != JobState::Running {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A job that does not stop when asked (a call stuck on a silent peer).
async fn stubborn(_: JobHandle) -> JobResult {
    tokio::time::sleep(Duration::from_secs(3600)).await;
    Ok(())
}

#[tokio::test]
async fn a_cancel_answered_is_not_lost_when_the_process_ends_first() {
    let dir = tempfile::tempdir().unwrap();
    // Killed (no shutdown) while a cancelled job has not stopped yet.
    let killed = {
        let reg = JobRegistry::open(dir.path(), options()).await.unwrap();
        let job = reg
            .submit("test", serde_json::Value::Null, stubborn)
            .await
            .unwrap();
        until_running(&reg, &job.id).await;
        let cancelled = reg.cancel_recorded(&job.id).await.unwrap();
        assert_eq!(cancelled.state, JobState::Running);
        assert!(read_record(dir.path(), &job.id).cancel_requested);
        std::mem::forget(reg);
        job.id
    };
    // Shut down while a cancelled job has not stopped within the timeout.
    let timed_out = {
        let reg = JobRegistry::open(dir.path(), options()).await.unwrap();
        let job = reg
            .submit("test", serde_json::Value::Null, stubborn)
            .await
            .unwrap();
        until_running(&reg, &job.id).await;
        reg.cancel(&job.id).unwrap();
        assert_eq!(reg.shutdown(Duration::from_millis(200)).await, 1);
        assert_eq!(reg.get(&job.id).unwrap().state, JobState::Cancelled);
        job.id
    };
    let reg = JobRegistry::open(dir.path(), options()).await.unwrap();
    for id in [&killed, &timed_out] {
        assert_eq!(reg.get(id).unwrap().state, JobState::Cancelled, "{id}");
        assert_eq!(read_record(dir.path(), id).state, JobState::Cancelled);
        // Not resumed at start; an operator may resume it, and the resumed job is no longer
        // taken for a cancelled one by the next start.
        let again = reg.resume(id, |_| async { Ok(()) }).await.unwrap();
        assert_eq!(again.state, JobState::Queued);
        assert!(!again.cancel_requested, "{id}");
    }
}

#[tokio::test]
async fn a_job_that_finds_differences_ends_in_its_own_finished_state() {
    let dir = tempfile::tempdir().unwrap();
    let reg = JobRegistry::open(
        dir.path(),
        RegistryOptions {
            keep_finished: Retention {
                count: Some(1),
                age: None,
            },
            ..options()
        },
    )
    .await
    .unwrap();
    let found = reg
        .submit("test", serde_json::Value::Null, |h| async move {
            h.set_result(serde_json::json!({"rowsWithDifferences": 3}));
            Err(JobFailure::Differences)
        })
        .await
        .unwrap();
    let done = reg.wait_finished(&found.id, WAIT).await.unwrap();
    assert_eq!(done.state, JobState::DifferencesFound);
    assert!(!done.state.is_active());
    assert_eq!(done.error, None, "differences are not an error");
    assert!(done.ended_at.is_some());
    assert_eq!(
        done.result,
        Some(serde_json::json!({"rowsWithDifferences": 3}))
    );
    let on_disk = record_on_disk(dir.path(), &found.id, |r| r.state == done.state).await;
    assert_eq!(on_disk.state, JobState::DifferencesFound);
    // Written by its name, read back by a restarted registry.
    let text = std::fs::read_to_string(dir.path().join(format!("{}.json", found.id))).unwrap();
    assert!(text.contains(r#""state": "DIFFERENCES_FOUND""#), "{text}");
    drop(reg);
    let reg = JobRegistry::open(
        dir.path(),
        RegistryOptions {
            keep_finished: Retention {
                count: Some(1),
                age: None,
            },
            ..options()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        reg.get(&found.id).unwrap().state,
        JobState::DifferencesFound
    );
    // It counts as finished for retention: the next job to end drops it (count 1).
    let next = reg
        .submit("test", serde_json::Value::Null, |_| async { Ok(()) })
        .await
        .unwrap();
    reg.wait_finished(&next.id, WAIT).await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while reg.get(&found.id).is_ok() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(matches!(reg.get(&found.id), Err(JobError::NotFound { .. })));
}

#[test]
fn records_of_versions_before_differences_found_still_read() {
    // A validation record as a daemon without DIFFERENCES_FOUND wrote it.
    let old = r#"{"id":"01900000-0000-7000-8000-000000000000","kind":"validation","state":"SUCCEEDED",
        "phase":"done: 2 of 9 rows differ","createdAt":"2026-01-01T00:00:00Z","startedAt":null,
        "endedAt":"2026-01-01T00:01:00Z","updatedAt":"2026-01-01T00:01:00Z","attempts":1,
        "progress":{},"error":null,"spec":{},"result":{"rowsWithDifferences":2}}"#;
    let record: JobRecord = serde_json::from_str(old).unwrap();
    assert_eq!(record.state, JobState::Succeeded);
}
