//! The engine: drives a connector's units through the seam (how many at once, rate limits,
//! requests in flight, retries, counters, the record of completed units that savepoints
//! store), for migrations and validations alike. It knows no HTTP and no job kind; what it
//! knows of data systems it reaches through `connectors` (the seam, and the pairs
//! [`driver::Migration::prepare`] opens).

pub mod config;
pub mod driver;
pub mod error;
pub mod estimate;
pub mod job_file;
pub mod place;

pub use error::EngineError;

/// Why a job file is launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// A new submission, to the daemon or the foreground `drover migrate`: refused when its
    /// savepoint already covers everything ([`EngineError::AlreadyDone`]), since it would copy
    /// nothing and still succeed.
    New,
    /// A resume of a job that was interrupted or cancelled: whatever is left is done, nothing
    /// when its last run had finished the copy.
    Resume,
}
