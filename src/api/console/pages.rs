//! The console's pages. Semantic HTML first (tables with headers, labelled controls, native
//! `progress` and `form` elements), so that the pages read with a screen reader and work with
//! the keyboard alone; the script only refreshes what is already there.

use std::fmt::Write as _;

use axum::http::StatusCode;
use maud::{DOCTYPE, Markup, html};
use serde_json::Value;

use super::{ListQuery, PAGE_SIZE, REPORT_PAGE_SIZE, Viewer};
use crate::jobs::shown::Shown;
use crate::jobs::{JobRecord, JobState};
use crate::migrate::saved::SavepointList;
use crate::validate::report::Report;

/// What stays as it is in a query value: unreserved characters, and `/` (paths in `next`).
const QUERY: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');
/// What stays as it is in a path segment.
const SEGMENT: &percent_encoding::AsciiSet = &QUERY.add(b'/');

/// `s` for a query string value.
pub fn encode_query(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, QUERY).to_string()
}

/// `s` for one path segment.
pub fn encode_path(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, SEGMENT).to_string()
}

pub(super) fn layout(title: &str, viewer: Option<&Viewer>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · drover" }
                link rel="stylesheet" href="/ui/assets/console.css";
                link rel="icon" href="/ui/assets/favicon.svg" type="image/svg+xml";
                script src="/ui/assets/console.js" defer {}
            }
            body {
                a class="skip" href="#main" { "Skip to content" }
                header class="top" {
                    nav aria-label="Console" {
                        a class="brand" href="/ui/jobs" { "drover" }
                        a href="/ui/jobs" { "Jobs" }
                        a href="/ui/jobs?kind=migration" { "Migrations" }
                        a href="/ui/jobs?kind=validation" { "Validations" }
                        a href="/ui/live-migration" { "Live migration" }
                    }
                    @if let Some(v) = viewer {
                        div class="who" {
                            @if let Some(name) = &v.name {
                                span { "Signed in as " strong { (name) } @if !v.operator { " (read only)" } }
                            }
                            @if v.auth {
                                form method="post" action="/ui/logout" {
                                    button type="submit" { "Sign out" }
                                }
                            }
                        }
                    }
                }
                main id="main" tabindex="-1" { (body) }
            }
        }
    }
}

/// A page that says what went wrong.
pub fn error_page(status: StatusCode, message: &str) -> Markup {
    let title = format!(
        "{} {}",
        status.as_u16(),
        status.canonical_reason().unwrap_or("Error")
    );
    layout(
        &title,
        None,
        html! {
            h1 { (title) }
            p role="alert" class="error" { (message) }
            p { a href="/ui/jobs" { "Back to the jobs" } }
        },
    )
}

/// The sign-in page.
pub fn login_page(next: &str, problem: Option<&str>) -> Markup {
    layout(
        "Sign in",
        None,
        html! {
            h1 { "Sign in" }
            @if let Some(problem) = problem {
                p role="alert" class="error" { (problem) }
            }
            form method="post" action="/ui/login" class="login" {
                input type="hidden" name="next" value=(next);
                label for="token" { "Bearer token" }
                input id="token" name="token" type="password" autocomplete="off" required autofocus;
                p class="hint" { "A token of " code { "auth.tokens" } " or a JWT. It stays in the daemon's memory for this session only." }
                button type="submit" { "Sign in" }
            }
        },
    )
}

fn counter(record: &JobRecord, name: &str) -> Option<u64> {
    record.progress.get(name).copied()
}

/// The job's share done and what it is of, as every screen shows it.
fn shown(record: &JobRecord) -> Option<Shown> {
    crate::kinds::shown(
        &record.kind,
        record.state,
        &record.progress,
        record.result.as_ref(),
    )
}

