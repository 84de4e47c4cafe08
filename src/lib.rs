//! drover: a daemon that moves data for Cassandra/ScyllaDB and DynamoDB operators.
//!
//! The library holds everything; `main.rs` only parses the command line. The engine modules
//! (`jobs`, `cassandra`) know nothing about HTTP; `api` translates between them and the wire.

pub mod api;
pub mod cassandra;
pub mod cli;
pub mod config;
pub mod connectors;
pub mod daemon;
pub mod fsutil;
pub mod jobfile;
pub mod jobs;
pub mod livemigration;
pub mod metrics;
pub mod migrate;
pub mod savepoints;
pub mod telemetry;
pub mod validate;
