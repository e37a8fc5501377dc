//! The agreement rule between real torch's signatures and the simulator's.
//!
//! A file agrees when the real runs' most common signature is among the simulator's, and the
//! simulator's most common signature is among the real runs'. When several signatures tie
//! for most common, any one of them in the other side's set satisfies its half of the rule:
//! with three real runs all different, no one of them is more torch's answer than another.

use super::signature::{node_compact, round_compact, NodeSig, Signature};
use serde::Serialize;
use std::collections::BTreeMap;

/// Distinct signatures with how many runs gave each, most common first (ties in signature
/// order, so the listing is stable).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Distribution {
    pub entries: Vec<Entry>,
}

/// One distinct signature and its count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub count: u32,
    pub signature: Signature,
}

impl Distribution {
    /// Counts `signatures`.
    pub fn of<I: IntoIterator<Item = Signature>>(signatures: I) -> Distribution {
        let mut counts: BTreeMap<Signature, u32> = BTreeMap::new();
        for s in signatures {
            *counts.entry(s).or_insert(0) += 1;
        }
        let mut entries: Vec<Entry> = counts
            .into_iter()
            .map(|(signature, count)| Entry { count, signature })
            .collect();
        // A stable sort keeps the signature order among equal counts.
        entries.sort_by_key(|e| std::cmp::Reverse(e.count));
        Distribution { entries }
    }

    /// Total runs counted.
    pub fn runs(&self) -> u32 {
        self.entries.iter().map(|e| e.count).sum()
    }

    /// The signatures tied for most common (empty only for an empty distribution).
    pub fn modes(&self) -> Vec<&Signature> {
        let top = self.entries.first().map_or(0, |e| e.count);
        self.entries
            .iter()
            .filter(|e| e.count == top)
            .map(|e| &e.signature)
            .collect()
    }

    /// Whether some run gave `s`.
    pub fn contains(&self, s: &Signature) -> bool {
        self.entries.iter().any(|e| &e.signature == s)
    }
}

/// The verdict on one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub agree: bool,
    /// When they disagree: each differing field, real against simulated, between the two
    /// most common signatures.
    pub differences: Vec<String>,
}

/// Applies the agreement rule.
pub fn judge(real: &Distribution, sim: &Distribution) -> Verdict {
    let real_mode_in_sim = real.modes().iter().any(|m| sim.contains(m));
    let sim_mode_in_real = sim.modes().iter().any(|m| real.contains(m));
    let agree = real_mode_in_sim && sim_mode_in_real;
    let differences = match (agree, real.modes().first(), sim.modes().first()) {
        (false, Some(r), Some(s)) => differences(r, s),
        (false, _, _) => vec!["one side has no run".to_owned()],
        (true, _, _) => Vec::new(),
    };
    Verdict { agree, differences }
}

/// Every field where `real` and `sim` differ, as `field: real X, sim Y`.
pub fn differences(real: &Signature, sim: &Signature) -> Vec<String> {
    let mut out = Vec::new();
    if real.rounds != sim.rounds {
        let show = |s: &Signature| {
            let r: Vec<String> = s.rounds.iter().map(round_compact).collect();
            format!("[{}]", r.join(" > "))
        };
        out.push(format!("rounds: real {}, sim {}", show(real), show(sim)));
    }
    let mut names: Vec<&String> = real.nodes.keys().chain(sim.nodes.keys()).collect();
    names.sort_by_key(|n| super::signature::node_order(n));
    names.dedup();
    for name in names {
        node_differences(name, real.nodes.get(name), sim.nodes.get(name), &mut out);
    }
    if real.finished != sim.finished {
        out.push(format!(
            "finished: real {}, sim {}",
            real.finished, sim.finished
        ));
    }
    out
}

fn node_differences(
    name: &str,
    real: Option<&NodeSig>,
    sim: Option<&NodeSig>,
    out: &mut Vec<String>,
) {
    let (r, s) = match (real, sim) {
        (Some(r), Some(s)) => (r, s),
        (r, s) => {
            let show = |n: Option<&NodeSig>| n.map_or("absent".to_owned(), node_compact);
            out.push(format!("nodes.{name}: real {}, sim {}", show(r), show(s)));
            return;
        }
    };
    if r.final_state != s.final_state {
        out.push(format!(
            "nodes.{name}.final_state: real {}, sim {}",
            r.final_state, s.final_state
        ));
    }
    if r.exit_code != s.exit_code {
        let show = |c: Option<i32>| c.map_or("none".to_owned(), |c| c.to_string());
        out.push(format!(
            "nodes.{name}.exit_code: real {}, sim {}",
            show(r.exit_code),
            show(s.exit_code)
        ));
    }
    if r.restarts != s.restarts {
        out.push(format!(
            "nodes.{name}.restarts: real {}, sim {}",
            r.restarts, s.restarts
        ));
    }
}
