//! The `drover` command line. Everything it runs lives in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};
use drover::client::{Action, Output, SubmitKind};
use drover::config::DaemonConfig;

// glibc's malloc took a fifth of a bulk copy's CPU (perf, 1M rows): the SSTable reader and
// writer allocate per cell on many threads. jemalloc's thread caches cut drover's CPU by a
// third on that copy and its peak RSS too (mimalloc cut the CPU as much but doubled the RSS).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// drover moves data for Cassandra/ScyllaDB and DynamoDB operators: resumable migration jobs
/// and live instance migration, driven over a REST API.
#[derive(Parser)]
#[command(
    name = "drover",
    version,
    about,
    long_about = None,
    propagate_version = true,
    after_help = drover::client::EXIT_CODES
)]
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
    /// 2 when the job file or the schemas are invalid or its savepoint already covers
    /// everything, 130 when stopped by Ctrl-C.
    ///
    /// The job file is ScyllaDB Migrator's config.yaml format; see config/job-cql.yaml.
    Migrate {
        /// Job config file (YAML).
        #[arg(long, short, value_name = "PATH")]
        config: PathBuf,
    },
    /// Compare a migration's target with its source and exit: 0 when they hold the same rows,
    /// 5 when rows differ (the report says which), 1 when the validation failed, 2 when the
    /// job file or the schemas are invalid, 130 when stopped by Ctrl-C.
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
    /// List the jobs of a running daemon, newest last.
    Jobs {
        #[command(flatten)]
        server: ServerArgs,
        /// Only jobs in this state (QUEUED, RUNNING, SUCCEEDED, DIFFERENCES_FOUND, FAILED,
        /// CANCELLED, INTERRUPTED).
        #[arg(long)]
        state: Option<String>,
        /// Only jobs of this kind (migration, validation, data-copy-task, ...).
        #[arg(long)]
        kind: Option<String>,
        /// Output format.
        #[arg(long, short, value_enum, default_value = "table")]
        output: Output,
    },
    /// Show one job; with --follow, a progress bar until it ends, then exit with its outcome:
    /// 0 succeeded, 1 failed, 3 cancelled, 4 interrupted, 5 a validation found differences
    /// (DIFFERENCES_FOUND), 2 the daemon refused or could not be reached.
    Job {
        #[command(flatten)]
        server: ServerArgs,
        /// Job id, or a prefix of exactly one (the console shows ids shortened).
        id: String,
        /// Follow the job's progress stream until it ends.
        #[arg(long, short)]
        follow: bool,
        /// Output format.
        #[arg(long, short, value_enum, default_value = "table")]
        output: Output,
    },
    /// Submit a job file (ScyllaDB Migrator's format) to a running daemon and print the new
    /// job's id; with --follow, follow it as `drover job --follow` does.
    Submit {
        #[command(flatten)]
        server: ServerArgs,
        /// Job file (YAML).
        file: PathBuf,
        /// What the file starts: a migration, or a validation of a migration's target.
        #[arg(long, value_enum, default_value = "migration")]
        kind: SubmitKind,
        /// Follow the job's progress until it ends, and exit with its outcome.
        #[arg(long, short)]
        follow: bool,
        /// Output format.
        #[arg(long, short, value_enum, default_value = "table")]
        output: Output,
    },
    /// Ask a queued or running job to stop; it checkpoints and ends CANCELLED.
    Cancel {
        #[command(flatten)]
        server: ServerArgs,
        /// Job id, or a prefix of exactly one (the console shows ids shortened).
        id: String,
    },
    /// Resume an INTERRUPTED or CANCELLED migration, under its id, from its newest savepoint.
    Resume {
        #[command(flatten)]
        server: ServerArgs,
        /// Job id, or a prefix of exactly one (the console shows ids shortened).
        id: String,
    },
    /// Forget a job that has ended (its savepoints stay).
    Delete {
        #[command(flatten)]
        server: ServerArgs,
        /// Job id, or a prefix of exactly one (the console shows ids shortened).
        id: String,
    },
    /// Validations of a running daemon.
    Validations {
        #[command(subcommand)]
        command: ValidationsCommand,
    },
    /// Live instance migration on a running daemon (the destination's for copy and verify).
    LiveMigration {
        #[command(subcommand)]
        command: LiveMigrationCommand,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish or powershell) to stdout.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print a manual page (roff) to stdout: `drover man | man -l -` for drover(1),
    /// `drover man submit` for drover-submit(1), `drover man live-migration copy` for
    /// drover-live-migration-copy(1).
    Man {
        /// The command whose page to print; drover(1) when none.
        command: Vec<String>,
    },
}

