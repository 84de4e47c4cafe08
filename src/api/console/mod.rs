//! The web console at `/ui`: server-rendered pages over the job registry, for a browser.
//!
//! Pages are HTML from templates compiled into the binary (`maud`), with one small script
//! and one style sheet served from the binary too: nothing is fetched from elsewhere, so the
//! console works air-gapped. A `reader` sees every page; the cancel, resume and delete
//! buttons are shown to, and accepted from, an `operator`.
//!
//! With `auth` configured a browser signs in with a bearer token and gets a session cookie
//! (`HttpOnly`, `SameSite=Strict`, path `/ui`). The token stays in the daemon's memory and is
//! checked again on every request, so a token removed from `auth.tokens` ends its sessions.
//! Forms carry a per-session token against cross-site posts, beside the `Origin` check every
//! request gets.

mod live;
mod pages;

pub use pages::{encode_path, encode_query};

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use prometheus_client::metrics::gauge::Gauge;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::AppState;
use super::error::ApiError;
use crate::auth::{Identity, Role};
use crate::config::ConsoleConfig;

/// The cookie that names a console session.
const COOKIE: &str = "drover_session";
/// Jobs per page of the list.
pub const PAGE_SIZE: usize = 50;
/// Differing rows per page of a validation report.
pub const REPORT_PAGE_SIZE: usize = 50;

/// The console's routes (merged into the daemon's router when `server.console.enabled`).
pub fn routes() -> Router<AppState> {
    Router::new()
        // The daemon's root is the console's front door: a browser pointed at the bare address
        // lands on the jobs (or the sign-in page), not on a JSON 404.
        .route("/", get(|| async { Redirect::to("/ui/jobs") }))
        .route("/ui", get(|| async { Redirect::to("/ui/jobs") }))
        .route("/ui/jobs", get(jobs_page))
        .route("/ui/jobs/{id}", get(job_page))
        .route("/ui/jobs/{id}/events", get(job_events))
        .route("/ui/jobs/{id}/cancel", post(cancel))
        .route("/ui/jobs/{id}/resume", post(resume))
        .route("/ui/jobs/{id}/delete", post(delete))
        .route("/ui/live-migration", get(live::live_page))
        .route("/ui/login", get(login_page).post(login))
        .route("/ui/logout", post(logout))
        .route("/ui/assets/{file}", get(asset))
}

/// Signed-in browsers.
pub struct Sessions {
    ttl: Duration,
    max: usize,
    /// By the SHA-256 of the cookie's value: the map never holds what a browser sends.
    sessions: Mutex<HashMap<[u8; 32], Session>>,
    open: Gauge,
    /// The forms' token when nobody signs in (no `auth`).
    anonymous_csrf: String,
}

struct Session {
    token: SecretString,
    csrf: String,
    expires: Instant,
    created: Instant,
}

/// The session a request's cookie names.
pub struct SessionView {
    token: SecretString,
    csrf: String,
}

impl SessionView {
    /// The bearer token the session was opened with.
    pub fn token(&self) -> &str {
        self.token.expose_secret()
    }
}

fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    // Without randomness no session id is safe; the operating system always has some.
    getrandom::fill(&mut bytes).expect("the operating system gives random bytes");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn key_of(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

/// The value of cookie `name` in a request's `Cookie` headers.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

impl Sessions {
    /// The sessions of `config`, counted in `open`.
    pub fn new(config: &ConsoleConfig, open: Gauge) -> Self {
        Self {
            ttl: config.session_ttl,
            max: config.max_sessions.get(),
            sessions: Mutex::new(HashMap::new()),
            open,
            anonymous_csrf: random_hex(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Session>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens a session for `token` (already accepted); returns the cookie's value.
    fn open(&self, token: String) -> String {
        let id = random_hex();
        let now = Instant::now();
        let mut sessions = self.lock();
        sessions.retain(|_, s| s.expires > now);
        while sessions.len() >= self.max {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, s)| s.created)
                .map(|(k, _)| *k);
            match oldest {
                Some(k) => sessions.remove(&k),
                None => break,
            };
        }
        sessions.insert(
            key_of(&id),
            Session {
                token: SecretString::from(token),
                csrf: random_hex(),
                expires: now + self.ttl,
                created: now,
            },
        );
        self.open.set(sessions.len() as i64);
        id
    }

    /// The live session a request's cookie names.
    pub fn of_request(&self, headers: &HeaderMap) -> Option<SessionView> {
        let id = cookie(headers, COOKIE)?;
        let key = key_of(id);
        let mut sessions = self.lock();
        let session = sessions.get(&key)?;
        if session.expires <= Instant::now() {
            sessions.remove(&key);
            self.open.set(sessions.len() as i64);
            return None;
        }
        Some(SessionView {
            token: session.token.clone(),
            csrf: session.csrf.clone(),
        })
    }

    fn close(&self, headers: &HeaderMap) {
        if let Some(id) = cookie(headers, COOKIE) {
            let mut sessions = self.lock();
            sessions.remove(&key_of(id));
            self.open.set(sessions.len() as i64);
        }
    }

    /// The token the forms of a page for this request carry.
    fn csrf_for(&self, headers: &HeaderMap) -> String {
        self.of_request(headers)
            .map_or_else(|| self.anonymous_csrf.clone(), |s| s.csrf)
    }

    fn csrf_matches(&self, headers: &HeaderMap, sent: &str) -> bool {
        use subtle::ConstantTimeEq;
        let want = self.csrf_for(headers);
        want.len() == sent.len() && bool::from(want.as_bytes().ct_eq(sent.as_bytes()))
    }
}

/// Who is looking at a page, and what they may do there.
pub struct Viewer {
    /// Signed in as (none without `auth`).
    pub name: Option<String>,
    /// May cancel, resume and delete.
    pub operator: bool,
    /// The token the page's forms carry.
    pub csrf: String,
    /// Whether sign-in is a thing here (a sign-out button is shown).
    pub auth: bool,
}

fn viewer(state: &AppState, headers: &HeaderMap, identity: Option<&Identity>) -> Viewer {
    let auth = state.config.auth.is_enabled();
    Viewer {
        name: identity.map(|i| i.name.clone()),
        operator: !auth || identity.is_some_and(|i| i.has(Role::Operator)),
        csrf: state.sessions.csrf_for(headers),
        auth,
    }
}

fn html(status: StatusCode, markup: maud::Markup) -> Response {
    let mut response = (status, markup).into_response();
    let headers = response.headers_mut();
    // Only the console's own script and style run: nothing inline, nothing from elsewhere.
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}

/// A refusal of the authorization layer, as a browser should see it: a page asked without a
/// session goes to the sign-in page; any other refusal is a page that says why.
pub async fn refused(get: bool, path_and_query: String, response: Response) -> Response {
    let status = response.status();
    if status == StatusCode::UNAUTHORIZED && get {
        let target = format!("/ui/login?next={}", pages::encode_query(&path_and_query));
        return Redirect::to(&target).into_response();
    }
    let message = match axum::body::to_bytes(response.into_body(), 4096).await {
        Ok(bytes) => serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| {
                v.get("message")
                    .and_then(|m| m.as_str())
                    .map(str::to_string)
            })
            .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned()),
        Err(_) => String::new(),
    };
    html(status, pages::error_page(status, &message))
}

fn error_response(e: impl Into<ApiError>) -> Response {
    let e: ApiError = e.into();
    html(e.status, pages::error_page(e.status, &e.message))
}

/// Filters and page of the list.
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    /// Only this state.
    #[serde(default)]
    pub state: Option<String>,
    /// Only this kind.
    #[serde(default)]
    pub kind: Option<String>,
    /// Page, from 1.
    #[serde(default)]
    pub page: Option<usize>,
}

async fn jobs_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    identity: Option<axum::Extension<Identity>>,
    Query(query): Query<ListQuery>,
) -> Response {
    let wanted = match query
        .state
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(str::parse::<crate::jobs::JobState>)
        .transpose()
    {
        Ok(s) => s,
        Err(e) => return error_response(ApiError::bad_request(format!("state: {e}"))),
    };
    let kind = query.kind.as_deref().filter(|k| !k.is_empty());
    let page = query.page.unwrap_or(1).max(1);
    let (total, jobs) = state.jobs.page(
        |k, s| wanted.is_none_or(|w| w == s) && kind.is_none_or(|want| want == k),
        (page - 1).saturating_mul(PAGE_SIZE),
        PAGE_SIZE,
    );
    let viewer = viewer(&state, &headers, identity.as_deref());
    html(
        StatusCode::OK,
        pages::jobs_page(&viewer, &query, page, total, &jobs),
    )
}

/// Page of a validation report's differing rows.
#[derive(Debug, Default, Deserialize)]
pub struct JobQuery {
    /// Page of the differing rows, from 1.
    #[serde(default)]
    pub page: Option<usize>,
    /// What the last action did (shown once, after its redirect).
    #[serde(default)]
    pub notice: Option<String>,
}

