//! `/ui/live-migration`: what an operator of a live instance migration needs on one page —
//! this node's role and peer (from `live_migration.migration_map`), the Sidecar-compatible
//! `/status` of the node, the runtime switch of the routes with its expiry, and each data-copy
//! task with its iterations (bytes, files, rate and ETA while it downloads), then the
//! verification tasks.
//!
//! Everything is read from the daemon's own state, as the API would answer it; nothing here
//! asks the peer, so the page opens as fast on a node whose peer is down.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{Markup, html};

use super::pages::{
    clip, dl_time, encode_path, eta, layout, progress_bar, rate, short_id, state_badge, thousands,
};
use super::{Viewer, html as page, viewer};
use crate::api::AppState;
use crate::auth::Identity;
use crate::jobs::JobRecord;
use crate::jobs::kind::JobKind;
use crate::livemigration::copy::IterationStatus;
use crate::livemigration::kinds::{DataCopyKind, VerificationKind};
use crate::livemigration::tasks::shown::copy_fraction;
use crate::livemigration::tasks::{DataCopyTask, VerificationTask};
use crate::livemigration::{LiveMigration, MigrationState};

/// Tasks of each kind shown, newest first: older ones are in the jobs list.
const SHOWN_TASKS: usize = 20;

/// The node as the page shows it.
struct Node {
    role: &'static str,
    peer: Option<String>,
    name: String,
    enabled: bool,
    set_by: &'static str,
    until: Option<chrono::DateTime<chrono::Utc>>,
    status: crate::livemigration::Status,
}

fn node_of(live: &LiveMigration) -> Node {
    let (role, peer) = live.role_and_peer();
    Node {
        role,
        peer: peer.map(str::to_string),
        name: live.name().to_string(),
        enabled: live.enabled(),
        set_by: live.switch_origin(),
        until: live.enabled_until(),
        status: live.status(),
    }
}

/// Tasks of `kind`, newest first, at most [`SHOWN_TASKS`].
fn newest(state: &AppState, kind: &str) -> Vec<JobRecord> {
    let mut records = state.jobs.list(Some(kind));
    records.reverse();
    records.truncate(SHOWN_TASKS);
    records
}

pub(super) async fn live_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    identity: Option<axum::Extension<Identity>>,
) -> Response {
    let node = node_of(&state.live);
    let copies = newest(&state, DataCopyKind::NAME);
    let verifications = newest(&state, VerificationKind::NAME);
    let viewer = viewer(&state, &headers, identity.as_deref());
    page(
        StatusCode::OK,
        live_migration_page(&viewer, &node, &copies, &verifications),
    )
}

fn role_text(role: &str) -> &'static str {
    match role {
        "source" => "source: serves this node's files to its destination",
        "destination" => "destination: copies the files of its source here",
        _ => "none: this node is not in live_migration.migration_map",
    }
}

fn millis_time(ms: i64) -> Markup {
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(t) => {
            html! { time datetime=(t.to_rfc3339()) { (t.format("%Y-%m-%d %H:%M:%S UTC")) } }
        }
        None => html! { (ms) },
    }
}

