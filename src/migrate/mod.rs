//! Migration jobs: copy a table from a source to a target, in units of work whose completion
//! can be recorded (the savepoint mechanism builds on that). The engine that drives the units
//! is `crate::engine`; this is the job kind around it.

pub mod job;
pub mod kind;
pub mod saved;
