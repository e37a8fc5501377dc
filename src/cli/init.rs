//! `trainsim init [FILE]`: writes a commented starting scenario for a torchrun job (nodes,
//! GPUs, elastic range, backend) that runs and passes as written.

use crate::files::write_atomically;
use crate::scenario::limits::{GPUS_PER_NODE_MAX, NODES_MAX};
use std::path::PathBuf;

/// `trainsim init` arguments.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  trainsim init my_job.toml --nodes 16 --min-nodes 12\n  \
    trainsim init --backend gloo > small.toml"
)]
pub struct InitArgs {
    /// Where to write the scenario; without it, standard output.
    pub file: Option<PathBuf>,
    /// Nodes that start with the job.
    #[arg(long, default_value_t = 4)]
    pub nodes: u32,
    /// GPUs (and workers) per node.
    #[arg(long, default_value_t = 8)]
    pub gpus: u32,
    /// The fewest nodes the job trains on (`--nnodes MIN:MAX`); default: `--nodes`.
    #[arg(long)]
    pub min_nodes: Option<u32>,
    /// The most nodes the job trains on; default: `--nodes`.
    #[arg(long)]
    pub max_nodes: Option<u32>,
    /// The workers' collective backend.
    #[arg(long, value_parser = ["nccl", "gloo"], default_value = "nccl")]
    pub backend: String,
    /// Replace FILE if it exists.
    #[arg(long)]
    pub force: bool,
}

/// Writes the scenario; 0 when written, 2 on bad flags or an unwritable file.
pub fn execute(args: InitArgs) -> i32 {
    let text = match scenario_text(&args) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let Some(path) = &args.file else {
        out!("{text}");
        return 0;
    };
    if path.exists() && !args.force {
        eprintln!(
            "error: {} exists; pass --force to replace it",
            path.display()
        );
        return 2;
    }
    match write_atomically(path, text.as_bytes()) {
        Ok(()) => {
            eprintln!(
                "wrote {}; run it with: trainsim run {}",
                path.display(),
                path.display()
            );
            0
        }
        Err(e) => {
            eprintln!("error: cannot write {}: {e}", path.display());
            2
        }
    }
}

/// The scenario file for these flags, or why they do not make one.
pub fn scenario_text(args: &InitArgs) -> Result<String, String> {
    let nodes = args.nodes;
    let (min, max, spares) = elastic_range(args)?;
    // The crash hits the last node, which is never the store's host (node-0).
    let crash_node = nodes - 1;
    let crash = format!(
        "[[faults]]\nat = \"5m\"\nkind = \"worker_crash\"\nnode = \"node-{crash_node}\"\nlocal_rank = 0\n"
    );
    // With gloo, torch 2.15's restarted workers race the last group's keys in the shared
    // store and often lose (docs/fidelity.md), so the starter leaves the crash to the user.
    let (crash_fault, crash_story) = if args.backend == "gloo" {
        let commented: String = crash.lines().map(|l| format!("# {l}\n")).collect();
        (
            format!(
                "# With gloo a restarted group races the last group's keys in the shared store\n\
                 # (torch 2.15; docs/fidelity.md): uncomment to see a worker crash's restart.\n\
                 {commented}"
            ),
            "Uncomment the worker crash below to see a restart.",
        )
    } else {
        (
            crash,
            "One worker crashes at 5 minutes: its agent restarts the worker group, everyone \
             re-rendezvouses and training resumes from the last checkpoint.",
        )
    };
    Ok(format!(
        include_str!("init_template.toml"),
        nodes = nodes,
        spares = spares,
        gpus = args.gpus,
        min = min,
        max = max,
        backend = args.backend,
        crash_node = crash_node,
        crash_fault = crash_fault,
        crash_story = crash_story,
        spare_comment = if spares > 0 {
            format!("node-{nodes}")
        } else {
            "a spare (raise spare_nodes)".to_owned()
        },
    ))
}

