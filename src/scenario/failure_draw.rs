//! Draws a failure process's faults from the run's seed, as ordinary faults: for each node,
//! the times between its failures, each failure's kind, and what follows (a repair, a
//! replacement node with a new name and address). The result is a plain scenario: written
//! out, it replays the same run without the process.
//!
//! The draws use `libm`'s logarithm, power and gamma function, written in Rust, so a seed
//! draws the same failures on every machine (the platform's libm may round differently).

use super::limits::{FAULTS_MAX, NODES_MAX};
use super::model::{AfterFailure, FailureKind, FailureProcess, Fault, FaultKind, Scenario};
use crate::sim_time::{SimDuration, SimInstant};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::borrow::Cow;
use std::collections::BTreeSet;

const US_PER_DAY: f64 = 86_400e6;

/// Why a draw could not become a scenario.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrawError {
    #[error("the failure process drew more than {FAULTS_MAX} faults (lower failures.rate_per_node_day or shorten the run)")]
    TooManyFaults,
    #[error("the failure process needed more than {NODES_MAX} nodes for its replacements")]
    TooManyNodes,
}

/// The scenario the run with `seed` plays: `s` itself when it has no failure process, else
/// a copy with the drawn faults added (after the file's own at equal times), its spare
/// nodes grown by the replacements, and no process left.
pub fn expand(s: &Scenario, seed: u64) -> Result<Cow<'_, Scenario>, DrawError> {
    let Some(process) = &s.failures else {
        return Ok(Cow::Borrowed(s));
    };
    #[cfg(test)]
    DRAWS.with(|draws| draws.set(draws.get() + 1));
    let mut draw = Draw {
        process,
        rng: crate::rng::stream(seed, "failures"),
        scale_us: scale_us(process),
        end: process.until.min(SimInstant::from_start(s.time_limit)),
        next_spare: s.cluster.nodes + s.cluster.spare_nodes,
        gpus: s.cluster.gpus_per_node.max(1),
        local_ranks: s.agent.nproc_per_node.max(1),
        pending: BTreeSet::new(),
        faults: Vec::new(),
    };
    for node in 0..s.cluster.nodes {
        draw.schedule(node, process.from);
    }
    draw.run(FAULTS_MAX.saturating_sub(s.faults.len()))?;
    let mut expanded = s.clone();
    expanded.seed = seed;
    expanded.failures = None;
    expanded.cluster.spare_nodes = draw.next_spare - s.cluster.nodes;
    // A repair or a replacement due after the run's end never happens.
    let before_end = draw
        .faults
        .into_iter()
        .filter(|f| f.at < SimInstant::from_start(s.time_limit));
    expanded.faults.extend(before_end);
    // Stable: the file's faults stay before drawn ones at the same moment.
    expanded.faults.sort_by_key(|f| f.at);
    Ok(Cow::Owned(expanded))
}

#[cfg(test)]
thread_local! {
    /// How many failure processes this thread drew, for tests that a caller draws once.
    static DRAWS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many failure processes this thread has drawn so far.
#[cfg(test)]
pub(crate) fn draws_on_this_thread() -> usize {
    DRAWS.with(std::cell::Cell::get)
}

/// The Weibull scale whose mean is the process's mean time between failures.
fn scale_us(p: &FailureProcess) -> f64 {
    let mean_us = US_PER_DAY / p.rate_per_node_day;
    mean_us / libm::tgamma(1.0 + 1.0 / p.weibull_shape)
}

struct Draw<'a> {
    process: &'a FailureProcess,
    rng: ChaCha8Rng,
    scale_us: f64,
    /// No failure happens at or after this moment.
    end: SimInstant,
    next_spare: u32,
    gpus: u32,
    local_ranks: u32,
    /// Each running node's next failure: (at, node).
    pending: BTreeSet<(SimInstant, u32)>,
    faults: Vec<Fault>,
}

