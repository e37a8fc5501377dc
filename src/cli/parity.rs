//! `trainsim parity FILE.jsonl...`: checks the models against parity vectors.

/// Arguments of `trainsim parity`.
#[derive(Debug, clap::Args)]
pub struct ParityArgs {
    /// Parity vector files (JSON lines).
    #[arg(required = true)]
    pub files: Vec<std::path::PathBuf>,
}

/// Runs the command; returns the exit code.
pub fn execute(_args: ParityArgs) -> i32 {
    eprintln!("trainsim parity: not written yet");
    2
}