pub(super) fn rate(record: &JobRecord) -> String {
    let rows = counter(record, "rowsPerSecond");
    let bytes = counter(record, "bytesPerSecond");
    match (rows, bytes) {
        // An ended job's rates are its averages over the run.
        (Some(r), Some(b)) if !record.state.is_active() => {
            format!("avg {} rows/s · {}/s", thousands(r), bytesize::ByteSize(b))
        }
        (Some(r), Some(b)) => format!("{} rows/s · {}/s", thousands(r), bytesize::ByteSize(b)),
        (Some(r), None) => format!("{} rows/s", thousands(r)),
        (None, Some(b)) => format!("{}/s", bytesize::ByteSize(b)),
        (None, None) => "—".into(),
    }
}

pub(super) fn eta(record: &JobRecord) -> String {
    match (record.state, counter(record, "etaSeconds")) {
        (JobState::Running, Some(s)) => {
            humantime::format_duration(std::time::Duration::from_secs(s)).to_string()
        }
        _ => "—".into(),
    }
}

pub use crate::jobs::shown::thousands;

pub(super) fn state_badge(state: JobState) -> Markup {
    html! { span class={ "state state-" (state.as_str().to_ascii_lowercase()) } data-field="state" { (state.as_str()) } }
}

pub(super) fn progress_bar(record: &JobRecord) -> Markup {
    match shown(record) {
        Some(shown) => {
            html! {
                span class="bar" {
                    progress max="1000" value=(shown.permille) aria-label={ "Progress: " (shown.label) } data-field="progress" {}
                    span class="pct" data-field="percent" { (shown.percent()) }
                    span class="detail" data-field="progress-label" { (shown.label) }
                }
            }
        }
        None => html! { span class="muted" { "—" } },
    }
}

pub(super) fn short_id(id: &str) -> &str {
    crate::jobs::identity::short_id(id)
}

/// `source → target`, or a dash for jobs that name neither.
fn route(summary: &crate::jobs::Summary) -> String {
    match (&summary.source, &summary.target) {
        (None, None) => "—".into(),
        (s, t) => format!(
            "{} → {}",
            s.as_deref().unwrap_or("—"),
            t.as_deref().unwrap_or("—")
        ),
    }
}

/// How long the job's last run took, to the second (tenths under a minute).
fn duration(summary: &crate::jobs::Summary) -> String {
    match summary.duration {
        Some(d) if d.as_secs() < 60 => format!("{:.1} s", d.as_secs_f64()),
        Some(d) => {
            humantime::format_duration(std::time::Duration::from_secs(d.as_secs())).to_string()
        }
        None => "—".into(),
    }
}

/// The average rate over an ended job's run; `None` while it runs (the recent rate is shown).
fn average_rate(summary: &crate::jobs::Summary) -> Option<String> {
    let rows = summary.average_rows_per_second;
    let bytes = summary
        .average_bytes_per_second
        .map(|b| bytesize::ByteSize(b.round() as u64));
    match (rows, bytes) {
        (Some(r), Some(b)) => Some(format!(
            "{} rows/s · {b}/s average",
            thousands(r.round() as u64)
        )),
        (Some(r), None) => Some(format!("{} rows/s average", thousands(r.round() as u64))),
        (None, Some(b)) => Some(format!("{b}/s average")),
        (None, None) => None,
    }
}

fn job_row(record: &JobRecord) -> Markup {
    let active = record.state.is_active();
    let summary = crate::kinds::summary(record);
    html! {
        tr data-job=(record.id) data-active=(active) {
            th scope="row" {
                a href={ "/ui/jobs/" (encode_path(&record.id)) } title=(summary.name) data-field="name" { (clip(&summary.name, 80)) }
                // What it moves, unless the name already says it (a derived name is just that).
                @let moves = route(&summary);
                @if moves != summary.name && summary.source.is_some() {
                    br;
                    span class="route" data-field="route" { (clip(&moves, 120)) }
                }
                br;
                small class="muted" { (record.kind) " · " code title=(record.id) { (short_id(&record.id)) "…" } }
            }
            td { (state_badge(record.state)) }
            td { (progress_bar(record)) }
            td class="num" data-field="rows" { (summary.rows.map_or_else(|| "—".to_string(), thousands)) }
            td class="num" data-field="duration" { (duration(&summary)) }
            td class="num rate" { (average_rate(&summary).unwrap_or_else(|| rate(record))) }
            td class="num" { (eta(record)) }
            td class="num" { (record.attempts) }
            td class="num" { (counter(record, "retries").unwrap_or(0)) }
            td class="err" {
                @if let Some(e) = record.error.as_ref().or(record.last_error.as_ref()) {
                    span title=(e) { (clip(e, 120)) }
                }
            }
        }
    }
}

