//! The daemon's HTTP application in this process, for tests of what the API answers that need
//! no socket and no process: requests go through `tower::ServiceExt::oneshot`.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request};
use drover::api;
use drover::config::DaemonConfig;
use drover::livemigration::LiveMigration;
use serde_json::Value;
use tower::ServiceExt;

use crate::daemon::Home;

/// The router of a daemon configured as [`Home::write_config`] configures the real one.
pub struct App {
    router: Router,
    home: Home,
    live: Arc<LiveMigration>,
}

impl App {
    /// The application of the default test config plus `extra` (top-level YAML keys), in a
    /// new home.
    pub async fn new(extra: &str) -> Self {
        let home = Home::new();
        let path = home.write_config(extra);
        Self::with_config(&home, &path).await
    }

    /// The application of the config file at `path`, its state kept in `home`.
    pub async fn with_config(home: &Home, path: &std::path::Path) -> Self {
        let config = DaemonConfig::load(Some(path), |_| None, drover::daemon::SECTION_CHECKS)
            .expect("test config");
        // Wired as `drover serve` wires it, less the listener: nothing is resumed at start.
        let jobs = drover::daemon::open_jobs(&config)
            .await
            .expect("job registry");
        let live =
            LiveMigration::open(&config, config.server.listen).expect("live migration state");
        let state = drover::daemon::app_state(Arc::new(config), jobs, live).expect("daemon state");
        Self {
            live: state.live.clone(),
            router: api::router(state),
            home: home.clone(),
        }
    }

    /// Its live migration (a test can hold its limits' slots).
    pub fn live(&self) -> &Arc<LiveMigration> {
        &self.live
    }

    /// Sends one request; returns the whole response (headers, and the body unread).
    pub async fn response(&self, request: Request<Body>) -> axum::response::Response {
        self.router
            .clone()
            .oneshot(request)
            .await
            .expect("the router never fails")
    }

    /// Where its state is kept.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// Sends one request; returns the status and the JSON body (the text as a JSON string
    /// when it is not JSON).
    pub async fn send(&self, request: Request<Body>) -> (u16, Value) {
        let (status, _, value) = self.respond(request).await;
        (status, value)
    }

    /// Sends one request; returns the status, the headers and the JSON body.
    pub async fn respond(&self, request: Request<Body>) -> (u16, HeaderMap, Value) {
        let response = self.response(request).await;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, headers, value)
    }

    /// `method path`, without a body.
    pub async fn call(&self, method: Method, path: &str) -> (u16, Value) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty())
            .expect("request");
        self.send(request).await
    }

    /// GET.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call(Method::GET, path).await
    }

    /// `method path` with a body of `content_type`.
    pub async fn send_raw(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: impl Into<Body>,
    ) -> (u16, Value) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", content_type)
            .body(body.into())
            .expect("request");
        self.send(request).await
    }

    /// POST a body of `content_type`.
    pub async fn post_raw(
        &self,
        path: &str,
        content_type: &str,
        body: impl Into<Body>,
    ) -> (u16, Value) {
        self.send_raw(Method::POST, path, content_type, body).await
    }

    /// POST a JSON body.
    pub async fn post_json(&self, path: &str, body: &Value) -> (u16, Value) {
        self.post_raw(path, "application/json", body.to_string())
            .await
    }

    /// PUT a JSON body.
    pub async fn put_json(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send_raw(Method::PUT, path, "application/json", body.to_string())
            .await
    }
}
