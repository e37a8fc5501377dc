//! The `trainsim` command line: run scenarios or a whole suite, fuzz the rendezvous, check
//! parity vectors, print sampler output.

use clap::{Parser, Subcommand};
use trainsim::cli;

/// A run allocates and frees many small objects (messages, timers, tasks, per-step batches)
/// and many runs follow each other in one process (a fuzz campaign, a seed batch): glibc's
/// allocator spent about a tenth of a campaign on them, returning pages to the system only
/// to fault them in again for the next run. What a run computes does not depend on it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay`: its place in mimalloc v3's `mi_option_e`, as the pinned
/// libmimalloc-sys 0.1.49 builds it (the crate names no constant for it;
/// tests/allocator_option.rs checks the place still holds the purge delay).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Tells mimalloc never to hand freed pages back to the system. Epochs come and go every
/// few milliseconds, each dealing a permutation of the dataset and its rank lists (1.2 MB
/// at 100 000 samples); with purging on, every one faulted its pages in again (the reference bench:
/// 109 000 page faults, against 300 without). Freed pages are reused, so peak memory
/// grows only by what purging used to hand back between peaks (the reference bench: 137 MB
/// against 123 MB; week-256: 544 MB against 465 MB; the fuzz workload: 94 MB either way).
fn keep_freed_pages() {
    // SAFETY: sets one option's value before the process starts any other thread.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
}

/// Deterministic simulation of elastic distributed training's control plane.
///
/// Start with `trainsim run scenarios/<file>.toml`; every run replays bit for bit from its
/// seed and ends with the line that reproduces it.
#[derive(Parser)]
#[command(name = "trainsim", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run scenario files and report which invariants held.
    Run(cli::run::RunArgs),
    /// Run a scenario suite in parallel, as CI does: summary table, JUnit, shards.
    Check(cli::check::CheckArgs),
    /// Fuzz campaigns: draw and run scenarios, bucket and triage findings, write minimal repros.
    Fuzz(cli::fuzz::FuzzArgs),
    /// Check the models against parity vectors made by the real torch and Bagua code.
    Parity(cli::parity::ParityArgs),
    /// Run the fixed performance workloads and print their figures, one line each.
    Bench(cli::bench::BenchArgs),
    /// Print the indices or batches each rank gets from a sampler configuration.
    Sample(cli::sample::SampleArgs),
    /// Compare goodput: two or more scenario files, or one with a key swept, over the same seeds.
    Compare(cli::compare::CompareArgs),
    /// Merge the part files of a sharded `run --seeds` or `compare` into one summary or page.
    Merge(cli::merge::MergeArgs),
    /// Run scenarios on the real torchrun and in the simulator, and compare the outcomes.
    Conform(cli::conform::ConformArgs),
    /// Run scenarios on both control planes in the simulator, the Rust model and torch's own
    /// elastic code (`--torch PYTHON`), and say where they differ.
    Planes(cli::planes::PlanesArgs),
    /// Say what changed between two runs (JSON reports or scenario files): rounds, restarts,
    /// exit reasons, verdicts, steps, goodput, the first different event.
    Diff(cli::diff::DiffArgs),
    /// Write a commented starting scenario that runs and passes as written.
    Init(cli::init::InitArgs),
    /// List what a scenario can name: faults, fixes, invariants, failure kinds, keys.
    List(cli::list::ListArgs),
    /// Print the JSON Schema of the scenario format, for editors (taplo, Even Better TOML).
    Schema,
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

fn main() {
    keep_freed_pages();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let code = match cli.command {
        Command::Run(args) => cli::run::execute(args),
        Command::Check(args) => cli::check::execute(args),
        Command::Fuzz(args) => cli::fuzz::execute(args),
        Command::Parity(args) => cli::parity::execute(args),
        Command::Sample(args) => cli::sample::execute(args),
        Command::Bench(args) => cli::bench::execute(args),
        Command::Conform(args) => cli::conform::execute(args),
        Command::Planes(args) => cli::planes::execute(args),
        Command::Compare(args) => cli::compare::execute(args),
        Command::Diff(args) => cli::diff::execute(args),
        Command::Init(args) => cli::init::execute(args),
        Command::List(args) => cli::list::execute(args),
        Command::Schema => cli::list::print_schema(),
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut command, "trainsim", &mut std::io::stdout());
            0
        }
        Command::Merge(args) => cli::merge::execute(args),
    };
    std::process::exit(code);
}
