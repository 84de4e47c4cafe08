//! The daemon configuration: one YAML file, every key documented on its struct field, unknown
//! keys rejected, and every error naming the file, the key path and the line.
//!
//! Environment variables override a few keys so that containers and systemd units can adjust a
//! deployment without editing the file; they are read through an injectable lookup so tests do
//! not touch the process environment.

pub mod auth;
mod cassandra;
mod jobs;
pub mod live_migration;
mod logging;
mod server;
mod snapshots;
mod uploads;
pub mod yaml;

use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use auth::{
    AdminIdentity, AuthConfig, CertificateConfig, IdentityPattern, JwtConfig, RateLimitConfig,
    TokenConfig, TokenHash,
};
pub use cassandra::{CassandraConfig, DEFAULT_NATIVE_ADDRESS};
pub use jobs::{JobsConfig, KeepFinished, read_filter_key};
pub use live_migration::{LiveMigrationConfig, PeerTlsConfig, Role};
pub use logging::{LogFormat, LoggingConfig};
pub use server::{CLIENT_POOL_IDLE, ClientAuth, ConsoleConfig, ServerConfig, TlsConfig};
pub use snapshots::SstableSnapshotsConfig;
pub use uploads::{ImporterKind, SstableUploadsConfig};

/// The configuration used when `drover serve` is given no `--config`.
pub const EMBEDDED_DEFAULT: &str = include_str!("../../config/drover.yaml");

/// Environment variables that override config keys, with the key each one replaces.
pub const ENV_OVERRIDES: &[(&str, &str)] = &[
    ("DROVER_LISTEN", "server.listen"),
    ("DROVER_STATE_DIR", "state_dir"),
    ("DROVER_LOG_FORMAT", "logging.format"),
    ("DROVER_LOG_LEVEL", "logging.level"),
];

/// The whole daemon configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonConfig {
    /// The HTTP listener.
    #[serde(default)]
    pub server: ServerConfig,
    /// Directory for the daemon's own state: job records, savepoints of API-submitted jobs, the
    /// bound address. Created if missing; locked so two daemons never share it. A relative path
    /// is taken from the working directory. Default `./drover-state`.
    #[serde(default = "default_state_dir")]
    pub state_dir: PathBuf,
    /// The local Cassandra node.
    #[serde(default)]
    pub cassandra: CassandraConfig,
    /// Job execution.
    #[serde(default)]
    pub jobs: JobsConfig,
    /// Logging.
    #[serde(default)]
    pub logging: LoggingConfig,
    /// Live instance migration (off by default).
    #[serde(default)]
    pub live_migration: LiveMigrationConfig,
    /// SSTable uploads and imports into the local node, Cassandra Sidecar's bulk-load routes
    /// (off by default).
    #[serde(default)]
    pub sstable_uploads: SstableUploadsConfig,
    /// Snapshots of the local node's tables and the download of their SSTables, Cassandra
    /// Sidecar's snapshot routes (off by default).
    #[serde(default)]
    pub sstable_snapshots: SstableSnapshotsConfig,
    /// Who may call the API (off unless tokens or certificate mappings are configured).
    #[serde(default)]
    pub auth: AuthConfig,
}

fn default_state_dir() -> PathBuf {
    PathBuf::from("./drover-state")
}

/// Why a configuration was refused. The message is meant for the operator as is.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: cannot read config: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A key has a bad value, is unknown or is missing.
    #[error("{origin}: {message}{}", line.map(|l| format!(" (line {l})")).unwrap_or_default())]
    Invalid {
        /// The file name, `<embedded default>` or the environment variable.
        origin: String,
        /// Key path and what was expected.
        message: String,
        /// Line of the key in the file, when known.
        line: Option<usize>,
    },
}

/// A subsystem's check of its own section, run once the whole config is parsed: what needs
/// the subsystem's own parsers (a tokens file, JWT keys, exclusion patterns). It names the key
/// (`auth.tokens_file`, `live_migration.files_to_exclude[2]`) and what is wrong; the loader
/// adds the file and the line. The daemon passes its subsystems' checks
/// (`daemon::SECTION_CHECKS`), so this layer names none of them.
pub type SectionCheck = fn(&DaemonConfig) -> Result<(), (String, String)>;