impl Draw<'_> {
    /// Draws when `node`, running from `from`, fails next.
    fn schedule(&mut self, node: u32, from: SimInstant) {
        // 1 - u lies in (0, 1]: its logarithm is finite.
        let u = 1.0 - self.rng.gen::<f64>();
        let gap_us = self.scale_us * libm::pow(-libm::log(u), 1.0 / self.process.weibull_shape);
        let at = from.after(SimDuration::from_us(gap_us.round().clamp(1.0, 1e18) as u64));
        if at < self.end {
            self.pending.insert((at, node));
        }
    }

    /// Takes failures in time order until none is left before the end.
    fn run(&mut self, faults_max: usize) -> Result<(), DrawError> {
        while let Some((at, node)) = self.pending.pop_first() {
            let kind = self.kind();
            self.fail(node, at, kind)?;
            if self.faults.len() > faults_max {
                return Err(DrawError::TooManyFaults);
            }
        }
        Ok(())
    }

    /// A kind by the process's shares.
    fn kind(&mut self) -> FailureKind {
        let mut x = self.rng.gen::<f64>();
        for &(kind, share) in &self.process.kinds {
            if x < share {
                return kind;
            }
            x -= share;
        }
        self.process
            .kinds
            .last()
            .map_or(FailureKind::PowerOff, |k| k.0)
    }

    fn push(&mut self, at: SimInstant, kind: FaultKind) {
        self.faults.push(Fault::at(at, kind));
    }

    /// `node` fails at `at` with `kind`, and what follows is drawn.
    fn fail(&mut self, node: u32, at: SimInstant, kind: FailureKind) -> Result<(), DrawError> {
        let p = self.process;
        let down_at = match kind {
            FailureKind::PowerOff => {
                self.push(at, FaultKind::PowerOff { node });
                at
            }
            FailureKind::Kill => {
                self.push(at, FaultKind::Kill { node });
                at
            }
            FailureKind::Preempt => self.drain(node, at),
            FailureKind::GpuFail => {
                // Xid 79 ends the worker on that GPU; the node's health check then takes the
                // node out of service as a preemption does, to be repaired or replaced: a
                // GPU that stays lost would fail every worker restarted on it.
                let gpu = self.rng.gen_range(0..self.gpus);
                self.push(at, FaultKind::GpuFail { node, gpu });
                self.drain(node, at)
            }
            FailureKind::WorkerCrash => {
                let local_rank = self.rng.gen_range(0..self.local_ranks);
                let crash = FaultKind::WorkerCrash {
                    node,
                    local_rank,
                    exit_code: 1,
                };
                self.push(at, crash);
                self.schedule(node, at);
                return Ok(());
            }
            FailureKind::Hang => {
                let resumed = at.after(p.repair_time);
                self.push(at, FaultKind::Pause { node });
                self.push(resumed, FaultKind::Resume { node });
                self.schedule(node, resumed);
                return Ok(());
            }
        };
        self.after(node, down_at)
    }

    /// `node` is drained from `at`: its agent is stopped (SIGTERM) and the node goes
    /// down after the grace period, which is when it returns.
    fn drain(&mut self, node: u32, at: SimInstant) -> SimInstant {
        let gone = at.after(self.process.preemption_grace);
        self.push(at, FaultKind::Stop { node });
        self.push(gone, FaultKind::PowerOff { node });
        gone
    }

    /// What follows a node going down at `down_at`: its repair or its replacement.
    fn after(&mut self, node: u32, down_at: SimInstant) -> Result<(), DrawError> {
        let p = self.process;
        match p.after {
            AfterFailure::Repair => {
                let back = down_at.after(p.repair_time);
                self.push(back, FaultKind::Restart { node });
                self.schedule(node, back);
            }
            AfterFailure::Replace => {
                if self.next_spare >= NODES_MAX {
                    return Err(DrawError::TooManyNodes);
                }
                let spare = self.next_spare;
                self.next_spare += 1;
                let start = down_at.after(p.replace_delay);
                self.push(start, FaultKind::Start { node: spare });
                self.schedule(spare, start);
            }
            AfterFailure::Nothing => {}
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "failure_draw_tests.rs"]
mod tests;
