//! Migration jobs: copy a table from a source to a target, in units of work whose completion
//! can be recorded (the savepoint mechanism builds on that).

pub mod config;
pub mod engine;
pub mod error;
pub mod estimate;
pub mod job;
pub mod kind;
pub mod place;
pub mod saved;

pub use error::EngineError;
