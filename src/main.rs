//! The `drover` command line. Everything it runs lives in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use drover::config::DaemonConfig;

/// drover moves data for Cassandra/ScyllaDB and DynamoDB operators: resumable migration jobs
/// and live instance migration, driven over a REST API.
#[derive(Parser)]
#[command(name = "drover", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon: serve the REST API and run jobs until SIGTERM/SIGINT.
    ///
    /// Without --config the embedded default is used (listen on 127.0.0.1:9043, state in
    /// ./drover-state). DROVER_LISTEN, DROVER_STATE_DIR, DROVER_LOG_FORMAT and
    /// DROVER_LOG_LEVEL override the config. Exit code 2 means the config was refused.
    Serve {
        /// Daemon config file (YAML); see config/drover.full.yaml for every key.
        #[arg(long, short, value_name = "PATH")]
        config: Option<PathBuf>,
    },
    /// Run a migration job in the foreground and exit: 0 when complete, 1 when it failed,
    /// 2 when the job file or the schemas are invalid, 130 when stopped by Ctrl-C.
    ///
    /// The job file is ScyllaDB Migrator's config.yaml format; see config/job-cql.yaml.
    Migrate {
        /// Job config file (YAML).
        #[arg(long, short, value_name = "PATH")]
        config: PathBuf,
    },
    /// Compare a migration's target with its source and exit: 0 when they hold the same rows,
    /// 1 when rows differ (the report says which), 2 when the validation could not run,
    /// 130 when stopped by Ctrl-C.
    ///
    /// Takes the migration's job file; its `validation` section tunes the comparison.
    Validate {
        /// Job config file (YAML).
        #[arg(long, short, value_name = "PATH")]
        config: PathBuf,
        /// Print the report as JSON (as the API serves it).
        #[arg(long)]
        json: bool,
    },
    /// Check a daemon config file and exit: 0 when valid, 2 with the reason when not.
    CheckConfig {
        /// Daemon config file (YAML). Without it, the embedded default is checked.
        #[arg(long, short, value_name = "PATH")]
        config: Option<PathBuf>,
    },
    /// Credentials of the API.
    Auth {
        #[command(subcommand)]
        command: AuthCommand,
    },
    /// Print the OpenAPI document of the REST API (YAML, as in openapi/drover.yaml).
    Openapi {
        /// Print JSON instead of YAML.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum AuthCommand {
    /// Print the SHA-256 of a bearer token read from stdin (or of a new random token with
    /// --generate, printed this once) and the auth.tokens entry that accepts it.
    HashToken {
        /// Make a new random token (256 bits, hex) instead of reading one from stdin.
        #[arg(long)]
        generate: bool,
        /// The identity the entry gives the token's holder.
        #[arg(long, default_value = "my-client")]
        id: String,
        /// Roles of the entry: reader, operator, peer, admin.
        #[arg(long, value_delimiter = ',', value_name = "ROLE,...")]
        roles: Vec<String>,
    },
}

/// Exit code of a refused configuration, distinct from runtime failures (1).
const EXIT_CONFIG: u8 = 2;

fn load_config(path: Option<&std::path::Path>) -> Result<DaemonConfig, ExitCode> {
    DaemonConfig::load(path, |name| std::env::var(name).ok()).map_err(|e| {
        eprintln!("drover: invalid configuration: {e}");
        ExitCode::from(EXIT_CONFIG)
    })
}

/// glibc's malloc gives each thread that allocates an arena of its own (up to 8 per core)
/// and keeps what is freed there: under the blocking pool's threads (file writes, hashing) the
/// daemon's resident size grew by ~15-20 MB with every live-migration pass (70, 90, 98 MB over
/// three passes of the benchmark's tree; 55, 59, 60 MB with two arenas; mimalloc and jemalloc
/// measured worse, see docs/live-migration.md). The limit must be set before the allocator
/// starts, so the daemon executes itself again, once, with `MALLOC_ARENA_MAX=2`, unless the
/// variable is set already (an operator's value wins). Same process id; if the new image
/// cannot be executed, the daemon goes on as it is.
fn with_few_malloc_arenas() {
    use std::os::unix::process::CommandExt;
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let error = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env("MALLOC_ARENA_MAX", "2")
        .exec();
    eprintln!("drover: warning: cannot restart with MALLOC_ARENA_MAX=2 ({error}); going on");
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve { config } => {
            with_few_malloc_arenas();
            let config = match load_config(config.as_deref()) {
                Ok(config) => config,
                Err(code) => return code,
            };
            drover::telemetry::init(&config.logging);
            // Both the scylla driver and any later TLS client use this provider; installing it
            // explicitly avoids a panic when more than one provider is compiled in.
            let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
            let runtime = match tokio::runtime::Runtime::new() {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("drover: cannot start the async runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            match runtime.block_on(drover::daemon::serve(config)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %e, "drover stopped with an error");
                    eprintln!("drover: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Migrate { config } => {
            drover::telemetry::init(&drover::config::LoggingConfig {
                level: "warn".to_string(),
                ..Default::default()
            });
            let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
            match tokio::runtime::Runtime::new() {
                Ok(rt) => ExitCode::from(rt.block_on(drover::cli::migrate(&config))),
                Err(e) => {
                    eprintln!("drover: cannot start the async runtime: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Validate { config, json } => {
            drover::telemetry::init(&drover::config::LoggingConfig {
                level: "warn".to_string(),
                ..Default::default()
            });
            let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
            match tokio::runtime::Runtime::new() {
                Ok(rt) => ExitCode::from(rt.block_on(drover::cli::validate(&config, json))),
                Err(e) => {
                    eprintln!("drover: cannot start the async runtime: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::CheckConfig { config } => match load_config(config.as_deref()) {
            Ok(config) => {
                println!(
                    "config OK: listen {}, state_dir {}, cassandra {}",
                    config.server.listen,
                    config.state_dir.display(),
                    config.cassandra.native_address()
                );
                ExitCode::SUCCESS
            }
            Err(code) => code,
        },
        Command::Auth {
            command:
                AuthCommand::HashToken {
                    generate,
                    id,
                    roles,
                },
        } => ExitCode::from(drover::cli::hash_token(generate, &id, &roles)),
        Command::Openapi { json } => {
            if json {
                let doc = drover::api::openapi();
                println!(
                    "{}",
                    serde_json::to_string_pretty(&doc).expect("the OpenAPI document serializes")
                );
            } else {
                print!("{}", drover::api::openapi_yaml());
            }
            ExitCode::SUCCESS
        }
    }
}