/// How to reach a running daemon.
#[derive(Args, Debug, Clone)]
struct ServerArgs {
    /// The daemon's URL.
    #[arg(long, env = "DROVER_SERVER", default_value = "http://127.0.0.1:9043")]
    server: String,
    /// A bearer token (of auth.tokens, or a JWT). Prefer the environment or --token-file:
    /// a command line is visible to other users of the machine.
    #[arg(long, env = "DROVER_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A file holding the bearer token.
    #[arg(long, env = "DROVER_TOKEN_FILE", value_name = "PATH")]
    token_file: Option<PathBuf>,
    /// CA certificates (PEM) to trust for an https server; the system's otherwise.
    #[arg(long, env = "DROVER_CA_CERT", value_name = "PATH")]
    ca_cert: Option<PathBuf>,
}

impl ServerArgs {
    fn target(&self) -> drover::client::Target {
        drover::client::Target {
            server: self.server.clone(),
            token: self.token.clone().map(secrecy::SecretString::from),
            token_file: self.token_file.clone(),
            ca_cert: self.ca_cert.clone(),
        }
    }
}

#[derive(Subcommand)]
enum ValidationsCommand {
    /// List validations.
    List {
        #[command(flatten)]
        server: ServerArgs,
        /// Output format.
        #[arg(long, short, value_enum, default_value = "table")]
        output: Output,
    },
    /// Print a validation's report (its findings so far while it runs); exit 5 when rows
    /// differ.
    Report {
        #[command(flatten)]
        server: ServerArgs,
        /// Validation job id, or a prefix of exactly one.
        id: String,
        /// Output format (table prints the report as text).
        #[arg(long, short, value_enum, default_value = "table")]
        output: Output,
    },
}

