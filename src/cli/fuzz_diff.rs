//! `trainsim fuzz diff A B`: two campaigns compared root cause by root cause.

use crate::fuzz::root_causes;
use std::path::PathBuf;

/// Arguments of `trainsim fuzz diff`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  trainsim fuzz --target rendezvous --cases 300 --seed 1 --torch PY --out stock\n  trainsim fuzz --target rendezvous --cases 300 --seed 1 --torch PY --torch-elastic-src patched/ --out patched\n  trainsim fuzz diff stock patched"
)]
pub struct DiffArgs {
    /// The first campaign's output directory (its summary.json).
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The second campaign's output directory.
    #[arg(value_name = "B")]
    pub b: PathBuf,
}

/// Runs the command; returns the exit code: 0 when every root cause has the same cases and
/// signatures, 1 when one differs, 2 when a summary cannot be read or the campaigns fuzzed
/// different targets.
pub fn execute(args: &DiffArgs) -> i32 {
    let read = super::fuzz::read_summary;
    let (a, b) = match (read(&args.a), read(&args.b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(message), _) | (_, Err(message)) => {
            eprintln!("error: {message}");
            return 2;
        }
    };
    if a.target != b.target {
        eprintln!(
            "error: {} fuzzed the {} and {} the {}: their findings do not compare",
            args.a.display(),
            a.target,
            args.b.display(),
            b.target
        );
        return 2;
    }
    let name = |dir: &PathBuf, s: &crate::fuzz::summary::Summary| {
        let plane = match (&s.torch, &s.torch_elastic_src) {
            (None, _) => "the model".to_owned(),
            (Some(py), None) => format!("torch from {py}"),
            (Some(py), Some(src)) => format!("torch from {py} with {src} laid over it"),
        };
        format!(
            "{} ({} cases {}..{} of seed {}, {}: {} failing)",
            dir.display(),
            s.target,
            s.cases_start,
            s.cases_end,
            s.seed,
            plane,
            s.failing_cases
        )
    };
    outln!("A {}", name(&args.a, &a));
    outln!("B {}", name(&args.b, &b));
    if !root_causes::same_cases(&a, &b) {
        outln!("note: the campaigns ran different cases, so the counts compare as totals only");
    }
    let groups = root_causes::diff(&a, &b);
    out!("{}", root_causes::render_diff(&groups));
    let differs = root_causes::differs(&groups);
    outln!(
        "fuzz diff: {}",
        if differs {
            "the campaigns differ"
        } else {
            "the same root causes, signatures and counts"
        }
    );
    i32::from(differs)
}