async fn job_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    identity: Option<axum::Extension<Identity>>,
    Path(asked): Path<String>,
    uri: axum::http::Uri,
    Query(query): Query<JobQuery>,
) -> Response {
    let id = match state.jobs.resolve(&asked) {
        Ok(id) => id,
        Err(e) => return error_response(e),
    };
    if id != asked {
        // A shortened id (as the list shows it): the page lives at the full id, where its
        // forms and event stream point.
        let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
        return Redirect::to(&format!("/ui/jobs/{}{query}", pages::encode_path(&id)))
            .into_response();
    }
    let record = match state.jobs.get(&id) {
        Ok(r) => r,
        Err(e) => return error_response(e),
    };
    let savepoints = if record.kind == "migration" {
        let job_file = crate::jobs::kept::read_job_file(&state.config.state_dir, &id).ok();
        Some(
            crate::migrate::saved::list(&record.spec, job_file)
                .await
                .map_err(|e| e.to_string()),
        )
    } else {
        None
    };
    let viewer = viewer(&state, &headers, identity.as_deref());
    html(
        StatusCode::OK,
        pages::job_page(
            &viewer,
            &record,
            savepoints.as_ref(),
            query.page.unwrap_or(1).max(1),
            query.notice.as_deref(),
        ),
    )
}

async fn job_events(
    State(state): State<AppState>,
    Path(asked): Path<String>,
    Query(query): Query<super::events::EventsQuery>,
    identity: Option<axum::Extension<Identity>>,
    address: Option<axum::Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
) -> Response {
    let id = match state.jobs.resolve(&asked) {
        Ok(id) => id,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let interval = match super::events::interval_of(&query) {
        Ok(i) => i,
        Err(e) => return e.into_response(),
    };
    let caller = super::events::caller_of(identity.as_deref(), address.as_deref());
    match super::events::stream(&state, &id, interval, &caller) {
        Ok(sse) => sse.into_response(),
        Err(e) => e.into_response(),
    }
}

/// The body of an action's form.
#[derive(Debug, Deserialize)]
pub struct ActionForm {
    /// The page's form token.
    #[serde(default)]
    pub csrf: String,
}

/// Checks an action's form token: the refusal to answer when it does not match.
fn refusal_of_form(state: &AppState, headers: &HeaderMap, form: &ActionForm) -> Option<Response> {
    if state.sessions.csrf_matches(headers, &form.csrf) {
        None
    } else {
        Some(html(
            StatusCode::FORBIDDEN,
            pages::error_page(
                StatusCode::FORBIDDEN,
                "the form is stale or was not sent by this console: reload the page and try again",
            ),
        ))
    }
}

/// Where an action goes back to, with what it did.
fn done(id: &str, notice: &str) -> Response {
    Redirect::to(&format!(
        "/ui/jobs/{}?notice={}",
        pages::encode_path(id),
        pages::encode_query(notice)
    ))
    .into_response()
}

async fn cancel(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(asked): Path<String>,
    Form(form): Form<ActionForm>,
) -> Response {
    let id = match state.jobs.resolve(&asked) {
        Ok(id) => id,
        Err(e) => return error_response(e),
    };
    if let Some(page) = refusal_of_form(&state, &headers, &form) {
        return page;
    }
    match state.jobs.cancel_recorded(&id).await {
        Ok(_) => done(&id, "cancel requested"),
        Err(e) => error_response(e),
    }
}

async fn resume(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(asked): Path<String>,
    Form(form): Form<ActionForm>,
) -> Response {
    let id = match state.jobs.resolve(&asked) {
        Ok(id) => id,
        Err(e) => return error_response(e),
    };
    if let Some(page) = refusal_of_form(&state, &headers, &form) {
        return page;
    }
    match crate::kinds::resume(&state.services(), &id).await {
        Ok(_) => done(&id, "resumed"),
        Err(e) => error_response(e),
    }
}

async fn delete(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(asked): Path<String>,
    Form(form): Form<ActionForm>,
) -> Response {
    let id = match state.jobs.resolve(&asked) {
        Ok(id) => id,
        Err(e) => return error_response(e),
    };
    if let Some(page) = refusal_of_form(&state, &headers, &form) {
        return page;
    }
    match state.jobs.delete(&id).await {
        Ok(_) => Redirect::to("/ui/jobs").into_response(),
        Err(e) => error_response(e),
    }
}

/// Where the sign-in page sends the browser afterwards.
#[derive(Debug, Default, Deserialize)]
pub struct LoginQuery {
    /// A console path.
    #[serde(default)]
    pub next: Option<String>,
}

/// Only a console path is a place to go after sign-in (no open redirect).
fn next_of(next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with("/ui")
                && !n.starts_with("//")
                && !n.contains('\\')
                && !n.contains(char::is_control) =>
        {
            n.to_string()
        }
        _ => "/ui/jobs".to_string(),
    }
}