#[derive(Subcommand)]
enum LiveMigrationCommand {
    /// Start a data-copy task on the destination daemon (Sidecar's POST data-copy-tasks).
    Copy {
        #[command(flatten)]
        server: ServerArgs,
        /// Most downloading iterations.
        #[arg(long, default_value_t = 3)]
        max_iterations: u32,
        /// Share (0 to 1) of the source's bytes already identical here for an iteration to
        /// succeed; 1 for the final copy after the source node stopped.
        #[arg(long, default_value_t = 0.95)]
        success_threshold: f64,
        /// Files downloaded at once.
        #[arg(long, default_value_t = 8)]
        max_concurrency: u32,
        /// Check each download against the source's digest, computed while streaming, and
        /// compare files already in place by content (use it for the final pass).
        #[arg(long, value_name = "ALGO", value_parser = ["none", "sha256", "xxh3"])]
        verify_digest: Option<String>,
        /// Most bytes per second the task downloads, all files together (`50MiB`, `100MB`,
        /// `1000000`); no limit without it.
        #[arg(long, value_name = "SIZE")]
        max_bytes_per_second: Option<bytesize::ByteSize>,
        /// Follow the task until it ends, and exit with its outcome.
        #[arg(long, short)]
        follow: bool,
        /// Output format.
        #[arg(long, short, value_enum, default_value = "table")]
        output: Output,
    },
    /// Start a files-verification task: compare every file here with the source's.
    Verify {
        #[command(flatten)]
        server: ServerArgs,
        /// Files hashed at once on each side.
        #[arg(long, default_value_t = 4)]
        max_concurrency: u32,
        /// MD5, XXHash32, sha256 or xxh3.
        #[arg(long, default_value = "xxh3")]
        digest_algorithm: String,
        /// Follow the task until it ends, and exit with its outcome.
        #[arg(long, short)]
        follow: bool,
        /// Output format.
        #[arg(long, short, value_enum, default_value = "table")]
        output: Output,
    },
    /// This node's role, peer, routes switch and migration status, and its tasks with their
    /// iterations, bytes, rate and ETA (in words; -o json|yaml for machines).
    Status {
        #[command(flatten)]
        server: ServerArgs,
        /// Output format.
        #[arg(long, short, value_enum, default_value = "table")]
        output: Output,
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
const EXIT_CONFIG: u8 = drover::client::EXIT_ERROR;

fn load_config(path: Option<&std::path::Path>) -> Result<DaemonConfig, ExitCode> {
    DaemonConfig::load(
        path,
        |name| std::env::var(name).ok(),
        drover::daemon::SECTION_CHECKS,
    )
    .map_err(|e| {
        drover::errln!("drover: invalid configuration: {e}");
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
    drover::errln!("drover: warning: cannot restart with MALLOC_ARENA_MAX=2 ({error}); going on");
}

/// Runs a client command on a small runtime of its own.
fn client<F: std::future::Future<Output = u8>>(run: F) -> ExitCode {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => ExitCode::from(rt.block_on(run)),
        Err(e) => {
            drover::errln!("drover: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Jobs {
            server,
            state,
            kind,
            output,
        } => client(drover::client::jobs(
            &server.target(),
            state.as_deref(),
            kind.as_deref(),
            output,
        )),
        Command::Job {
            server,
            id,
            follow,
            output,
        } => client(drover::client::job(&server.target(), &id, follow, output)),
        Command::Submit {
            server,
            file,
            kind,
            follow,
            output,
        } => client(drover::client::submit(
            &server.target(),
            &file,
            kind,
            follow,
            output,
        )),
        Command::Cancel { server, id } => {
            client(drover::client::act(&server.target(), &id, Action::Cancel))
        }
        Command::Resume { server, id } => {
            client(drover::client::act(&server.target(), &id, Action::Resume))
        }
        Command::Delete { server, id } => {
            client(drover::client::act(&server.target(), &id, Action::Delete))
        }
        Command::Validations {
            command: ValidationsCommand::List { server, output },
        } => client(drover::client::jobs(
            &server.target(),
            None,
            Some("validation"),
            output,
        )),
        Command::Validations {
            command: ValidationsCommand::Report { server, id, output },
        } => client(drover::client::validation_report(
            &server.target(),
            &id,
            output,
        )),
        Command::LiveMigration { command } => match command {
            LiveMigrationCommand::Copy {
                server,
                max_iterations,
                success_threshold,
                max_concurrency,
                verify_digest,
                max_bytes_per_second,
                follow,
                output,
            } => {
                let mut request = serde_json::json!({
                    "maxIterations": max_iterations,
                    "successThreshold": success_threshold,
                    "maxConcurrency": max_concurrency,
                });
                // drover's fields only when asked: a request without them is the Sidecar's.
                if let Some(algo) = verify_digest {
                    request["verifyDigest"] = algo.into();
                }
                if let Some(rate) = max_bytes_per_second {
                    request["maxBytesPerSecond"] = rate.as_u64().into();
                }
                client(drover::client::live_copy(
                    &server.target(),
                    request,
                    follow,
                    output,
                ))
            }
            LiveMigrationCommand::Verify {
                server,
                max_concurrency,
                digest_algorithm,
                follow,
                output,
            } => client(drover::client::live_verify(
                &server.target(),
                serde_json::json!({
                    "maxConcurrency": max_concurrency,
                    "digestAlgorithm": digest_algorithm,
                }),
                follow,
                output,
            )),
            LiveMigrationCommand::Status { server, output } => {
                client(drover::client::live_status(&server.target(), output))
            }
        },
        Command::Completions { shell } => {
            // Rendered first: clap_complete panics on a write error, e.g. a closed pipe.
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "drover", &mut out);
            drover::out::stdout_bytes(&out);
            ExitCode::SUCCESS
        }
        Command::Man { command } => {
            // drover(1) lists its commands as drover-<command>(1); each is the page of that
            // subcommand, named the way the list names it.
            // Built, so that the `help` commands drover(1) lists are there to be found too.
            let mut page = Cli::command();
            page.build();
            let mut name = String::from("drover");
            let mut usage = String::from("drover");
            for word in &command {
                let Some(sub) = page.find_subcommand(word).cloned() else {
                    drover::errln!(
                        "drover: no manual page {name}-{word}: `{name} --help` lists the commands"
                    );
                    return ExitCode::from(drover::client::EXIT_ERROR);
                };
                name = format!("{name}-{}", sub.get_name());
                usage = format!("{usage} {}", sub.get_name());
                page = sub.name(name.clone()).bin_name(usage.clone());
            }
            let mut out = Vec::new();
            match clap_mangen::Man::new(page).render(&mut out) {
                Ok(()) => {
                    drover::out::stdout_bytes(&out);
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    drover::errln!("drover: cannot render the manual page: {e}");
                    ExitCode::FAILURE
                }
            }
        }
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
                    drover::errln!("drover: cannot start the async runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            match runtime.block_on(drover::daemon::serve(config)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %e, "drover stopped with an error");
                    if e.exit_code() == 2 {
                        drover::errln!("drover: invalid configuration: {e}");
                    } else {
                        drover::errln!("drover: {e}");
                    }
                    ExitCode::from(e.exit_code())
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
                    drover::errln!("drover: cannot start the async runtime: {e}");
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
                    drover::errln!("drover: cannot start the async runtime: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::CheckConfig { config } => match load_config(config.as_deref()) {
            Ok(config) => {
                let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
                if let Err(e) = drover::daemon::check_tls_files(&config) {
                    drover::errln!("drover: invalid configuration: {e}");
                    return ExitCode::from(2);
                }
                drover::outln!(
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
                drover::outln!(
                    "{}",
                    serde_json::to_string_pretty(&doc).expect("the OpenAPI document serializes")
                );
            } else {
                drover::out!("{}", drover::api::openapi_yaml());
            }
            ExitCode::SUCCESS
        }
    }
}
