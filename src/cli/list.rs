//! `trainsim list faults|fixes|invariants|failures`: what a scenario file can name, one line
//! each, from the same definitions the parser and the checks use.

use crate::fixes::{AgentFix, Fix, ReaderFix, RendezvousFix};
use crate::invariant::Invariant;
use crate::sampler::load_balancing::SamplerFix;
use crate::scenario::faults::fault_fields;
use crate::scenario::model::{FailureKind, FaultName};
use clap::ValueEnum;
use strum::VariantArray;

/// `trainsim list` arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  trainsim list faults\n  trainsim list keys")]
pub struct ListArgs {
    /// What to list.
    #[arg(value_enum)]
    pub what: Listing,
}

/// The lists there are.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Listing {
    /// `[[faults]]` kinds, with the keys each takes.
    Faults,
    /// Opt-in fixes of torch's, Bagua's and HugeCTR's behaviour, by scenario key.
    Fixes,
    /// The invariants every run is checked against.
    Invariants,
    /// The kinds a `[failures]` process draws.
    Failures,
    /// Every key of the format, dotted as in a file, with its rules and default.
    Keys,
}

/// Prints the list; always exit code 0.
pub fn execute(args: ListArgs) -> i32 {
    let lines = match args.what {
        Listing::Faults => faults(),
        Listing::Fixes => fixes(),
        Listing::Invariants => invariants(),
        Listing::Failures => failures(),
        Listing::Keys => crate::scenario::schema::key_lines(),
    };
    for line in lines {
        outln!("{line}");
    }
    0
}

/// `trainsim schema`: the format's JSON Schema, pretty-printed; exit code 0.
pub fn print_schema() -> i32 {
    let schema = crate::scenario::schema::scenario_schema();
    let text = serde_json::to_string_pretty(&schema).expect("a JSON value always prints");
    outln!("{text}");
    0
}

/// Each fault kind, its keys (optional ones in brackets) and what it does.
pub fn faults() -> Vec<String> {
    FaultName::VARIANTS
        .iter()
        .map(|name| {
            let (needed, optional) = fault_fields(*name);
            let keys: Vec<String> = needed
                .iter()
                .map(|k| (*k).to_owned())
                .chain(optional.iter().map(|k| format!("[{k}]")))
                .collect();
            let kind: &'static str = (*name).into();
            format!("{kind:<13} {:<30} {}", keys.join(" "), fault_meaning(*name))
        })
        .collect()
}

/// One line on what each fault does; docs/scenario-format.md's fault table says more.
fn fault_meaning(name: FaultName) -> &'static str {
    match name {
        FaultName::Kill => "SIGKILL of the node's agent and workers on a live host",
        FaultName::PowerOff => "the host vanishes: silence until TCP or a timeout gives up",
        FaultName::Stop => "SIGTERM: the agent shuts down as torchrun does",
        FaultName::Signal => {
            "SIGUSR1/SIGUSR2 to torchrun: stops it as SIGTERM does if it handles it, else kills it alone"
        }
        FaultName::Restart => "a killed or powered-off node comes back as a new process",
        FaultName::Start => "a spare node starts (a late join, a scale-up)",
        FaultName::Pause => "the node stops running and keeps its state",
        FaultName::Resume => "a paused node runs again",
        FaultName::Partition => "cut the links between groups of nodes",
        FaultName::Heal => "restore every link",
        FaultName::ClogLink => "drop everything from one node to another",
        FaultName::UnclogLink => "let that link carry messages again",
        FaultName::Latency => "change the message latency range",
        FaultName::Loss => "change the datagram loss probability",
        FaultName::ClockSkew => "step a node's wall clock by a signed duration",
        FaultName::GpuSlow => "a straggler GPU: its batches take `factor` times as long",
        FaultName::GpuFail => "Xid 79: the worker on that GPU dies and the GPU stays lost",
        FaultName::WorkerCrash => "one worker exits non-zero",
        FaultName::StoreCrash => "the store process dies with its in-memory state",
    }
}

/// Each fix as `key name  upstream: summary`.
pub fn fixes() -> Vec<String> {
    let mut lines = fix_lines::<RendezvousFix>();
    lines.extend(fix_lines::<AgentFix>());
    lines.extend(fix_lines::<ReaderFix>());
    lines.extend(fix_lines::<SamplerFix>());
    lines
}

fn fix_lines<F: Fix>() -> Vec<String> {
    F::VARIANTS
        .iter()
        .map(|fix| {
            let info = fix.info();
            let name: &'static str = (*fix).into();
            let summary = info
                .summary
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            format!("{:<21} {name:<32} {} — {summary}", F::KEY, info.upstream)
        })
        .collect()
}

/// Each invariant with its meaning, in the report's order.
pub fn invariants() -> Vec<String> {
    Invariant::VARIANTS
        .iter()
        .map(|i| format!("{:<26} {}", i.name(), i.meaning()))
        .collect()
}

/// Each kind of drawn failure, as `[failures] kinds` names it.
pub fn failures() -> Vec<String> {
    FailureKind::VARIANTS
        .iter()
        .map(|kind| {
            let meaning = match kind {
                FailureKind::PowerOff => "the host loses power: silence, then `after`",
                FailureKind::Kill => "agent and workers die on a live host, then `after`",
                FailureKind::GpuFail => "a random GPU fails (Xid); its worker dies, the node stays",
                FailureKind::WorkerCrash => "a random worker exits 1; the node stays",
                FailureKind::Hang => "the node hangs until `repair_time` has passed",
                FailureKind::Preempt => "spot preemption: SIGTERM, power off after the grace",
            };
            format!("{:<13} {meaning}", kind.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_listed_once_and_first_on_its_line() {
        let first = |lines: Vec<String>| -> Vec<String> {
            lines
                .iter()
                .map(|l| l.split_whitespace().next().unwrap_or("").to_owned())
                .collect()
        };
        let faults: Vec<String> = FaultName::VARIANTS
            .iter()
            .map(|n| <&'static str>::from(*n).to_owned())
            .collect();
        assert_eq!(first(super::faults()), faults);
        let invariants: Vec<String> = Invariant::names().map(str::to_owned).collect();
        assert_eq!(first(super::invariants()), invariants);
        let fixes = super::fixes();
        assert_eq!(
            fixes.len(),
            RendezvousFix::VARIANTS.len()
                + AgentFix::VARIANTS.len()
                + ReaderFix::VARIANTS.len()
                + SamplerFix::VARIANTS.len()
        );
        assert!(fixes
            .iter()
            .any(|l| l.contains("rendezvous.fixes") && l.contains("refresh-master-addr")));
        assert_eq!(super::failures().len(), FailureKind::VARIANTS.len());
    }

    #[test]
    fn a_fault_line_names_its_keys_optional_ones_in_brackets() {
        let crash = super::faults()
            .into_iter()
            .find(|l| l.starts_with("worker_crash"))
            .unwrap();
        assert!(crash.contains("node local_rank [exit_code]"), "{crash}");
    }
}
