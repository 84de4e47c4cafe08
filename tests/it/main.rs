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
mod csv;
mod daemon;
mod deploy;
mod docs;
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
mod identity;
mod jobs;
mod limits;
mod live_migration;
mod live_migration_fast;
mod live_migration_hostile;
mod live_migration_source;
mod live_migration_view;
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
mod ring_move;
mod ring_topology;
mod rings;
mod router;
mod s3export;
mod savepoint_places;
mod schema_problems;
mod schemathesis;
mod secrets;
mod security;
mod sidecar_metadata;
mod sidecar_procedure;
mod sstable_uploads;
mod tls;
mod uploads_hostile;
mod validations;

/// The scenarios on the three-node rings (`rings`, `ring_move`), one after another in one test.
/// They stop and move the rings' nodes, so they cannot overlap; as separate tests, the ones
/// waiting their turn held test threads (as many as the machine has cores, two here) that the
/// rest of the suite could have used. `scripts/test` runs this test on its own after the
/// others (`--skip a_three_node_rings`, then `--exact a_three_node_rings`): the rings' six
/// JVMs beside the rest of the suite starved both on two cores.
#[tokio::test]
async fn a_three_node_rings() {
    rings::scenarios().await;
}