pub(super) fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(n).collect();
        out.push('…');
        out
    }
}

const KINDS: [&str; 5] = [
    "migration",
    "validation",
    "data-copy-task",
    "files-verification-task",
    "diagnostic",
];

fn list_link(query: &ListQuery, page: usize) -> String {
    let mut link = format!("/ui/jobs?page={page}");
    if let Some(s) = query.state.as_deref().filter(|s| !s.is_empty()) {
        let _ = write!(link, "&state={}", encode_query(s));
    }
    if let Some(k) = query.kind.as_deref().filter(|k| !k.is_empty()) {
        let _ = write!(link, "&kind={}", encode_query(k));
    }
    link
}

/// The list of jobs, newest first, one page.
pub fn jobs_page(
    viewer: &Viewer,
    query: &ListQuery,
    page: usize,
    total: usize,
    jobs: &[JobRecord],
) -> Markup {
    let pages = total.div_ceil(PAGE_SIZE).max(1);
    let first = (page - 1) * PAGE_SIZE + 1;
    let last = ((page - 1) * PAGE_SIZE + jobs.len()).max(first.saturating_sub(1));
    let state = query.state.as_deref().unwrap_or("");
    let kind = query.kind.as_deref().unwrap_or("");
    layout(
        "Jobs",
        Some(viewer),
        html! {
            h1 { "Jobs" }
            form method="get" action="/ui/jobs" class="filters" {
                label for="f-state" { "State" }
                select id="f-state" name="state" {
                    option value="" selected[state.is_empty()] { "any" }
                    @for s in JobState::ALL {
                        option value=(s.as_str()) selected[state.eq_ignore_ascii_case(s.as_str())] { (s.as_str()) }
                    }
                }
                label for="f-kind" { "Kind" }
                select id="f-kind" name="kind" {
                    option value="" selected[kind.is_empty()] { "any" }
                    @for k in KINDS {
                        option value=(k) selected[kind == k] { (k) }
                    }
                }
                button type="submit" { "Filter" }
            }
            p id="jobs-summary" aria-live="polite" {
                @if total == 0 { "No jobs." } @else { (format!("Jobs {first}–{last} of {total}, newest first.")) }
            }
            table class="jobs" {
                caption class="sr-only" { "Jobs, newest first" }
                thead {
                    tr {
                        th scope="col" { "Job" }
                        th scope="col" { "State" }
                        th scope="col" { "Progress" }
                        th scope="col" { "Rows" }
                        th scope="col" { "Duration" }
                        th scope="col" { "Rate" }
                        th scope="col" { "ETA" }
                        th scope="col" { "Attempts" }
                        th scope="col" { "Retries" }
                        th scope="col" { "Last error" }
                    }
                }
                tbody id="jobs-body" data-live=(jobs.iter().any(|j| j.state.is_active())) {
                    @for job in jobs { (job_row(job)) }
                }
            }
            @if pages > 1 {
                nav class="pager" aria-label="Pages" {
                    @if page > 1 { a href=(list_link(query, page - 1)) rel="prev" { "← Newer" } }
                    span { "Page " (page) " of " (pages) }
                    @if page < pages { a href=(list_link(query, page + 1)) rel="next" { "Older →" } }
                }
            }
        },
    )
}

