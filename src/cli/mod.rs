//! The subcommands behind the `trainsim` binary; each returns its process exit code.

/// `println!` that survives a closed stdout (see [`print_out`]).
macro_rules! outln {
    () => { $crate::cli::print_out(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::cli::print_out(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `print!` that survives a closed stdout (see [`print_out`]).
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::print_out(format_args!($($arg)*)) };
}

pub mod bench;
pub mod check;
mod check_html;
pub mod conform;
pub mod fuzz;
pub mod parity;
pub mod run;
pub mod sample;

use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once stdout was found closed: nothing more is written to it.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes to stdout. When the reader went away (`trainsim run … | head`), the rest of the
/// output is dropped quietly and the command carries on to its own exit code, instead of
/// `println!`'s panic on a broken pipe.
pub fn print_out(args: std::fmt::Arguments<'_>) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = io::stdout().lock();
    if stdout.write_fmt(args).is_err() {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename,
/// so a CI job that reads the file never sees half of it.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // The pid keeps two concurrent writers of the same path off each other's temp file.
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = std::fs::File::create(&temp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    let result = written.and_then(|()| std::fs::rename(&temp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}
