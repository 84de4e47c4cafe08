//! Running a validation, in the foreground or as a job of the registry, with savepoints: the
//! ranges compared and their findings are saved together, so an interrupted validation
//! continues where it stopped and still reports everything it found before.
//!
//! Validation savepoints live in `<savepoints.path>/validation/`, apart from the migration's:
//! a migration must never resume from a validation's progress, nor the other way round.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::report::Report;
use super::{Progress, State, Validation};
use crate::engine::EngineError;
use crate::engine::place::Place;
use crate::jobs::kept::forget_job_file;
use crate::jobs::running::{Ending, Periodic, Window, end, publish, publish_end};
use crate::jobs::{JobHandle, JobResult};
use crate::savepoints::{self, Writer};

/// Key of a validation savepoint holding the findings of the ranges it records.
const REPORT_KEY: &str = "validationReport";
/// Key marking the savepoint written when a validation ended: it is not resumed (a new run
/// compares again from the start).
const COMPLETE_KEY: &str = "validationComplete";
/// Key of the target's units looked up in the source so far (validations that look rows up by
/// key, `lookup.rs`), in the progress keys' own terms (`skipSegments`, ...). The source's
/// units are the savepoint's own progress keys.
const REVERSE_KEY: &str = "validationTargetUnits";

/// A checked validation, with its savepoints and what it resumes from.
pub struct Launch {
    /// The planned comparison.
    pub validation: Validation,
    /// Where progress is saved, when the job has `savepoints`.
    pub savepoints: Option<Savepoints>,
    /// The savepoint this run continues from.
    pub resumed_from: Option<String>,
    /// Ranges already compared and their findings (from the savepoint).
    pub initial: State,
    /// Examples kept in the report.
    pub max_examples: usize,
    /// The daemon's state directory, where a job's config is kept for resumes.
    pub state_dir: Option<std::path::PathBuf>,
}

/// The savepoints of one validation run.
pub struct Savepoints {
    /// The store, with this run's lease on it: one writer at a time.
    writer: Writer,
    base: serde_json::Value,
    interval: Duration,
}

impl Savepoints {
    async fn write(&self, state: &State, complete: bool, why: &str) -> Result<(), EngineError> {
        let mut doc = self.base.clone();
        state
            .done
            .into_document(&mut doc, crate::connectors::progress_keys());
        if let Some(map) = doc.as_object_mut() {
            map.insert(
                REPORT_KEY.into(),
                serde_json::to_value(&state.report).expect("a report serializes"),
            );
            map.insert(COMPLETE_KEY.into(), complete.into());
            if !state.reverse.is_empty() {
                let mut reverse = serde_json::json!({});
                state
                    .reverse
                    .into_document(&mut reverse, crate::connectors::progress_keys());
                map.insert(REVERSE_KEY.into(), reverse);
            }
        }
        let store = self.writer.store.clone();
        let info = tokio::task::spawn_blocking(move || store.write(&doc))
            .await
            .expect("writing a savepoint does not panic")?;
        tracing::info!(
            savepoint = %info.name,
            place = %self.writer.store.describe(),
            "created a validation savepoint due to {why}; compared: {}{}",
            state.done,
            if state.reverse.is_empty() {
                String::new()
            } else {
                format!("; target looked up in the source: {}", state.reverse)
            }
        );
        Ok(())
    }
}

/// Whether a savepoint document is a validation of the same migration with the same
/// `validation` settings.
fn same_validation(base: &serde_json::Value, doc: &serde_json::Value) -> Result<(), String> {
    if savepoints::identity(doc) != savepoints::identity(base) {
        return Err("belongs to another migration (source, target or renames differ)".into());
    }
    if doc.get("validation") != base.get("validation") {
        return Err("made with other validation settings".into());
    }
    if doc.get(COMPLETE_KEY).and_then(|v| v.as_bool()).is_none() {
        return Err(format!(
            "has no {COMPLETE_KEY} (not a validation savepoint)"
        ));
    }
    Ok(())
}