/// The donut of a job's share done: a migration's rows of its estimated total, a validation's
/// units, the bytes of a copy.
fn ring(record: &JobRecord) -> Markup {
    let pct = shown(record).map_or(0.0, |s| s.permille as f64 / 10.0);
    // r = 15.9155 makes the circumference 100, so the dash is the percentage.
    html! {
        figure class="ring" {
            svg viewBox="0 0 36 36" role="img" aria-label={ (format!("{pct:.1}")) " % done" } width="140" height="140" {
                circle class="ring-bg" cx="18" cy="18" r="15.9155" {}
                circle class="ring-fg" cx="18" cy="18" r="15.9155" data-field="ring"
                    stroke-dasharray={ (format!("{pct:.2}")) " 100" } {}
                text x="18" y="20.5" text-anchor="middle" class="ring-text" data-field="ring-text" { (format!("{}%", pct as u64)) }
            }
            figcaption {
                @match record.kind.as_str() {
                    "data-copy-task" => "Bytes of this iteration",
                    "migration" if record.progress.contains_key("rowsTotalEstimate") => "Rows written of the estimated total",
                    "migration" | "validation" => "Units of the plan (token ranges, segments or files)",
                    _ => "Share done",
                }
            }
        }
    }
}

pub(super) fn dl_time(label: &str, t: Option<chrono::DateTime<chrono::Utc>>) -> Markup {
    html! {
        dt { (label) }
        dd { @if let Some(t) = t { time datetime=(t.to_rfc3339()) { (t.format("%Y-%m-%d %H:%M:%S UTC")) } } @else { "—" } }
    }
}

/// One job's page.
pub fn job_page(
    viewer: &Viewer,
    record: &JobRecord,
    savepoints: Option<&Result<SavepointList, String>>,
    page: usize,
    notice: Option<&str>,
) -> Markup {
    let active = record.state.is_active();
    let path = format!("/ui/jobs/{}", encode_path(&record.id));
    let summary = crate::kinds::summary(record);
    layout(
        &summary.name,
        Some(viewer),
        html! {
            div id="job" data-job=(record.id) data-kind=(record.kind) data-active=(active) {
                h1 data-field="name" { (summary.name) }
                p class="job-detail" { (record.kind) " · " code { (record.id) } }
                @if let Some(notice) = notice {
                    p role="status" class="notice" { (notice) }
                }
                section class="overview" aria-labelledby="h-overview" {
                    h2 id="h-overview" { "Overview" }
                    div class="overview-grid" {
                        (ring(record))
                        dl class="facts" {
                            @if summary.source.is_some() || summary.target.is_some() {
                                dt { "Source" } dd data-field="source" { (summary.source.as_deref().unwrap_or("—")) }
                                dt { "Target" } dd data-field="target" { (summary.target.as_deref().unwrap_or("—")) }
                            }
                            dt { "State" } dd { (state_badge(record.state)) }
                            dt { "Phase" } dd data-field="phase" { (record.phase.as_deref().unwrap_or("—")) }
                            dt { "Progress" } dd { (progress_bar(record)) }
                            @if let Some(rows) = summary.rows {
                                dt { "Rows" } dd class="num" data-field="rows" { (thousands(rows)) }
                            }
                            @if let Some(bytes) = summary.bytes {
                                dt { "Bytes" } dd class="num" data-field="bytes" { (bytesize::ByteSize(bytes)) }
                            }
                            dt { "Duration" } dd data-field="duration" { (duration(&summary)) }
                            // Once the job has ended, its average over the run: the recent
                            // rate is 0 then.
                            dt { "Rate" } dd data-field="rate" { (average_rate(&summary).unwrap_or_else(|| rate(record))) }
                            dt { "ETA" } dd data-field="eta" { (eta(record)) }
                            dt { "Attempts" } dd { (record.attempts) }
                            (dl_time("Submitted", Some(record.created_at)))
                            (dl_time("Started", record.started_at))
                            (dl_time("Ended", record.ended_at))
                        }
                    }
                    @if let Some(e) = &record.error {
                        p role="alert" class="error" { strong { "Error: " } (e) }
                    }
                    p class="last-error" data-field="last-error" hidden[record.last_error.is_none()] {
                        strong { "Last retried error: " } span data-field="last-error-text" { (record.last_error.as_deref().unwrap_or("")) }
                    }
                }
                (actions(viewer, record, &path))
                section aria-labelledby="h-throughput" {
                    h2 id="h-throughput" { "Throughput" }
                    figure class="chart" {
                        svg id="chart" viewBox="0 0 600 120" preserveAspectRatio="none" role="img" aria-label="Throughput over time, drawn while this page is open" width="600" height="120" {
                            polyline id="chart-line" points="" {}
                        }
                        figcaption id="chart-caption" { @if active { "Drawn from the live progress stream while this page is open." } @else { "The job is not running." } }
                    }
                }
                section aria-labelledby="h-counters" {
                    h2 id="h-counters" { "Counters" }
                    table class="counters" {
                        caption class="sr-only" { "Progress counters" }
                        thead { tr { th scope="col" { "Counter" } th scope="col" { "Value" } } }
                        tbody id="counters" {
                            @for (name, value) in &record.progress {
                                tr { th scope="row" { code { (name) } } td class="num" data-counter=(name) { (thousands(*value)) } }
                            }
                        }
                    }
                }
                @match record.kind.as_str() {
                    "validation" => (validation_section(record, page, &path)),
                    "data-copy-task" => (copy_section(record)),
                    _ => {}
                }
                @if let Some(savepoints) = savepoints { (savepoints_section(savepoints)) }
                section aria-labelledby="h-spec" {
                    h2 id="h-spec" { "Job file (secrets redacted)" }
                    pre class="spec" { (yaml_serde::to_string(&record.spec).unwrap_or_else(|e| format!("cannot show: {e}"))) }
                }
            }
        },
    )
}

