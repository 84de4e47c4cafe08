//! What drover's integration-test binaries (`tests/it`, `tests/faults`) share: the real
//! `drover` binary started as a daemon, the real test clusters, the daemon's router in this
//! process, and the one way to wait for something.

pub mod app;
pub mod cql;
mod daemon;
pub mod dynamodb;
mod poll;

pub use app::App;
pub use daemon::{
    Daemon, Home, cassandra_src, drover_bin, ended, error_message, http_client, json_of,
    listener_pid,
};
pub use poll::{poll, wait_until};
