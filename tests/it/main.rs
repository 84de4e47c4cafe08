//! Integration tests: the real `drover` binary, real HTTP, and the real Cassandra of
//! `scripts/testenv`. One binary, so the crate is linked once.

mod api_errors;
mod cli;
mod copy_semantics;
mod cql;
mod daemon;
mod health;
mod jobs;
mod live_migration;
mod migrations;
mod openapi;
mod resume;
mod support;
mod validations;
