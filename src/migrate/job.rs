//! Running a migration as a job of the registry: progress counters, rate, ETA and phase are
//! copied into the job record while the engine runs.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::engine::EngineError;
use crate::engine::Start;
use crate::engine::config::parsed;
use crate::engine::driver::{Counters, Migration};
use crate::engine::place::Place;
use crate::jobs::kept::forget_job_file;
use crate::jobs::running::{Ending, Periodic, Window, end, publish, publish_end};
use crate::jobs::{JobHandle, JobResult};
use crate::savepoints::{self, SavepointInfo, Writer};

/// A checked migration, with its savepoints and what it resumes from.
pub struct Launch {
    /// The planned copy.
    pub migration: Migration,
    /// How long one request is retried (`retryForSeconds`).
    pub retry_for: Duration,
    /// Where progress is saved, when the job has `savepoints`.
    pub savepoints: Option<Savepoints>,
    /// The savepoint this run continues from.
    pub resumed_from: Option<String>,
    /// The daemon's state directory, where a job's config is kept for resumes (not set when
    /// the migration runs in the foreground).
    pub state_dir: Option<std::path::PathBuf>,
}

/// The savepoints of one run.
pub struct Savepoints {
    /// The store, with this run's lease on it: one writer at a time.
    writer: Writer,
    /// The redacted job document that every savepoint repeats.
    base: serde_json::Value,
    interval: Duration,
    initial: savepoints::Progress,
    /// What the previous savepoint of this run recorded (at first, what the run starts
    /// from), so each savepoint's log line says what it adds.
    previous: Mutex<savepoints::Progress>,
}

impl Savepoints {
    /// Writes a savepoint of `done` (which includes the work complete at start).
    pub async fn write(
        &self,
        done: &savepoints::Progress,
        why: &str,
    ) -> Result<SavepointInfo, EngineError> {
        let mut progress = self.initial.clone();
        progress.merge(done);
        let mut doc = self.base.clone();
        progress.into_document(&mut doc, crate::connectors::progress_keys());
        let store = self.writer.store.clone();
        let info = tokio::task::spawn_blocking(move || store.write(&doc))
            .await
            .expect("writing a savepoint does not panic")?;
        // The operator's view of a savepoint: which units finished since the previous one,
        // and everything a resume from this one will skip (ScyllaDB Migrator logs "Segments
        // to skip" the same way). Both are bounded in length, whatever the number of units.
        let added = {
            let mut previous = self.previous.lock().unwrap_or_else(|p| p.into_inner());
            let added = progress.added_since(&previous);
            *previous = progress.clone();
            added
        };
        tracing::info!(
            savepoint = %info.name,
            place = %self.writer.store.describe(),
            "created a savepoint due to {why}; newly done: {added}; done in all, skipped on resume: {progress}"
        );
        Ok(info)
    }

    /// Where the savepoints are.
    pub fn describe(&self) -> String {
        self.writer.store.describe()
    }
}

/// Parses, checks and plans a job; with `savepoints.autoResume` (the default), merges the
/// progress of the newest savepoint of the same migration. Nothing is written to the target,
/// and nothing to `savepoints.path` until the job is accepted: a job refused for its config or
/// for clusters it cannot reach creates no directory and leaves the files in it alone.
pub async fn launch(text: &str, start: Start) -> Result<Launch, EngineError> {
    let (config, mut base) = parsed(text).await?;
    let mut pending = None;
    let mut complete = config.skip.clone();
    let mut resumed_from = None;
    if let Some(sp) = &config.savepoints {
        let place = Place::new(sp, &config.target, &mut base, None)?;
        let mut initial = config.skip.clone();
        if sp.auto_resume {
            let identity = savepoints::identity(&base);
            let savepoints::Lookup { found, warnings } = place
                .lookup(move |document| {
                    if savepoints::identity(document) == identity {
                        Ok(())
                    } else {
                        Err(
                            "belongs to another migration (source, target or renames differ)"
                                .into(),
                        )
                    }
                })
                .await?;
            for w in warnings {
                tracing::warn!("{w}");
            }
            if let Some((savepoint, progress)) = found {
                tracing::info!(
                    savepoint = %savepoint.info.name,
                    place = %place.describe(),
                    "resuming from the newest savepoint of this migration; skipping what it records as done: {progress}"
                );
                initial.merge(&progress);
                resumed_from = Some(savepoint.info.name);
            }
        }
        complete = initial.clone();
        pending = Some((
            place,
            sp.keep,
            Duration::from_secs(sp.interval_seconds.expect("validated")),
            initial,
        ));
    }
    let mut migration = Migration::prepare(&config, complete).await?;
    if let Some(coordination) = &config.coordination {
        migration.coordinate(crate::engine::place::coordinator(&config, coordination, text).await?);
    }
    if start == Start::New
        && let (Some(savepoint), Some((place, ..))) = (&resumed_from, &pending)
        && migration.nothing_left()
    {
        return Err(EngineError::AlreadyDone {
            savepoint: savepoint.clone(),
            place: place.describe(),
        });
    }
    // Created (and swept, and leased) only now that the job is accepted.
    let savepoints = match pending {
        None => None,
        Some((place, keep, interval, initial)) => Some(Savepoints {
            writer: place.writer(keep).await?,
            base,
            interval,
            previous: Mutex::new(initial.clone()),
            initial,
        }),
    };
    Ok(Launch {
        state_dir: None,
        retry_for: config.retry_for,
        migration,
        savepoints,
        resumed_from,
    })
}

