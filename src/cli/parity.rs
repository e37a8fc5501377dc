//! `trainsim parity FILE.jsonl...`: checks the models against parity vectors.

use crate::parity;

/// Arguments of `trainsim parity`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  trainsim parity tests/data/parity/*.jsonl\n  trainsim parity my-vectors/*.jsonl   # made by conformance/gen_parity_vectors.py"
)]
pub struct ParityArgs {
    /// Parity vector files (JSON lines).
    #[arg(required = true)]
    pub files: Vec<std::path::PathBuf>,
}

/// Runs the command; returns the exit code: 0 when every case matched, 1 when some differ,
/// 2 when a file cannot be read or holds a line that is not a valid case.
pub fn execute(args: ParityArgs) -> i32 {
    match parity::run_files(&args.files) {
        Ok(report) => {
            for mismatch in &report.mismatches {
                outln!("{mismatch}");
            }
            outln!("{}", report.summary());
            if report.failed() == 0 {
                0
            } else {
                1
            }
        }
        Err(error) => {
            eprintln!("trainsim parity: {error}");
            2
        }
    }
}
