//! Log output.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::{LogFormat, LoggingConfig};

/// Installs the global log subscriber: to stderr, human or JSON lines, filtered by `RUST_LOG`
/// when set, else by `logging.level` (validated when the config was loaded).
pub fn init(config: &LoggingConfig) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&config.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // try_init: a second call (tests running several commands in one process) is harmless.
    let _ = match config.format {
        // Colour codes are noise in a file or a journal; only a terminal shows them as colour.
        LogFormat::Human => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
}