/// Runs a launched migration: savepoints every interval and a final one however the run ends
/// (success, failure, cancel, shutdown).
pub async fn execute(
    launch: Launch,
    progress: Arc<Counters>,
    cancel: CancellationToken,
) -> Result<(), EngineError> {
    progress.retries.limit(launch.retry_for);
    let done = Arc::new(Mutex::new(savepoints::Progress::default()));
    let savepoints = launch.savepoints.map(Arc::new);
    if let Some(sp) = &savepoints {
        let complete = launch.migration.complete();
        // A new bulk load is recorded before any of its units is imported: a run killed before
        // the first periodic savepoint is resumed under the same load, and finds its imports.
        if complete.has_new_id_since(&sp.initial)
            && let Err(e) = sp.write(complete, "the start of a bulk load").await
        {
            tracing::error!(error = %e, "cannot write a savepoint");
        }
    }
    let periodic = savepoints.clone().map(|sp| {
        let done = done.clone();
        Periodic::start(sp.interval, move || {
            let sp = sp.clone();
            let snapshot = done.lock().unwrap_or_else(|p| p.into_inner()).clone();
            async move {
                if let Err(e) = sp.write(&snapshot, "schedule").await {
                    tracing::error!(error = %e, "cannot write a savepoint");
                }
            }
        })
    });
    let result = launch.migration.run(progress, done.clone(), cancel).await;
    if let Some(periodic) = periodic {
        periodic.stop().await;
    }
    if let Some(sp) = savepoints {
        let snapshot = done.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let why = match &result {
            Ok(()) => "the end of the migration",
            Err(EngineError::Stopped) => "the migration being stopped",
            Err(_) => "the migration failing",
        };
        let written = sp.write(&snapshot, why).await;
        if let Ok(sp) = Arc::try_unwrap(sp) {
            sp.writer.release().await;
        }
        if let Err(e) = written {
            // The data written is not affected; the next run redoes what this one did.
            tracing::error!(error = %e, "cannot write the final savepoint");
            if result.is_ok() {
                return Err(e);
            }
        }
    }
    result
}

/// Runs a launched migration as the job behind `handle`.
pub async fn run(handle: JobHandle, launch: Launch) -> JobResult {
    let state_dir = launch.state_dir.clone();
    if let Some(name) = &launch.resumed_from {
        tracing::info!(job = handle.id(), savepoint = %name, "migration resumes from a savepoint");
    }
    handle.set_phase("copying");
    let progress = Arc::new(Counters::default());
    // Shared with the final report, whose rates are the run's averages.
    let window = Arc::new(std::sync::Mutex::new(Window::default()));
    let reporter = {
        let handle = handle.clone();
        let progress = progress.clone();
        let window = window.clone();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(Duration::from_secs(1));
            loop {
                ticker.tick().await;
                report(
                    &handle,
                    &progress,
                    &mut window.lock().unwrap_or_else(|p| p.into_inner()),
                );
            }
        })
    };
    let result = execute(launch, progress.clone(), handle.cancelled().clone()).await;
    reporter.abort();
    publish_end(
        &handle,
        progress.sample(),
        &window.lock().unwrap_or_else(|p| p.into_inner()),
    );
    if !matches!(result, Err(EngineError::Stopped))
        && let Some(dir) = &state_dir
    {
        // Succeeded or failed: no resume will need the credentials any more.
        forget_job_file(dir, handle.id());
    }
    end(
        &handle,
        match result {
            Ok(()) => Ending::Done("done".into()),
            Err(EngineError::Stopped) => Ending::Stopped,
            Err(e) => Ending::Failed(e.to_string()),
        },
    )
}

fn report(handle: &JobHandle, progress: &Counters, window: &mut Window) {
    publish(handle, progress.sample(), window, progress.phase());
}