fn action_form(viewer: &Viewer, path: &str, action: &str, label: &str, confirm: &str) -> Markup {
    html! {
        form method="post" action={ (path) "/" (action) } data-confirm=(confirm) {
            input type="hidden" name="csrf" value=(viewer.csrf);
            button type="submit" class={ "act act-" (action) } { (label) }
        }
    }
}

fn actions(viewer: &Viewer, record: &JobRecord, path: &str) -> Markup {
    // Cancelled migrations and validations go on from their savepoints too (their job file is
    // kept until they are deleted).
    let resumable = (record.state == JobState::Interrupted
        && matches!(
            record.kind.as_str(),
            "migration" | "validation" | "data-copy-task"
        ))
        || (record.state == JobState::Cancelled
            && matches!(record.kind.as_str(), "migration" | "validation"));
    html! {
        @if viewer.operator {
            section aria-labelledby="h-actions" class="actions" {
                h2 id="h-actions" { "Actions" }
                div class="buttons" {
                    @if record.state.is_active() {
                        (action_form(viewer, path, "cancel", "Cancel job", "Cancel this job? Work in flight finishes and is saved; the job ends CANCELLED."))
                    }
                    @if resumable {
                        (action_form(viewer, path, "resume", "Resume job", "Resume this job from its savepoints?"))
                    }
                    @if !record.state.is_active() {
                        (action_form(viewer, path, "delete", "Delete job", "Delete this job's record? Its savepoints stay where they are."))
                    }
                }
            }
        }
    }
}

