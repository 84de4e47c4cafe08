//! Integration tests: the real `drover` binary, real HTTP, and the real Cassandra of
//! `scripts/testenv`; and the router in process (`router`) for what the API answers that needs
//! no daemon. One binary, so the crate is linked once; what it shares with `tests/faults` is
//! in the `test-support` crate.

mod api_errors;
mod auth;
mod bounds;
mod bulk_read;
mod bulk_write;
mod cli;
mod client;
mod console;
mod coordination;
mod copy_semantics;
mod copy_twice;
mod daemon;
mod deploy;
mod dynamodb_migrator;
mod dynamodb_stream;
mod dynamodb_tables;
mod dynamodb_types;
mod dynamodb_validations;
mod events;
mod fidelity;
mod fidelity_dynamodb;
mod fidelity_mysql;
mod health;
mod hostile;
mod hostile_jobs;
mod jobs;
mod limits;
mod live_migration;
mod live_migration_fast;
mod live_migration_hostile;
mod live_migration_source;
mod metrics;
mod migrations;
mod migrator_cql;
mod mysql;
mod openapi;
mod operator_cli;
mod parquet;
mod parquet_migrator;
mod progress;
mod resume;
mod router;
mod s3export;
mod savepoint_places;
mod schemathesis;
mod secrets;
mod security;
mod sidecar_procedure;
mod sstable_uploads;
mod tls;
mod uploads_hostile;
mod validations;