/// Parses, checks and plans a validation; with `savepoints` and `autoResume` (the default),
/// continues an unfinished validation of the same job. Nothing is written, and nothing created
/// under `savepoints.path` until the validation is accepted.
pub async fn launch(text: &str) -> Result<Launch, EngineError> {
    let (config, mut base) = crate::engine::config::parsed(text).await?;
    // The job file's skipTokenRanges say what a migration copied, not what was validated.
    if let Some(map) = base.as_object_mut() {
        map.remove("skipTokenRanges");
    }
    let mut initial = State::default();
    let mut pending = None;
    let mut resumed_from = None;
    if let Some(sp) = &config.savepoints {
        let place = Place::new(sp, &config.target, &mut base, Some("validation"))?;
        if sp.auto_resume {
            let wanted = base.clone();
            let savepoints::Lookup { found, warnings } = place
                .lookup(move |doc| same_validation(&wanted, doc))
                .await?;
            for w in warnings {
                tracing::warn!("{w}");
            }
            let found = found.filter(|(savepoint, _)| {
                // The newest savepoint of this validation is the one that counts: when it
                // marks the end of a run, the next run compares everything again.
                let ended = savepoint.document.get(COMPLETE_KEY) == Some(&true.into());
                if ended {
                    tracing::info!(
                        savepoint = %savepoint.info.name,
                        "the last validation of this job ran to the end; validating from the start"
                    );
                }
                !ended
            });
            if let Some((savepoint, progress)) = found {
                let report = savepoint
                    .document
                    .get(REPORT_KEY)
                    .cloned()
                    .map(serde_json::from_value::<Report>)
                    .transpose()
                    .map_err(|e| format!("unreadable validation report ({e})"));
                let reverse = match savepoint.document.get(REVERSE_KEY) {
                    None => Ok(savepoints::Progress::default()),
                    Some(doc) => {
                        savepoints::Progress::from_document(doc, crate::connectors::progress_keys())
                            .map_err(|e| format!("unreadable {REVERSE_KEY} ({e})"))
                    }
                };
                match report.and_then(|r| reverse.map(|rev| (r, rev))) {
                    Ok((report, reverse)) => {
                        tracing::info!(
                            savepoint = %savepoint.info.name,
                            "resuming the validation from its newest savepoint; compared: {progress}{}",
                            if reverse.is_empty() {
                                String::new()
                            } else {
                                format!("; target looked up in the source: {reverse}")
                            }
                        );
                        initial = State {
                            done: progress,
                            reverse,
                            report: report.unwrap_or_default(),
                        };
                        resumed_from = Some(savepoint.info.name);
                    }
                    Err(e) => tracing::warn!(
                        savepoint = %savepoint.info.name,
                        "{e}; validating from the start"
                    ),
                }
            }
        }
        pending = Some((
            place,
            sp.keep,
            Duration::from_secs(sp.interval_seconds.expect("validated")),
        ));
    }
    if config.validation.hash_columns.is_some() {
        tracing::warn!(
            "validation.hashColumns applies to ScyllaDB Migrator's MySQL validation only; ignored (every column is compared by value)"
        );
    }
    let validation = Validation::prepare(&config).await?;
    // Created (and swept of stale temporary files) only now that the job is accepted.
    let savepoints = match pending {
        None => None,
        Some((place, keep, interval)) => Some(Savepoints {
            writer: place.writer(keep).await?,
            base,
            interval,
        }),
    };
    Ok(Launch {
        validation,
        savepoints,
        resumed_from,
        initial,
        max_examples: config.validation.failures_to_fetch,
        state_dir: None,
    })
}

