//! `logging`: where and how the daemon logs.

use serde::Deserialize;

/// Log output settings. Logs go to stderr; access logs are part of them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoggingConfig {
    /// `human` (one readable line per event) or `json` (one JSON object per line, for log
    /// shippers). Default `human`.
    pub format: LogFormat,
    /// A tracing filter such as `info` or `info,drover=debug,scylla=warn`. `RUST_LOG`, when set,
    /// wins. Default `info,scylla=warn` (the CQL driver reports every connection at info).
    pub level: String,
}

impl Default for LoggingConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::Human,
            level: "info,scylla=warn".to_string(),
        }
    }
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Readable single lines.
    Human,
    /// One JSON object per line.
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "human" => Ok(Self::Human),
            "json" => Ok(Self::Json),
            other => Err(format!(
                "unknown log format {other:?}, expected human or json"
            )),
        }
    }
}
