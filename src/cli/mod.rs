//! The subcommands behind the `trainsim` binary; each returns its process exit code.

pub mod parity;
pub mod run;
pub mod sample;