impl DaemonConfig {
    /// Loads the file at `path` (or the embedded default), applies environment overrides read
    /// through `env`, and validates the result, with `checks` of the subsystems' sections.
    pub fn load(
        path: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
        checks: &[SectionCheck],
    ) -> Result<Self, ConfigError> {
        let (origin, text, base) = match path {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                })?;
                let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
                (path.display().to_string(), text, base)
            }
            None => (
                "<embedded default>".to_string(),
                EMBEDDED_DEFAULT.to_string(),
                PathBuf::from("."),
            ),
        };
        Self::parse(&origin, &text, &base, env, checks)
    }

    /// Parses config text; `origin` names it in errors, `base` resolves relative file paths in
    /// it (such as `cassandra.cassandra_yaml`); `checks` check the subsystems' sections.
    pub fn parse(
        origin: &str,
        text: &str,
        base: &Path,
        env: impl Fn(&str) -> Option<String>,
        checks: &[SectionCheck],
    ) -> Result<Self, ConfigError> {
        // An empty file is a valid config that takes every default.
        let mut config: DaemonConfig = if text.trim().is_empty() {
            yaml_serde::from_str("{}")
        } else {
            yaml::from_str(text)
        }
        .map_err(|e| {
            let (message, line) = yaml::describe_error(&e);
            ConfigError::Invalid {
                origin: origin.to_string(),
                message,
                line,
            }
        })?;
        config.apply_env(env)?;
        let invalid = |(key, message): (String, String)| ConfigError::Invalid {
            origin: origin.to_string(),
            line: yaml::line_of(text, &key),
            message: format!("{key}: {message}"),
        };
        config
            .cassandra
            .resolve_from_cassandra_yaml(base)
            .map_err(invalid)?;
        config.auth.resolve(base).map_err(invalid)?;
        config.validate().map_err(invalid)?;
        for check in checks {
            check(&config).map_err(invalid)?;
        }
        Ok(config)
    }

    fn apply_env(&mut self, env: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        let bad = |var: &str, message: String| ConfigError::Invalid {
            origin: format!("environment variable {var}"),
            message,
            line: None,
        };
        if let Some(v) = env("DROVER_LISTEN") {
            self.server.listen =
                server::parse_socket_addr(&v).map_err(|m| bad("DROVER_LISTEN", m))?;
        }
        if let Some(v) = env("DROVER_STATE_DIR") {
            self.state_dir = PathBuf::from(v);
        }
        if let Some(v) = env("DROVER_LOG_FORMAT") {
            self.logging.format = v.parse().map_err(|m| bad("DROVER_LOG_FORMAT", m))?;
        }
        if let Some(v) = env("DROVER_LOG_LEVEL") {
            self.logging.level = v;
        }
        Ok(())
    }

    fn validate(&self) -> Result<(), (String, String)> {
        if self.state_dir.as_os_str().is_empty() {
            return Err(("state_dir".into(), "must not be empty".into()));
        }
        if self.server.request_body_limit.as_u64() == 0 {
            return Err((
                "server.request_body_limit".into(),
                "must be more than 0".into(),
            ));
        }
        if self.server.request_body_budget < self.server.request_body_limit {
            return Err((
                "server.request_body_budget".into(),
                format!(
                    "must be at least server.request_body_limit ({}), got {}",
                    self.server.request_body_limit, self.server.request_body_budget
                ),
            ));
        }
        for (key, value) in [
            ("server.request_timeout", self.server.request_timeout),
            ("server.shutdown_timeout", self.server.shutdown_timeout),
            (
                "jobs.progress_flush_interval",
                self.jobs.progress_flush_interval,
            ),
        ] {
            if value.is_zero() {
                return Err((key.into(), "must be more than 0s".into()));
            }
        }
        tracing_subscriber::EnvFilter::try_new(&self.logging.level).map_err(|e| {
            (
                "logging.level".to_string(),
                format!("invalid filter {:?}: {e}", self.logging.level),
            )
        })?;
        self.server.validate(self.auth.is_enabled())?;
        self.auth.validate()?;
        self.jobs.validate()?;
        self.cassandra.validate()?;
        self.sstable_uploads.validate()?;
        self.sstable_snapshots.validate()?;
        self.live_migration.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn parse(text: &str) -> Result<DaemonConfig, ConfigError> {
        DaemonConfig::parse("test.yaml", text, Path::new("."), no_env, &[])
    }

    #[test]
    fn embedded_default_parses() {
        let config = DaemonConfig::load(None, no_env, &[]).unwrap();
        assert_eq!(config.server.listen.to_string(), "127.0.0.1:9043");
        assert_eq!(config.state_dir, PathBuf::from("./drover-state"));
    }

    #[test]
    fn every_example_in_config_dir_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            // Daemon configs are named drover*.yaml; job files (later issues) have their own test.
            if name.starts_with("drover") && name.ends_with(".yaml") {
                DaemonConfig::load(Some(&path), no_env, &[])
                    .unwrap_or_else(|e| panic!("{name} does not parse: {e}"));
                seen += 1;
            }
        }
        assert!(
            seen >= 2,
            "expected the example daemon configs in {}",
            dir.display()
        );
    }

    #[test]
    fn bad_listen_address_names_key_value_and_line() {
        let err = parse("state_dir: /tmp/x\nserver:\n  listen: 127.0.0.1:99999\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "test.yaml: server.listen: invalid socket address \"127.0.0.1:99999\", expected IP:PORT such as 127.0.0.1:9043 (line 3)"
        );
    }

    #[test]
    fn keep_finished_has_defaults_and_refuses_zero() {
        let config = parse("state_dir: /tmp/x\n").unwrap();
        assert_eq!(config.jobs.keep_finished.count, Some(1000));
        assert!(config.jobs.keep_finished.age.is_some());
        let config =
            parse("state_dir: /tmp/x\njobs:\n  keep_finished:\n    count: null\n    age: 1h\n")
                .unwrap();
        assert_eq!(config.jobs.keep_finished.count, None);
        assert_eq!(
            config.jobs.keep_finished.age,
            Some(std::time::Duration::from_secs(3600))
        );
        let err = parse("state_dir: /tmp/x\njobs:\n  keep_finished:\n    count: 0\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("jobs.keep_finished.count: must be at least 1"),
            "{err}"
        );
        let err = parse("state_dir: /tmp/x\njobs:\n  keep_finished:\n    age: 0s\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("jobs.keep_finished.age: must be more than 0s"),
            "{err}"
        );
        let err = parse("state_dir: /tmp/x\njobs:\n  keep_finished:\n    cout: 3\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `cout`"), "{err}");
    }

    #[test]
    fn an_unprotected_listener_off_loopback_is_refused() {
        for listen in ["0.0.0.0:9043", "[::]:9043", "10.1.2.3:9043"] {
            let err = parse(&format!("server:\n  listen: \"{listen}\"\n"))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!(
                    "server.listen: {listen} is not a loopback address"
                )) && err.contains("without server.tls and authentication")
                    && err.ends_with("(line 2)"),
                "{err}"
            );
        }
        for listen in ["127.0.0.1:9043", "127.0.0.2:0", "[::1]:9043"] {
            parse(&format!("server:\n  listen: \"{listen}\"\n")).unwrap();
        }
        let tokens = "auth:\n  tokens: [{id: a, sha256: 0000000000000000000000000000000000000000000000000000000000000000}]\n";
        let tls = "  tls: {cert: c.pem, key: k.pem}\n";
        let err = parse(&format!("server:\n  listen: 0.0.0.0:1\n{tokens}"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("without server.tls anyone"), "{err}");
        let err = parse(&format!("server:\n  listen: 0.0.0.0:1\n{tls}"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("without authentication"), "{err}");
        parse(&format!("server:\n  listen: 0.0.0.0:1\n{tls}{tokens}")).unwrap();
        parse("server:\n  listen: 0.0.0.0:1\n  insecure: true\n").unwrap();
        // The environment's address is checked too.
        let env = |k: &str| (k == "DROVER_LISTEN").then(|| "0.0.0.0:9043".to_string());
        assert!(DaemonConfig::parse("t", "", Path::new("."), env, &[]).is_err());
    }

    #[test]
    fn tls_keys_are_checked() {
        let err = parse("server:\n  tls: {cert: c.pem, key: k.pem, client_auth: optional}\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("server.tls.client_auth: needs server.tls.client_ca"),
            "{err}"
        );
        let err = parse("server:\n  tls: {cert: c.pem}\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing field `key`"), "{err}");
        let err = parse("live_migration:\n  peer_tls: {ca: ca.pem, cert: c.pem}\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("live_migration.peer_tls: cert and key go together"),
            "{err}"
        );
        let config =
            parse("server:\n  tls: {cert: c.pem, key: k.pem, client_ca: ca.pem}\n").unwrap();
        let tls = config.server.tls.unwrap();
        assert_eq!(tls.client_auth, ClientAuth::Required);
        assert_eq!(tls.handshake_timeout, std::time::Duration::from_secs(10));
    }

    #[test]
    fn unknown_key_is_refused_with_its_path() {
        let err = parse("server:\n  listne: 127.0.0.1:1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("server: unknown field `listne`"), "{err}");
        assert!(err.ends_with("(line 2)"), "{err}");
    }

    #[test]
    fn bad_duration_and_size_are_refused() {
        let err = parse("server:\n  request_timeout: soon\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("server.request_timeout"), "{err}");
        let err = parse("server:\n  request_body_limit: lots\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("server.request_body_limit"), "{err}");
        let err = parse("server:\n  shutdown_timeout: 0s\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("server.shutdown_timeout: must be more than 0s (line 2)"),
            "{err}"
        );
    }

    #[test]
    fn env_overrides_win_and_are_checked() {
        let env = |k: &str| match k {
            "DROVER_LISTEN" => Some("127.0.0.1:0".to_string()),
            "DROVER_STATE_DIR" => Some("/var/lib/drover".to_string()),
            "DROVER_LOG_FORMAT" => Some("json".to_string()),
            _ => None,
        };
        let config = DaemonConfig::parse(
            "t",
            "server:\n  listen: 127.0.0.1:5\n",
            Path::new("."),
            env,
            &[],
        )
        .unwrap();
        assert_eq!(config.server.listen.port(), 0);
        assert_eq!(config.state_dir, PathBuf::from("/var/lib/drover"));
        assert_eq!(config.logging.format, LogFormat::Json);

        let env = |k: &str| (k == "DROVER_LOG_FORMAT").then(|| "xml".to_string());
        let err = DaemonConfig::parse("t", "", Path::new("."), env, &[]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("environment variable DROVER_LOG_FORMAT: unknown log format \"xml\""),
            "{err}"
        );
    }

    #[test]
    fn directories_come_from_cassandra_yaml_unless_set() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cassandra.yaml"),
            "cluster_name: x\ndata_file_directories:\n  - /d1\n  - /d2\ncommitlog_directory: /cl\nhints_directory: /h\nrpc_address: 127.0.0.2\nnative_transport_port: 9142\nsome_other_key: {a: 1}\n",
        )
        .unwrap();
        let text = "cassandra:\n  cassandra_yaml: cassandra.yaml\n  hints_directory: /mine\n";
        let config = DaemonConfig::parse("t", text, dir.path(), no_env, &[]).unwrap();
        let c = &config.cassandra;
        assert_eq!(
            c.data_file_directories,
            vec![PathBuf::from("/d1"), PathBuf::from("/d2")]
        );
        assert_eq!(c.commitlog_directory, Some(PathBuf::from("/cl")));
        assert_eq!(c.hints_directory, Some(PathBuf::from("/mine")));
        assert_eq!(c.native_address(), "127.0.0.2:9142");
    }

    #[test]
    fn missing_cassandra_yaml_is_reported_at_its_key() {
        let text = "state_dir: x\ncassandra:\n  cassandra_yaml: /nonexistent/cassandra.yaml\n";
        let err = parse(text).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "test.yaml: cassandra.cassandra_yaml: cannot read /nonexistent/cassandra.yaml"
            ),
            "{err}"
        );
        assert!(err.ends_with("(line 3)"), "{err}");
    }

    #[test]
    fn bad_native_address_and_lonely_password() {
        let err = parse("cassandra:\n  native_address: nohost\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cassandra.native_address: invalid address \"nohost\""),
            "{err}"
        );
        let err = parse("cassandra:\n  password: x\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cassandra.password: a password needs cassandra.username"),
            "{err}"
        );
        assert!(
            !err.contains(": x"),
            "the password must not be echoed: {err}"
        );
    }
}
