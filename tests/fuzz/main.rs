//! Fuzz targets of the parsers that read untrusted input (issue 42): the job-file parser
//! (`job_file`), the `Range` header parser (`range`), the listing reader of a destination
//! (`listing`, with the batch frame reader in `frames`) and its digest reader (`digest`).
//!
//! Each target is a proptest strategy of hostile inputs — mutations of real inputs, generated
//! structures, random bytes — and properties beyond "no panic": a bounded time per input,
//! clipped errors, what an accepted value promises, and round trips where drover writes the
//! format too. `cargo test --test fuzz` runs each for a few hundred cases (seconds);
//! `bench/fuzz/run` runs each for minutes (`DROVER_FUZZ_SECONDS`) and records the figures.
//! Inputs that found a bug are kept in `regressions`.
//!
//! Why proptest and not cargo-fuzz: cargo-fuzz needs a nightly compiler and an instrumented
//! build of the whole dependency tree (the AWS SDKs, scylla, arrow, parquet), which this
//! project's machines cannot afford per run; the parsers are pure functions, so a generator
//! that knows their formats reaches their branches without coverage feedback.

mod digest;
mod driver;
mod frames;
mod job_file;
mod listing;
mod range;
mod regressions;