/// The flags' elastic range `(min, max)` and the spares it leaves room for, or why the flags
/// make no job.
fn elastic_range(args: &InitArgs) -> Result<(u32, u32, u32), String> {
    let nodes = args.nodes;
    if !(1..=NODES_MAX).contains(&nodes) {
        return Err(format!("--nodes must be 1 to {NODES_MAX}, not {nodes}"));
    }
    if !(1..=GPUS_PER_NODE_MAX).contains(&args.gpus) {
        return Err(format!(
            "--gpus must be 1 to {GPUS_PER_NODE_MAX}, not {}",
            args.gpus
        ));
    }
    let min = args
        .min_nodes
        .unwrap_or(nodes.min(args.max_nodes.unwrap_or(nodes)));
    let max = args.max_nodes.unwrap_or(nodes.max(min));
    if min == 0 || min > max || min > nodes || max > NODES_MAX {
        return Err(format!(
            "the elastic range must satisfy 1 <= --min-nodes <= --nodes and --min-nodes <= \
             --max-nodes <= {NODES_MAX}: got {min}..{max} with {nodes} nodes"
        ));
    }
    // torch keeps a node beyond max_nodes on its redundancy list, a spare that never trains
    // (scenarios/spare_beyond_max_nodes.toml); the starter's nodes all train.
    let Some(spares) = max.checked_sub(nodes) else {
        return Err(format!(
            "--nodes {nodes} is more than --max-nodes {max}: torch would keep {} of them on \
             its redundancy list, never training (scenarios/spare_beyond_max_nodes.toml shows \
             it); lower --nodes or raise --max-nodes",
            nodes - max
        ));
    };
    Ok((min, max, spares))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(nodes: u32, min: Option<u32>, max: Option<u32>, backend: &str) -> InitArgs {
        InitArgs {
            file: None,
            nodes,
            gpus: 8,
            min_nodes: min,
            max_nodes: max,
            backend: backend.into(),
            force: false,
        }
    }

    #[test]
    fn the_written_file_parses_with_the_flags_values() {
        let text = scenario_text(&args(6, Some(4), Some(8), "gloo")).unwrap();
        let s = crate::scenario::parse(&text, "init.toml").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.cluster.nodes, 6);
        assert_eq!(s.cluster.spare_nodes, 2);
        assert_eq!((s.rendezvous.min_nodes, s.rendezvous.max_nodes), (4, 8));
    }

    #[test]
    fn a_range_that_cannot_hold_the_nodes_is_refused() {
        assert!(scenario_text(&args(4, Some(5), None, "nccl")).is_err());
        assert!(scenario_text(&args(4, Some(3), Some(2), "nccl")).is_err());
        assert!(scenario_text(&args(0, None, None, "nccl")).is_err());
        let beyond = scenario_text(&args(5, Some(2), Some(4), "nccl")).unwrap_err();
        assert!(
            beyond.contains("--nodes 5 is more than --max-nodes 4"),
            "{beyond}"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// Over the flag space: `init` refuses, or writes a file that parses and runs as it
        /// says (its expectation met, no invariant violated).
        #[test]
        fn every_file_init_writes_runs_and_passes(
            nodes in 1u32..=8,
            min in proptest::option::of(1u32..=9),
            max in proptest::option::of(1u32..=12),
            gpus in 1u32..=8,
            gloo in proptest::bool::ANY,
        ) {
            let mut flags = args(nodes, min, max, if gloo { "gloo" } else { "nccl" });
            flags.gpus = gpus;
            let Ok(text) = scenario_text(&flags) else {
                return Ok(());
            };
            let s = crate::scenario::parse(&text, "init.toml").unwrap_or_else(|e| panic!("{e}"));
            let report = crate::runner::Run::of(&s, "init.toml")
                .report()
                .unwrap_or_else(|e| panic!("{e}"));
            proptest::prop_assert!(
                report.passed(),
                "{flags:?}: {}",
                report.repro
            );
        }
    }
}
