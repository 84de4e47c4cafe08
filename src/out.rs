//! Printing for the command line. A reader that goes away (`drover jobs -o yaml | head`) ends
//! the command quietly with the status a shell reports for a Unix tool killed by SIGPIPE, where
//! `println!` would panic (`failed printing to stdout: Broken pipe`, exit 101). The daemon
//! keeps Rust's ignored SIGPIPE (it must survive a peer that closes a socket), so the command
//! line handles the closed pipe as an error instead of restoring the signal.

use std::io::Write;

/// The exit status of a command whose output's reader has gone: 128 + SIGPIPE (13), what a
/// shell shows for `yes | head`'s `yes`.
pub const EXIT_PIPE_CLOSED: i32 = 141;

/// Writes to stdout; see [`outln!`](crate::outln).
pub fn stdout(args: std::fmt::Arguments<'_>) {
    write(&mut std::io::stdout().lock(), args);
}

/// Writes to stderr; see [`errln!`](crate::errln).
pub fn stderr(args: std::fmt::Arguments<'_>) {
    write(&mut std::io::stderr().lock(), args);
}

/// Writes raw bytes to stdout (a rendered manual page, completions).
pub fn stdout_bytes(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        gone(&e);
    }
}

fn write(w: &mut impl Write, args: std::fmt::Arguments<'_>) {
    // Flushed at once: stdout is line-buffered, and the last partial line of a closed pipe
    // must fail here, not in the flush at exit.
    if let Err(e) = w.write_fmt(args).and_then(|()| w.flush()) {
        gone(&e);
    }
}

fn gone(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(EXIT_PIPE_CLOSED);
    }
    // Any other failure (a full disk behind a redirect): the output is incomplete, so the
    // command must not look successful. Telling it may fail too; nothing more can be done.
    let _ = writeln!(std::io::stderr(), "drover: cannot write the output: {e}");
    std::process::exit(1);
}

/// `print!` that ends the command quietly when its reader has gone.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::out::stdout(format_args!($($arg)*)) };
}

/// `println!` that ends the command quietly when its reader has gone.
#[macro_export]
macro_rules! outln {
    () => { $crate::out::stdout(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::out::stdout(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprint!` that ends the command quietly when its reader has gone.
#[macro_export]
macro_rules! err {
    ($($arg:tt)*) => { $crate::out::stderr(format_args!($($arg)*)) };
}

/// `eprintln!` that ends the command quietly when its reader has gone.
#[macro_export]
macro_rules! errln {
    () => { $crate::out::stderr(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::out::stderr(format_args!("{}\n", format_args!($($arg)*))) };
}