async fn login_page(State(state): State<AppState>, Query(query): Query<LoginQuery>) -> Response {
    if !state.config.auth.is_enabled() {
        return Redirect::to("/ui/jobs").into_response();
    }
    html(
        StatusCode::OK,
        pages::login_page(&next_of(query.next.as_deref()), None),
    )
}

/// The sign-in form.
#[derive(Debug, Deserialize)]
pub struct LoginForm {
    /// A bearer token of `auth.tokens` (or a JWT).
    pub token: String,
    /// Where to go afterwards.
    #[serde(default)]
    pub next: Option<String>,
}

async fn login(State(state): State<AppState>, Form(form): Form<LoginForm>) -> Response {
    // A control character (CR/LF above all) in `next` is no console address but an attempt
    // at a header of the answer: refused before any session is opened.
    if form
        .next
        .as_deref()
        .is_some_and(|n| n.contains(char::is_control))
    {
        return html(
            StatusCode::BAD_REQUEST,
            pages::login_page(
                "/ui/jobs",
                Some("not signed in: next holds a control character, which no console address has"),
            ),
        );
    }
    let next = next_of(form.next.as_deref());
    if !state.config.auth.is_enabled() {
        return Redirect::to(&next).into_response();
    }
    let token = form.token.trim();
    match state.auth.identify_bearer(token) {
        Ok(identity) => {
            tracing::info!(identity = %identity.name, "console sign-in");
            let id = state.sessions.open(token.to_string());
            let secure = if state.config.server.tls.is_some() {
                "; Secure"
            } else {
                ""
            };
            let max_age = state.config.server.console.session_ttl.as_secs();
            let cookie = format!(
                "{COOKIE}={id}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}"
            );
            let mut response = Redirect::to(&next).into_response();
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Err(reason) => html(
            StatusCode::UNAUTHORIZED,
            pages::login_page(&next, Some(&format!("not signed in: {reason}"))),
        ),
    }
}

async fn logout(State(state): State<AppState>, headers: HeaderMap) -> Response {
    state.sessions.close(&headers);
    let mut response = Redirect::to("/ui/login").into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("drover_session=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    response
}

const CSS: &str = include_str!("assets/console.css");
const JS: &str = include_str!("assets/console.js");
const ICON: &str = include_str!("assets/favicon.svg");

async fn asset(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "console.css" => (CSS, "text/css; charset=utf-8"),
        "console.js" => (JS, "text/javascript; charset=utf-8"),
        "favicon.svg" => (ICON, "image/svg+xml"),
        _ => {
            return html(
                StatusCode::NOT_FOUND,
                pages::error_page(StatusCode::NOT_FOUND, "no such file"),
            );
        }
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "max-age=3600"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_console_paths_are_places_to_go() {
        assert_eq!(next_of(Some("/ui/jobs/x?page=2")), "/ui/jobs/x?page=2");
        assert_eq!(next_of(Some("https://evil.example")), "/ui/jobs");
        assert_eq!(next_of(Some("//evil.example/ui")), "/ui/jobs");
        assert_eq!(next_of(Some("/ui\\..\\x")), "/ui/jobs");
        assert_eq!(next_of(None), "/ui/jobs");
    }

    #[test]
    fn sessions_are_bounded_and_end() {
        let config = ConsoleConfig {
            max_sessions: std::num::NonZeroUsize::new(2).unwrap(),
            ..ConsoleConfig::default()
        };
        let sessions = Sessions::new(&config, Gauge::default());
        let headers = |id: &str| {
            let mut h = HeaderMap::new();
            h.insert(
                header::COOKIE,
                HeaderValue::from_str(&format!("a=b; {COOKIE}={id}")).unwrap(),
            );
            h
        };
        let first = sessions.open("t1".into());
        let second = sessions.open("t2".into());
        assert_eq!(sessions.of_request(&headers(&first)).unwrap().token(), "t1");
        let third = sessions.open("t3".into());
        assert!(
            sessions.of_request(&headers(&first)).is_none(),
            "the oldest session ends"
        );
        assert!(sessions.of_request(&headers(&second)).is_some());
        assert_eq!(sessions.open.get(), 2);
        sessions.close(&headers(&third));
        assert!(sessions.of_request(&headers(&third)).is_none());
        assert!(sessions.of_request(&headers("nonsense")).is_none());
        // Each session has its own form token, and no session has the anonymous one.
        let csrf = sessions.csrf_for(&headers(&second));
        assert!(sessions.csrf_matches(&headers(&second), &csrf));
        assert!(!sessions.csrf_matches(&HeaderMap::new(), &csrf));
        assert!(!sessions.csrf_matches(&headers(&second), ""));
    }
}