/// Runs a launched validation: savepoints every interval and a final one however it ends.
/// Returns the report (of the whole table, or of what was compared before a failure or stop)
/// and how the run ended.
pub async fn execute(
    launch: Launch,
    progress: Arc<Progress>,
    cancel: CancellationToken,
    state: Arc<Mutex<State>>,
) -> (Report, Result<(), EngineError>) {
    *state.lock().unwrap_or_else(|p| p.into_inner()) = launch.initial.clone();
    let savepoints = launch.savepoints.map(Arc::new);
    let periodic = savepoints.clone().map(|sp| {
        let state = state.clone();
        Periodic::start(sp.interval, move || {
            let sp = sp.clone();
            let snapshot = state.lock().unwrap_or_else(|p| p.into_inner()).clone();
            async move {
                if let Err(e) = sp.write(&snapshot, false, "schedule").await {
                    tracing::error!(error = %e, "cannot write a validation savepoint");
                }
            }
        })
    });
    let mut result = launch
        .validation
        .run(progress.clone(), state.clone(), cancel)
        .await;
    if let Some(periodic) = periodic {
        periodic.stop().await;
    }
    let snapshot = state.lock().unwrap_or_else(|p| p.into_inner()).clone();
    progress.count_from(&snapshot.report);
    if let Some(sp) = savepoints {
        let (complete, why) = match &result {
            Ok(()) => (true, "the end of the validation"),
            Err(EngineError::Stopped) => (false, "the validation being stopped"),
            Err(_) => (false, "the validation failing"),
        };
        let written = sp.write(&snapshot, complete, why).await;
        let place = sp.writer.store.describe();
        if let Ok(sp) = Arc::try_unwrap(sp) {
            sp.writer.release().await;
        }
        if let Err(e) = written {
            tracing::error!(error = %e, "cannot write the final validation savepoint");
            if complete {
                // Without the mark of its end, the next run would resume from an older
                // savepoint of this one instead of comparing everything again.
                result = Err(EngineError::Failed(format!(
                    "the validation ran to the end but its final savepoint could not be written ({e}); delete the unfinished ones in {place} before the next run"
                )));
            }
        }
    }
    let mut report = snapshot.report;
    report.examples.truncate(launch.max_examples);
    (report, result)
}

/// What a finished validation says in its phase.
pub fn verdict(report: &Report) -> String {
    if report.is_clean() {
        format!("done: no differences in {} rows", report.rows_compared)
    } else {
        format!(
            "done: {} of {} rows differ",
            report.rows_with_differences, report.rows_compared
        )
    }
}

/// Runs a launched validation as the job behind `handle`. A validation that ran to the end
/// SUCCEEDS when the target matches and ends DIFFERENCES_FOUND when any row is missing, extra
/// or different; either way its report is the record's `result`.
pub async fn run(handle: JobHandle, launch: Launch) -> JobResult {
    let state_dir = launch.state_dir.clone();
    if let Some(name) = &launch.resumed_from {
        tracing::info!(job = handle.id(), savepoint = %name, "validation resumes from a savepoint");
    }
    handle.set_phase("comparing");
    let progress = Arc::new(Progress::default());
    let state = Arc::new(Mutex::new(State::default()));
    // Shared with the final report, whose rates are the run's averages.
    let window = Arc::new(std::sync::Mutex::new(Window::default()));
    let reporter = {
        let handle = handle.clone();
        let progress = progress.clone();
        let window = window.clone();
        let state = state.clone();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(Duration::from_secs(1));
            loop {
                ticker.tick().await;
                report(
                    &handle,
                    &progress,
                    &mut window.lock().unwrap_or_else(|p| p.into_inner()),
                );
                let so_far = state
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .report
                    .clone();
                handle.set_result(serde_json::to_value(so_far).expect("a report serializes"));
            }
        })
    };
    let (findings, result) =
        execute(launch, progress.clone(), handle.cancelled().clone(), state).await;
    reporter.abort();
    publish_end(
        &handle,
        progress.sample(),
        &window.lock().unwrap_or_else(|p| p.into_inner()),
    );
    handle.set_result(serde_json::to_value(&findings).expect("a report serializes"));
    if !matches!(result, Err(EngineError::Stopped))
        && let Some(dir) = &state_dir
    {
        forget_job_file(dir, handle.id());
    }
    end(
        &handle,
        match result {
            Ok(()) if findings.is_clean() => Ending::Done(verdict(&findings)),
            Ok(()) => Ending::Differences(verdict(&findings)),
            Err(EngineError::Stopped) => Ending::Stopped,
            Err(e) => Ending::Failed(e.to_string()),
        },
    )
}

fn report(handle: &JobHandle, progress: &Progress, window: &mut Window) {
    publish(handle, progress.sample(), window, "comparing");
}