fn node_section(node: &Node) -> Markup {
    let has_role = node.role != "none";
    html! {
        section aria-labelledby="h-node" id="node" {
            h2 id="h-node" { "This node" }
            dl class="facts" {
                dt { "Role" } dd data-field="role" { strong { (node.role) } " — " (role_text(node.role)) }
                dt { "Name in the map" } dd { code { (node.name) } }
                dt { @if node.role == "destination" { "Source (peer)" } @else { "Destination (peer)" } }
                dd data-field="peer" {
                    @match &node.peer { Some(p) => code { (p) }, None => "—" }
                }
                dt { "Status" }
                dd data-field="status" {
                    @if has_role {
                        strong { (status_name(node.status.state)) }
                        @if let Some(end) = node.status.end_time { " since " (millis_time(end)) }
                        " (" code { "GET /api/v1/live-migration/status" } ")"
                    } @else {
                        "— (the live-migration routes answer 404 on a node with no role)"
                    }
                }
                dt { "Routes" }
                dd data-field="switch" {
                    strong { @if node.enabled { "on" } @else { "off" } }
                    " (set by " (node.set_by) ")"
                    @match node.until {
                        Some(until) if until > chrono::Utc::now() => {
                            "; they close by themselves at "
                            time datetime=(until.to_rfc3339()) { (until.format("%Y-%m-%d %H:%M:%S UTC")) }
                        }
                        Some(until) => {
                            "; they closed by themselves at "
                            time datetime=(until.to_rfc3339()) { (until.format("%Y-%m-%d %H:%M:%S UTC")) }
                        }
                        None => "; no expiry",
                    }
                }
            }
            p class="hint" {
                "Switch the routes with " code { "PUT /api/v1/admin/live-migration" } " "
                code { r#"{"enabled": true, "for": "30m"}"# } " (an admin call); "
                code { "POST /api/v1/live-migration/status" } " on the source ends the migration there."
            }
        }
    }
}

fn status_name(state: MigrationState) -> &'static str {
    match state {
        MigrationState::NotCompleted => "NOT_COMPLETED",
        MigrationState::Completed => "COMPLETED",
    }
}

fn bytes(v: i64) -> String {
    u64::try_from(v).map_or_else(|_| "—".into(), |n| bytesize::ByteSize(n).to_string())
}

fn count(v: i64) -> String {
    u64::try_from(v).map_or_else(|_| "—".into(), thousands)
}

/// The share of iteration `i` of `iterations` in place, as the task's bar counts it.
fn iteration_share(iterations: &[IterationStatus], i: usize) -> String {
    match copy_fraction(false, &iterations[..=i]) {
        Some((done, total)) if total > 0 => {
            format!("{:.1} %", (done as f64 * 100.0 / total as f64).min(100.0))
        }
        Some(_) => "100.0 %".into(),
        None => "—".into(),
    }
}

fn iterations_table(task: &DataCopyTask) -> Markup {
    let iterations = &task.iterations;
    html! {
        @if iterations.is_empty() {
            p { "No iteration yet." }
        } @else {
            table class="iterations" {
                caption { "Iterations of task " code { (short_id(&task.id)) } }
                thead { tr {
                    th scope="col" { "Iteration" } th scope="col" { "State" }
                    th scope="col" { "Source size" } th scope="col" { "Source entries" }
                    th scope="col" { "To download" } th scope="col" { "Downloaded" } th scope="col" { "Kept" }
                    th scope="col" { "Done" }
                    th scope="col" { "Files" } th scope="col" { "Failures" }
                } }
                tbody {
                    @for (i, it) in iterations.iter().enumerate() {
                        tr data-iteration=(it.iteration) {
                            th scope="row" { (it.iteration) }
                            td { (serde_json::to_value(it.state).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()) }
                            td class="num" { (bytes(it.total_size)) }
                            td class="num" { (count(it.total_files)) }
                            td class="num" { (bytes(it.bytes_to_download)) }
                            td class="num" { (bytes(it.bytes_downloaded)) }
                            td class="num" { (bytes(it.bytes_kept)) }
                            td class="num" data-field="iteration-done" { (iteration_share(iterations, i)) }
                            td class="num" { (count(it.files_downloaded)) " / " (count(it.files_to_download)) }
                            td class="num" { (count(it.download_failures)) }
                        }
                    }
                }
            }
        }
    }
}

