//! `trainsim fuzz --target rendezvous|job|reader`: draws scenarios, runs them, shrinks the first that
//! fails and writes it as a scenario file to commit, with the line that replays it.
//!
//! Exit codes: 0 nothing found, 1 a failure was found (and written), 2 bad arguments,
//! 3 the finding could not be written.

use crate::fuzz::{self, mutants, FuzzConfig};
use std::path::PathBuf;

/// Arguments of `trainsim fuzz`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  trainsim fuzz --target rendezvous --cases 200 --seed 1 --out findings/\n  trainsim fuzz --target rendezvous --cases 300 --seed 1 --mutant rank-collision --out /tmp/f\n  trainsim fuzz --target job --cases 200 --seed 1 --mutant sampler-off-by-one --out /tmp/f\n  trainsim fuzz --target reader --cases 500 --seed 1 --mutant reader-double-publish --out /tmp/f"
)]
pub struct FuzzArgs {
    /// What to fuzz: the rendezvous (cluster shapes, node and network faults), the job
    /// (data, samplers, GPUs, job faults) or the reader (data faults).
    #[arg(long, value_enum)]
    pub target: Target,
    /// How many scenarios to draw (shrink steps not counted).
    #[arg(long, default_value_t = 100)]
    pub cases: u32,
    /// Seeds the scenario generator: the same seed draws the same cases.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Switch on a planted bug and count only what it breaks: late-joiner-joins-complete-round,
    /// rank-collision, no-heartbeat-expiry (rendezvous); sampler-off-by-one (job);
    /// reader-double-publish (reader).
    #[arg(long, value_name = "M")]
    pub mutant: Option<String>,
    /// Directory the shrunk failing scenario is written to.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// What `trainsim fuzz` can target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    Rendezvous,
    Job,
    Reader,
}

impl Target {
    fn fuzz_target(self) -> fuzz::FuzzTarget {
        match self {
            Target::Rendezvous => fuzz::FuzzTarget::Rendezvous,
            Target::Job => fuzz::FuzzTarget::Job,
            Target::Reader => fuzz::FuzzTarget::Reader,
        }
    }
}

/// Runs the command; returns the exit code.
pub fn execute(args: FuzzArgs) -> i32 {
    if let Some(m) = &args.mutant {
        if let Err(message) = mutants::options_of(std::slice::from_ref(m)) {
            eprintln!("error: {message}");
            return 2;
        }
    }
    if args.cases == 0 {
        eprintln!("error: --cases must be at least 1");
        return 2;
    }
    let config = FuzzConfig {
        target: args.target.fuzz_target(),
        cases: args.cases,
        seed: args.seed,
        mutant: args.mutant.clone(),
    };
    // Wall time only feeds the cases/s figure printed below; it never reaches a trace, a
    // report or the scenario written.
    #[allow(clippy::disallowed_methods)]
    let started = std::time::Instant::now();
    let outcome = fuzz::fuzz(&config);
    let elapsed_s = started.elapsed().as_secs_f64().max(1e-9);
    let failures = u64::from(outcome.finding.is_some());
    let code = match &outcome.finding {
        None => 0,
        Some(finding) => match report_finding(&args, finding) {
            Ok(()) => 1,
            Err(code) => code,
        },
    };
    outln!(
        "fuzz: {} cases, {} failures, {:.1} cases/s",
        outcome.cases_run,
        failures,
        outcome.cases_run as f64 / elapsed_s
    );
    code
}

/// Writes the shrunk scenario and prints where, what and how to replay it.
fn report_finding(args: &FuzzArgs, finding: &fuzz::Finding) -> Result<(), i32> {
    let mutant = args.mutant.as_deref();
    let target = args.target.fuzz_target();
    let scenario = fuzz::repro_scenario_for(target, finding, mutant);
    let name = format!(
        "fuzz-{}-seed{}-{}.toml",
        target.name(),
        args.seed,
        mutant.unwrap_or("no-mutant")
    );
    let path = fuzz::write_repro(&args.out, &name, &scenario).map_err(|e| {
        eprintln!("error: cannot write to {}: {e}", args.out.display());
        3
    })?;
    match &finding.harness_failure {
        Some(message) => outln!("found: harness failure: {message}"),
        None => outln!("found: {} violated", finding.new_violations.join(", ")),
    }
    outln!("wrote {}", path.display());
    let flag = mutant.map(|m| format!(" --mutant {m}")).unwrap_or_default();
    outln!(
        "repro: trainsim run {} --seed {}{flag}",
        path.display(),
        scenario.seed
    );
    Ok(())
}
