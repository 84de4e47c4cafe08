//! Starts the real `drover` binary on `127.0.0.1:0` with its own state directory, and talks
//! HTTP to it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::poll;

/// The Cassandra node of the `src` test cluster (scripts/testenv).
pub fn cassandra_src() -> String {
    std::env::var("DROVER_TEST_CASSANDRA_SRC").unwrap_or_else(|_| "127.0.0.1:9042".to_string())
}

/// The drover binary under test. `cargo test` tells its test binaries where it is; a test
/// binary started by hand finds it beside itself (`target/<profile>/deps/..`).
pub fn drover_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("CARGO_BIN_EXE_drover") {
        return path.into();
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .map(|profile| profile.join("drover"))
        .filter(|bin| bin.exists())
        .expect("the drover binary (run the tests through cargo test)")
}

/// A plain HTTP client. reqwest is built with rustls (for the daemon's TLS client), and then
/// needs a process-wide crypto provider even for plain HTTP.
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    // Idle connections are let go before the daemon closes them (see CLIENT_POOL_IDLE).
    reqwest::Client::builder()
        .pool_idle_timeout(drover::config::CLIENT_POOL_IDLE)
        .build()
        .expect("an HTTP client builds")
}

/// Where a daemon keeps its files; survives restarts of the daemon within one test. A daemon
/// holds on to its home, so the directory outlives every daemon started in it.
#[derive(Clone)]
pub struct Home {
    dir: Arc<tempfile::TempDir>,
}

impl Default for Home {
    fn default() -> Self {
        Self::new()
    }
}

impl Home {
    /// A new, empty temporary directory.
    pub fn new() -> Self {
        Self {
            dir: Arc::new(tempfile::tempdir().expect("temp dir")),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The daemon's `state_dir`.
    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// Writes a daemon config listening on a free port, with diagnostics on, `extra` appended
    /// (top-level YAML keys).
    pub fn write_config(&self, extra: &str) -> PathBuf {
        self.write_config_at("127.0.0.1:0", extra)
    }

    /// The same, with each `(from, to)` of `edits` replaced in it: for keys of the sections
    /// the default config already has (`server`, `jobs`), which `extra` cannot repeat.
    pub fn write_config_edited(&self, extra: &str, edits: &[(&str, &str)]) -> PathBuf {
        let path = self.write_config(extra);
        let mut text = std::fs::read_to_string(&path).expect("read config");
        for (from, to) in edits {
            assert!(
                text.contains(from),
                "{from:?} is not in the config:\n{text}"
            );
            text = text.replace(from, to);
        }
        std::fs::write(&path, text).expect("write config");
        path
    }

    /// The same, listening on `listen`.
    pub fn write_config_at(&self, listen: &str, extra: &str) -> PathBuf {
        let path = self.dir.path().join("drover.yaml");
        let text = format!(
            "server:\n  listen: {listen}\n  diagnostics: true\n  shutdown_timeout: 10s\nstate_dir: {}\njobs:\n  progress_flush_interval: 200ms\n{extra}",
            self.state_dir().display()
        );
        std::fs::write(&path, text).expect("write config");
        path
    }
}

/// A running daemon.
pub struct Daemon {
    child: Option<Child>,
    /// The address its API listens on.
    pub addr: SocketAddr,
    log: PathBuf,
    client: reqwest::Client,
    home: Home,
}

impl Daemon {
    /// Starts a daemon in a new home of its own with the default test config plus `extra`:
    /// what a test that needs one daemon begins with.
    pub async fn fresh(extra: &str) -> Daemon {
        Self::start(&Home::new(), extra).await
    }

    /// Starts a daemon with the default test config plus `extra`.
    pub async fn start(home: &Home, extra: &str) -> Daemon {
        let config = home.write_config(extra);
        Self::start_with(home, &config).await
    }

    /// Starts a daemon with a config file.
    pub async fn start_with(home: &Home, config: &Path) -> Daemon {
        Self::start_with_env(home, config, &[]).await
    }

    /// Starts a daemon with a config file and these environment variables set.
    pub async fn start_with_env(home: &Home, config: &Path, env: &[(&str, &str)]) -> Daemon {
        let addr_file = home.state_dir().join("listen-addr");
        let _ = std::fs::remove_file(&addr_file);
        static STARTS: AtomicUsize = AtomicUsize::new(0);
        let log = home.path().join(format!(
            "drover-{}.log",
            STARTS.fetch_add(1, Ordering::SeqCst)
        ));
        let child = Command::new(drover_bin())
            .args(["serve", "--config"])
            .arg(config)
            .env("RUST_LOG", "info,drover=debug")
            .env_remove("DROVER_LISTEN")
            .env_remove("DROVER_STATE_DIR")
            .env_remove("DROVER_PEER_TOKEN")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("spawn drover");
        let mut daemon = Daemon {
            child: Some(child),
            addr: "0.0.0.0:0".parse().unwrap(),
            log,
            client: http_client(),
            home: home.clone(),
        };
        let listening = poll(Duration::from_secs(30), async || {
            if let Some(addr) = std::fs::read_to_string(&addr_file)
                .ok()
                .and_then(|text| text.trim().parse().ok())
            {
                return Ok(addr);
            }
            match daemon.child.as_mut().unwrap().try_wait().unwrap() {
                Some(status) => panic!(
                    "drover exited with {status} before listening:\n{}",
                    daemon.logs()
                ),
                None => Err(()),
            }
        })
        .await;
        daemon.addr =
            listening.unwrap_or_else(|()| panic!("drover did not start:\n{}", daemon.logs()));
        daemon
    }

    /// Where it keeps its files.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// Its process id (for what `/proc` says of it).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("a running daemon").id()
    }

    /// What it logged so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The URL of `path` on it.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Its HTTP client.
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// `drover ARGS` as a client of this daemon (`DROVER_SERVER` set to it): exit code,
    /// stdout and stderr.
    pub async fn cli(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let out = tokio::process::Command::new(drover_bin())
            .args(args)
            .env("DROVER_SERVER", self.url(""))
            .output()
            .await
            .expect("run drover");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// GET, returning status and JSON body.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let res = self.client.get(self.url(path)).send().await.expect("GET");
        json_of(res).await
    }

    /// GET, returning the body as text whatever the status (`/metrics`, for one).
    pub async fn get_text(&self, path: &str) -> String {
        let res = self.client.get(self.url(path)).send().await.expect("GET");
        res.text().await.expect("body")
    }

    /// POST a JSON body.
    pub async fn post_json(&self, path: &str, body: &Value) -> (u16, Value) {
        let res = self
            .client
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .expect("POST");
        json_of(res).await
    }

    /// POST raw bytes with a content type.
    pub async fn post_raw(
        &self,
        path: &str,
        content_type: &str,
        body: impl Into<reqwest::Body>,
    ) -> (u16, Value) {
        let res = self
            .client
            .post(self.url(path))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .expect("POST");
        json_of(res).await
    }

    /// Submits the job file `yaml` to `resource` (`/api/v1/migrations`, ...), which must accept
    /// it; returns the job id.
    pub async fn submit_job(&self, resource: &str, yaml: &str) -> String {
        let (status, body) = self
            .post_raw(resource, "application/yaml", yaml.to_string())
            .await;
        assert_eq!(status, 202, "{body}");
        let url = body["statusUrl"].as_str().unwrap();
        assert!(url.starts_with(resource), "{url}");
        body["jobId"].as_str().unwrap().to_string()
    }

    /// Submits the job file `yaml` to `resource` and waits for the job to run to its end;
    /// panics when it ends otherwise or takes longer than `wait`. Running to the end is
    /// `SUCCEEDED`, and for a validation whose report counts rows that differ
    /// `DIFFERENCES_FOUND`: every validation run here checks that its state tells its report.
    pub async fn run_job(&self, resource: &str, yaml: &str, wait: Duration) -> Value {
        let url = format!("{resource}/{}", self.submit_job(resource, yaml).await);
        let job = self.wait_for(&url, wait, ended).await;
        assert_eq!(
            job["state"],
            ran_to_the_end(&job),
            "job ended badly: {job}\n{}",
            self.logs()
        );
        job
    }

    /// Polls job `id` until `done` holds for it, or panics after `timeout`.
    pub async fn wait_job(
        &self,
        id: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        self.wait_for(&format!("/api/v1/jobs/{id}"), timeout, done)
            .await
    }

    /// Polls `url` (a job, a task: anything that answers 200 with JSON) until `done` holds for
    /// what it answers, or panics after `timeout` with what it answered last and the logs.
    pub async fn wait_for(
        &self,
        url: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        poll(timeout, async || {
            let (status, body) = self.get(url).await;
            assert_eq!(status, 200, "{url}: {body}");
            if done(&body) { Ok(body) } else { Err(body) }
        })
        .await
        .unwrap_or_else(|last| {
            panic!(
                "{url} never reached the expected state: {last:#}\n{}",
                self.logs()
            )
        })
    }

    /// `kill -9`.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().expect("kill -9");
        child.wait().expect("reap");
    }