fn copy_task(record: &JobRecord) -> Markup {
    let task = DataCopyTask::from_record(record.clone());
    let request = task.request.as_ref();
    html! {
        article class="task" data-task=(record.id) data-state=(record.state.as_str()) aria-labelledby={ "t-" (record.id) } {
            h3 id={ "t-" (record.id) } {
                "Task " a href={ "/ui/jobs/" (encode_path(&record.id)) } title=(record.id) { code { (short_id(&record.id)) "…" } }
                " " (state_badge(record.state))
            }
            dl class="facts" {
                dt { "Progress" } dd { (progress_bar(record)) }
                dt { "Rate" } dd data-field="rate" { (rate(record)) }
                dt { "ETA" } dd data-field="eta" { (eta(record)) }
                dt { "Iterations" }
                dd { (task.iterations.len()) @if let Some(q) = request { " of at most " (q.max_iterations + 1) " passes" } }
                @if let Some(q) = request {
                    dt { "Success threshold" }
                    dd { (format!("{:.1} %", q.success_threshold * 100.0)) " of the source's " (q.threshold_basis.name()) }
                    dt { "Files at once" } dd { (q.max_concurrency) }
                    dt { "Digest checked" } dd { (q.verify_digest.as_deref().unwrap_or("none")) }
                    dt { "Bandwidth limit" }
                    dd { @match q.max_bytes_per_second { Some(b) => { (bytesize::ByteSize(b)) "/s" }, None => "none" } }
                }
                (dl_time("Started", record.started_at))
                (dl_time("Ended", record.ended_at))
            }
            @if let Some(e) = &task.error {
                p role="alert" class="error" { strong { "Error: " } (clip(e, 600)) }
            }
            (iterations_table(&task))
        }
    }
}

fn copies_section(node: &Node, copies: &[JobRecord]) -> Markup {
    html! {
        section aria-labelledby="h-copies" id="copies" {
            h2 id="h-copies" { "Data-copy tasks" }
            @if node.role == "source" {
                p { "Tasks run on the destination"
                    @if let Some(p) = &node.peer { ", " code { (p) } }
                    "; this node serves its files." }
            } @else if copies.is_empty() {
                p { "No data-copy task. Start one with " code { "drover live-migration copy" } " on the destination." }
            } @else {
                p class="muted" { "Newest first; older tasks are in the " a href="/ui/jobs?kind=data-copy-task" { "jobs list" } "." }
                @for record in copies { (copy_task(record)) }
            }
        }
    }
}

fn verifications_section(verifications: &[JobRecord]) -> Markup {
    html! {
        @if !verifications.is_empty() {
            section aria-labelledby="h-verifications" id="verifications" {
                h2 id="h-verifications" { "Verification tasks" }
                table {
                    caption class="sr-only" { "Verification tasks, newest first" }
                    thead { tr {
                        th scope="col" { "Task" } th scope="col" { "State" } th scope="col" { "Digest" }
                        th scope="col" { "Files matched" } th scope="col" { "Differences" } th scope="col" { "Error" }
                    } }
                    tbody {
                        @for record in verifications {
                            @let task = VerificationTask::from_record(record.clone());
                            @let report = task.report.as_ref();
                            tr {
                                th scope="row" { a href={ "/ui/jobs/" (encode_path(&record.id)) } title=(record.id) { code { (short_id(&record.id)) "…" } } }
                                td { (state_badge(record.state)) }
                                td { (task.request.as_ref().and_then(|q| q.digest_algorithm.clone()).unwrap_or_default()) }
                                td class="num" { (report.map_or("—".into(), |r| thousands(r.files_matched))) }
                                td class="num" {
                                    (report.map_or("—".into(), |r| thousands(
                                        r.files_not_found_at_source + r.files_not_found_at_destination
                                            + r.metadata_mismatches + r.digest_mismatches + r.digest_verification_failures)))
                                }
                                td class="err" { @if let Some(e) = &task.error { (clip(e, 200)) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The page.
fn live_migration_page(
    viewer: &Viewer,
    node: &Node,
    copies: &[JobRecord],
    verifications: &[JobRecord],
) -> Markup {
    let active = copies
        .iter()
        .chain(verifications)
        .any(|r| r.state.is_active());
    layout(
        "Live migration",
        Some(viewer),
        html! {
            h1 { "Live migration" }
            // Refreshed every 2 s by the console's script while a task runs.
            div id="live" data-active=(active) aria-live="polite" {
                (node_section(node))
                (copies_section(node, copies))
                (verifications_section(verifications))
            }
        },
    )
}
