//! The corpus: drawn cases that reached a coverage situation no earlier case reached, kept
//! as scenario files, and mutated (fault times, kinds and nodes, node counts, run seeds) to
//! make a share of later cases, so rare situations get explored further.

use super::strategy::{Case, FAULT_AT_MAX};
use crate::scenario::model::{Fault, FaultKind};
use crate::scenario::{self};
use crate::sim_time::SimDuration;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::Path;

/// One case in four is a mutant of a corpus case once the corpus is not empty.
pub const MUTATED_SHARE: (u32, u32) = (1, 4);

/// The generator of case `index`'s mutation choices: seeded by (seed, index) alone.
pub fn mutation_rng(seed: u64, index: u64) -> ChaCha8Rng {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&index.to_le_bytes());
    bytes[16..24].copy_from_slice(b"mutation");
    ChaCha8Rng::from_seed(bytes)
}

/// Reads every `*.toml` under `dir` in file-name order; a missing directory is empty.
pub fn load(dir: &Path) -> Result<Vec<Case>, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read corpus {}: {e}", dir.display())),
    };
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| {
            let s = scenario::load(p).map_err(|e| format!("corpus file {e}"))?;
            Ok(Case {
                seed: s.seed,
                scenario: s,
            })
        })
        .collect()
}

/// Writes a corpus case as `dir/case-<seed>-<index>.toml`.
pub fn save(dir: &Path, seed: u64, index: u64, case: &Case) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut s = case.scenario.clone();
    s.seed = case.seed;
    let path = dir.join(format!("case-{seed}-{index:08}.toml"));
    crate::files::write_atomically(&path, scenario::to_toml(&s).as_bytes())
}

/// A mutant of `parent`: one to three changes; `None` when the result is not a valid
/// scenario (the caller then uses the fresh draw).
pub fn mutate(parent: &Case, rng: &mut ChaCha8Rng) -> Option<Case> {
    let mut c = parent.clone();
    for _ in 0..rng.gen_range(1..=3) {
        mutate_once(&mut c, rng);
    }
    c.scenario.faults.sort_by_key(|f| f.at);
    let text = scenario::to_toml(&c.scenario);
    let back = scenario::parse(&text, "mutant.toml").ok()?;
    (back == c.scenario).then_some(c)
}

fn mutate_once(c: &mut Case, rng: &mut ChaCha8Rng) {
    let s = &mut c.scenario;
    let n = s.faults.len();
    match rng.gen_range(0..5) {
        0 if n > 0 => {
            let f = &mut s.faults[rng.gen_range(0..n)];
            let shift = SimDuration::from_us(rng.gen_range(0..=60_000_000u64));
            f.at = if rng.gen_bool(0.5) {
                f.at.before(shift)
            } else {
                f.at.after(shift).min(FAULT_AT_MAX)
            };
        }
        1 if n > 0 => {
            let i = rng.gen_range(0..n);
            s.faults[i].kind = other_kind(&s.faults[i].kind, rng.gen_range(0..3));
        }
        2 => {
            let nodes = s.cluster.nodes as i64 + if rng.gen_bool(0.5) { 1 } else { -1 };
            let nodes = nodes.clamp(2, 6) as u32;
            s.cluster.nodes = nodes;
            s.rendezvous.min_nodes = s.rendezvous.min_nodes.min(nodes);
            s.rendezvous.max_nodes = s
                .rendezvous
                .max_nodes
                .max(nodes)
                .min(nodes + s.cluster.spare_nodes)
                .max(s.rendezvous.min_nodes);
            let total = nodes + s.cluster.spare_nodes;
            s.faults
                .retain(|f| fault_nodes(&f.kind).iter().all(|&x| x < total));
        }
        3 if n > 0 => {
            let i = rng.gen_range(0..n);
            let to = rng.gen_range(0..s.cluster.nodes);
            retarget(&mut s.faults[i], to);
        }
        _ => c.seed = rng.gen::<u64>() >> 1,
    }
}

/// A single-node stopping fault swapped for another (kill, stop, power off).
fn other_kind(kind: &FaultKind, pick: u32) -> FaultKind {
    match kind {
        FaultKind::Kill { node } | FaultKind::Stop { node } | FaultKind::PowerOff { node } => {
            match pick {
                0 => FaultKind::Kill { node: *node },
                1 => FaultKind::Stop { node: *node },
                _ => FaultKind::PowerOff { node: *node },
            }
        }
        other => other.clone(),
    }
}

/// Points a single-node fault at another node (the validator refuses what no longer fits).
fn retarget(f: &mut Fault, to: u32) {
    match &mut f.kind {
        FaultKind::Kill { node }
        | FaultKind::Stop { node }
        | FaultKind::PowerOff { node }
        | FaultKind::ClockSkew { node, .. }
        | FaultKind::WorkerCrash { node, .. } => *node = to,
        _ => return,
    }
    // It names its node now, not a role.
    f.role = None;
}

/// Every node a fault names.
fn fault_nodes(kind: &FaultKind) -> Vec<u32> {
    match kind {
        FaultKind::Partition { groups } => groups.iter().flatten().copied().collect(),
        FaultKind::ClogLink { from, to } | FaultKind::UnclogLink { from, to } => vec![*from, *to],
        k => super::signature::fault_node(k).into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutants_are_valid_scenarios_and_depend_on_the_seed_and_index_only() {
        let mut s = crate::scenario::default_scenario("m");
        s.cluster.nodes = 3;
        s.rendezvous.min_nodes = 2;
        s.rendezvous.max_nodes = 3;
        s.faults = vec![Fault {
            at: crate::sim_time::SimInstant::from_us(30_000_000),
            kind: FaultKind::Kill { node: 1 },
            role: None,
        }];
        let parent = Case {
            scenario: s,
            seed: 5,
        };
        for index in 0..50 {
            let a = mutate(&parent, &mut mutation_rng(1, index));
            let b = mutate(&parent, &mut mutation_rng(1, index));
            assert_eq!(a, b);
            if let Some(m) = a {
                let text = scenario::to_toml(&m.scenario);
                assert!(scenario::parse(&text, "m.toml").is_ok());
            }
        }
    }
}