    /// Sends a signal by name (`TERM`, `INT`).
    pub fn signal(&self, name: &str) {
        let pid = self.child.as_ref().expect("running").id();
        let status = Command::new("kill")
            .args([format!("-{name}"), pid.to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Waits for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut().expect("running");
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "drover did not exit in {timeout:?}:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The state of `job` had it run to its end: `DIFFERENCES_FOUND` for a validation whose report
/// counts rows that differ, else `SUCCEEDED`.
pub fn ran_to_the_end(job: &Value) -> &'static str {
    let differ = job["result"]["rowsWithDifferences"].as_u64().unwrap_or(0);
    if job["kind"] == "validation" && differ > 0 {
        "DIFFERENCES_FOUND"
    } else {
        "SUCCEEDED"
    }
}

/// Whether a job or task is neither waiting to run nor running (an INTERRUPTED one waits for
/// a resume that may never come: it counts as ended).
pub fn ended(job: &Value) -> bool {
    !["QUEUED", "RUNNING"].contains(&job["state"].as_str().unwrap_or(""))
}

/// A response's status and JSON body (the text as a JSON string when it is not JSON).
pub async fn json_of(res: reqwest::Response) -> (u16, Value) {
    let status = res.status().as_u16();
    let text = res.text().await.expect("body");
    let value = match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(_) => Value::String(text),
    };
    (status, value)
}

/// Asserts the JSON error shape and returns the message.
pub fn error_message(status: u16, body: &Value) -> String {
    assert_eq!(
        body["code"], status,
        "error body must carry the code: {body}"
    );
    assert!(
        body["status"].as_str().is_some_and(|s| !s.is_empty()),
        "{body}"
    );
    body["message"]
        .as_str()
        .unwrap_or_else(|| panic!("no message: {body}"))
        .to_string()
}

/// The pid of the process listening on `addr` (a Cassandra node, a daemon), found through its
/// socket so it does not matter which checkout's testenv started it.
pub fn listener_pid(addr: &str) -> u32 {
    let out = Command::new("ss")
        .args(["-ltnpH", "src", addr])
        .output()
        .expect("ss");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split("pid=")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no process listens on {addr}: {text}"))
}
