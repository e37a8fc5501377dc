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
pub mod compare;
pub mod conform;
pub mod diff;
pub mod fuzz;
pub mod fuzz_confirm;
pub mod fuzz_diff;
pub mod init;
pub mod list;
pub mod merge;
pub mod output_paths;
pub mod parity;
mod part;
pub mod planes;
pub mod run;
pub mod sample;
pub mod torch;

use std::io::{self, Write};
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

pub(crate) use crate::files::write_atomically;

/// A progress bar on stderr drawn with `template`, hidden unless stderr is a terminal (CI
/// logs and pipes get no bar).
pub(crate) fn progress_bar(len: u64, template: &str) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let style =
        indicatif::ProgressStyle::with_template(template).expect("a valid progress template");
    indicatif::ProgressBar::new(len).with_style(style)
}