fn savepoints_section(savepoints: &Result<SavepointList, String>) -> Markup {
    html! {
        section aria-labelledby="h-savepoints" {
            h2 id="h-savepoints" { "Savepoints" }
            @match savepoints {
                Err(e) => p class="error" { "Cannot list the savepoints: " (e) },
                Ok(list) => {
                    @if let Some(path) = &list.path { p { "In " code { (path) } } }
                    @if let Some(note) = &list.note { p class="muted" { (note) } }
                    @if list.savepoints.is_empty() {
                        p { "No savepoint yet." }
                    } @else {
                        table {
                            caption class="sr-only" { "Savepoints, newest first" }
                            thead { tr {
                                th scope="col" { "Name" } th scope="col" { "Written" }
                                th scope="col" { "Token ranges" } th scope="col" { "Share of the ring" }
                                th scope="col" { "Segments" } th scope="col" { "Parquet files" }
                            } }
                            tbody {
                                @for s in list.savepoints.iter().take(100) {
                                    tr {
                                        th scope="row" { code { (s.name) } }
                                        td { (chrono::DateTime::from_timestamp_millis(s.epoch_millis as i64).map_or_else(|| "—".to_string(), |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())) }
                                        td class="num" { (s.token_ranges) }
                                        td class="num" { (format!("{:.1} %", s.ring_fraction * 100.0)) }
                                        td class="num" { (s.segments) }
                                        td class="num" { (s.parquet_files) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn validation_section(record: &JobRecord, page: usize, path: &str) -> Markup {
    let report = record
        .result
        .clone()
        .and_then(|v| serde_json::from_value::<Report>(v).ok());
    let Some(report) = report else {
        return html! { section { h2 { "Report" } p { "No report yet." } } };
    };
    let d = &report.differences;
    let kinds = [
        ("Rows missing in the target", d.missing_rows),
        ("Rows only in the target", d.extra_rows),
        ("Rows with different values", d.different_values),
        ("Rows with values missing in the target", d.missing_values),
        ("Rows with values only in the target", d.extra_values),
        ("Rows with different writetimes", d.different_writetimes),
        ("Rows with different TTLs", d.different_ttls),
    ];
    let examples = &report.examples;
    let pages = examples.len().div_ceil(REPORT_PAGE_SIZE).max(1);
    let page = page.min(pages);
    let shown = examples
        .iter()
        .skip((page - 1) * REPORT_PAGE_SIZE)
        .take(REPORT_PAGE_SIZE);
    html! {
        section aria-labelledby="h-report" id="report" {
            h2 id="h-report" { "Validation report" }
            @if report.rows_with_differences == 0 {
                p class="clean" { "No differences in " (thousands(report.rows_compared)) " rows compared." }
            } @else {
                p class="dirty" { (thousands(report.rows_with_differences)) " of " (thousands(report.rows_compared)) " rows differ." }
            }
            table class="counts" {
                caption { "Counts" }
                tbody {
                    tr { th scope="row" { "Source rows" } td class="num" { (thousands(report.source_rows)) } }
                    tr { th scope="row" { "Target rows" } td class="num" { (thousands(report.target_rows)) } }
                    tr { th scope="row" { "Rows compared" } td class="num" { (thousands(report.rows_compared)) } }
                    tr { th scope="row" { "Rows matched" } td class="num" { (thousands(report.rows_matched)) } }
                    tr { th scope="row" { "Rows with differences" } td class="num" { (thousands(report.rows_with_differences)) } }
                    @for (label, n) in kinds {
                        tr { th scope="row" { (label) } td class="num" { (thousands(n)) } }
                    }
                    tr { th scope="row" { "Rows copied again" } td class="num" { (thousands(report.rows_copied)) } }
                    tr { th scope="row" { "Rows skipped" } td class="num" { (thousands(report.rows_skipped)) } }
                }
            }
            @if !examples.is_empty() {
                h3 { "Differing rows" }
                p { "The first " (examples.len()) " found (" code { "failuresToFetch" } "). Each key is a condition to paste after WHERE." }
                table class="examples" {
                    caption class="sr-only" { "Differing rows" }
                    thead { tr {
                        th scope="col" { "Difference" } th scope="col" { "Key" } th scope="col" { "Token" }
                        th scope="col" { "Column" } th scope="col" { "What" } th scope="col" { "Source" } th scope="col" { "Target" }
                    } }
                    tbody {
                        @for e in shown {
                            @let kind = serde_json::to_value(e.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
                            @if e.columns.is_empty() {
                                tr class="example" {
                                    td { (kind) } td { code { (e.key) } } td class="num" { (e.token.map(|t| t.to_string()).unwrap_or_default()) }
                                    td {} td {} td {} td {}
                                }
                            }
                            @for (i, c) in e.columns.iter().enumerate() {
                                tr class="example" {
                                    @if i == 0 {
                                        td { (kind) } td { code { (e.key) } } td class="num" { (e.token.map(|t| t.to_string()).unwrap_or_default()) }
                                    } @else { td {} td {} td {} }
                                    td { code { (c.column) } @if let Some(t) = &c.target_column { " → " code { (t) } } }
                                    td { (serde_json::to_value(c.difference).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()) }
                                    td { code { (clip(&c.source, 200)) } }
                                    td { code { (clip(&c.target, 200)) } }
                                }
                            }
                        }
                    }
                }
                @if pages > 1 {
                    nav class="pager" aria-label="Pages of differing rows" {
                        @if page > 1 { a href={ (path) "?page=" (page - 1) "#report" } rel="prev" { "← Previous" } }
                        span { "Page " (page) " of " (pages) }
                        @if page < pages { a href={ (path) "?page=" (page + 1) "#report" } rel="next" { "Next →" } }
                    }
                }
            }
        }
    }
}

fn num(v: &Value, key: &str) -> Option<i64> {
    v.get(key).and_then(Value::as_i64)
}

fn copy_section(record: &JobRecord) -> Markup {
    let threshold = record.spec.get("successThreshold").and_then(Value::as_f64);
    let max_iterations = record.spec.get("maxIterations").and_then(Value::as_u64);
    let iterations: Vec<Value> = record
        .result
        .as_ref()
        .and_then(|r| r.get("status"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let bytes = |v: Option<i64>| match v {
        Some(n) if n >= 0 => bytesize::ByteSize(n as u64).to_string(),
        _ => "—".into(),
    };
    let count = |v: Option<i64>| match v {
        Some(n) if n >= 0 => thousands(n as u64),
        _ => "—".into(),
    };
    html! {
        section aria-labelledby="h-iterations" id="iterations" {
            h2 id="h-iterations" { "Iterations" }
            p {
                "Success threshold: " strong { (threshold.map_or("—".to_string(), |t| format!("{:.1} %", t * 100.0))) }
                " of the source's bytes already identical here"
                @if let Some(m) = max_iterations { "; at most " (m) " iterations" }
                "."
            }
            @if iterations.is_empty() {
                p { "No iteration yet." }
            } @else {
                table {
                    caption class="sr-only" { "Iterations of the copy" }
                    thead { tr {
                        th scope="col" { "Iteration" } th scope="col" { "State" }
                        th scope="col" { "Source size" } th scope="col" { "Source files" }
                        th scope="col" { "Identical already" }
                        th scope="col" { "To download" } th scope="col" { "Downloaded" } th scope="col" { "Kept" }
                        th scope="col" { "Files" } th scope="col" { "Failures" }
                    } }
                    tbody {
                        @for it in &iterations {
                            @let total = num(it, "totalSize");
                            @let to = num(it, "bytesToDownload");
                            @let identical = match (total, to) { (Some(t), Some(d)) if t > 0 && d >= 0 => Some((t - d) as f64 / t as f64), _ => None };
                            tr {
                                th scope="row" { (num(it, "iteration").unwrap_or(0)) }
                                td { (it.get("state").and_then(Value::as_str).unwrap_or("")) }
                                td class="num" { (bytes(total)) }
                                td class="num" { (count(num(it, "totalFiles"))) }
                                td class="num" {
                                    @if let Some(share) = identical {
                                        (format!("{:.1} %", share * 100.0))
                                        @if let Some(t) = threshold { @if share > t { " ✓" } }
                                    } @else { "—" }
                                }
                                td class="num" { (bytes(to)) }
                                td class="num" { (bytes(num(it, "bytesDownloaded"))) }
                                td class="num" { (bytes(num(it, "bytesKept"))) }
                                td class="num" { (count(num(it, "filesDownloaded"))) " / " (count(num(it, "filesToDownload"))) }
                                td class="num" { (count(num(it, "downloadFailures"))) }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_encoding() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(encode_query("/ui/jobs?x=1&y"), "/ui/jobs%3Fx%3D1%26y");
        assert_eq!(encode_path("a/b c"), "a%2Fb%20c");
    }
}
