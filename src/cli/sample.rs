//! `trainsim sample`: prints the indices or batches each rank gets.

/// Arguments of `trainsim sample`.
#[derive(Debug, clap::Args)]
pub struct SampleArgs {}

/// Runs the command; returns the exit code.
pub fn execute(_args: SampleArgs) -> i32 {
    eprintln!("trainsim sample: not written yet");
    2
}
