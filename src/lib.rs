//! drover: a daemon that moves data for Cassandra/ScyllaDB and DynamoDB operators.
//!
//! The library holds everything; `main.rs` only parses the command line. Only `api` knows
//! HTTP; everything else is engine, testable without a server:
//!
//! - [`auth`]: identities (tokens, JWTs, client certificates) and roles, checked at the edge.
//! - [`api`]: the HTTP edge — one route table, handlers that only translate, the one error
//!   shape, middleware.
//! - [`jobs`]: the job framework — registry, lifecycle, persistence, cancellation, retention,
//!   and what a job kind is ([`jobs::kind`]).
//! - [`kinds`]: the one list of the kinds this daemon runs (above the engines implementing them).
//! - [`migrate`]: the migration engine — plans units of work and drives them through the
//!   connectors with bounded concurrency, retries and savepoints.
//! - [`connectors`]: one module per data system (scan, write, schema checks, job-file sections).
//! - [`validate`]: the validator — compares a migration's target with its source.
//! - [`uploads`]: SSTable uploads and their import into the local node (Sidecar's bulk-load
//!   routes, without HTTP).
//! - [`snapshots`]: snapshots of the local node's tables and their files (Sidecar's snapshot
//!   routes, without HTTP), for a bulk reader.
//! - [`livemigration`]: live instance migration — file listing and serving, data-copy and
//!   verification tasks (Cassandra Sidecar's API).
//! - [`savepoints`]: the progress model and its savepoint files.
//! - [`jobfile`]: the job-file format (ScyllaDB Migrator's), shared by every connector.
//! - [`diagnostics`]: jobs that touch no data, to check a deployment's job lifecycle.
//! - [`config`], [`daemon`], [`cli`], [`cassandra`] (the local node), [`metrics`],
//!   [`telemetry`], [`tls`], [`fsutil`], [`out`] (the command line's printing): the daemon
//!   around them; [`answer`]: every body read
//!   off the network, read within a bound.

pub mod answer;
pub mod api;
pub mod auth;
pub mod aws;
pub mod cassandra;
pub mod cli;
pub mod client;
pub mod config;
pub mod connectors;
pub mod daemon;
pub mod diagnostics;
pub mod engine;
pub mod fsutil;
#[doc(hidden)]
pub mod fuzzing;
pub mod jobfile;
pub mod jobs;
pub mod kinds;
pub mod livemigration;
pub mod metrics;
pub mod migrate;
pub mod out;
pub mod s3;
pub mod savepoints;
pub mod snapshots;
pub mod telemetry;
pub mod tls;
pub mod uploads;
pub mod validate;
