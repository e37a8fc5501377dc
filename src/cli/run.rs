//! `trainsim run FILE...`: runs scenarios and prints their reports.

/// Arguments of `trainsim run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Scenario files to run.
    #[arg(required = true)]
    pub files: Vec<std::path::PathBuf>,
}

/// Runs the command; returns the exit code.
pub fn execute(_args: RunArgs) -> i32 {
    2
}
