//! Test helpers: a default scenario and short constructors for hand-built traces.
//!
//! Times in these helpers are whole seconds unless a name ends in `_us`, so traces in
//! tests read like the story they tell.

use crate::scenario::model::*;
use crate::sim_time::SimInstant;
use crate::trace::{AgentState, Event, EventKind, RunEnd, Trace};

/// One simulated second.
pub const S: u64 = 1_000_000;

/// Three nodes (min 2, max 3), torch's default timeouts, 10 steps, checkpoint every 5.
pub fn scenario() -> Scenario {
    let mut s = crate::scenario::default_scenario("test");
    s.seed = 1;
    s.time_limit = crate::sim_time::SimDuration::from_us(7200 * S);
    s.cluster.nodes = 3;
    s.cluster.spare_nodes = 1;
    s.rendezvous.min_nodes = 2;
    s.rendezvous.max_nodes = 3;
    s.agent.max_restarts = 1;
    s.job.steps = 10;
    s.job.checkpoint_every = 5;
    s.job.dataset.len = 1000;
    s.job.sampler.batch_size = 4;
    s
}

/// An event at `at_s` seconds on `node` (empty string: no node).
pub fn e(at_s: u64, node: &str, kind: EventKind) -> Event {
    e_us(at_s * S, node, kind)
}

/// An event at `at_us` microseconds on `node` (empty string: no node).
pub fn e_us(at_us: u64, node: &str, kind: EventKind) -> Event {
    let node = if node.is_empty() {
        None
    } else {
        Some(node.parse().expect("node-N or store"))
    };
    Event {
        at: SimInstant::from_us(at_us),
        node,
        kind,
    }
}

/// A trace of these events.
pub fn trace(events: Vec<Event>) -> Trace {
    Trace {
        events,
        truncated: false,
    }
}

/// A run end at `at_s` seconds with this outcome name.
pub fn end(at_s: u64, outcome: &str) -> RunEnd {
    let outcome = match outcome {
        "succeeded" => Outcome::Succeeded,
        "failed" => Outcome::Failed,
        "timed_out" => Outcome::TimedOut,
        other => panic!("unknown outcome {other}"),
    };
    RunEnd {
        ended_at: SimInstant::from_us(at_s * S),
        outcome,
    }
}

pub fn started(pid: u32) -> EventKind {
    EventKind::AgentStarted { pid }
}

pub fn killed(pid: u32) -> EventKind {
    EventKind::AgentKilled { pid }
}

pub fn exited(pid: u32, state: AgentState) -> EventKind {
    EventKind::AgentExited {
        pid,
        state,
        reason: "test".into(),
    }
}

pub fn joining(pid: u32) -> EventKind {
    EventKind::RendezvousJoining { pid }
}

/// A completion of `round` where this process got `rank` of the listed node indices.
pub fn completed(pid: u32, round: u64, rank: u32, nodes: &[u32]) -> EventKind {
    let participants: Vec<NodeIndex> = nodes.iter().map(|&n| NodeIndex(n)).collect();
    EventKind::RendezvousCompleted {
        store_incarnation: 1,
        pid,
        round,
        rank,
        world_size: nodes.len() as u32,
        participants: participants.into(),
    }
}

pub fn rdzv_failed(pid: u32, error: &str) -> EventKind {
    EventKind::RendezvousFailed {
        pid,
        error: error.parse().expect("a rendezvous error kind"),
        message: "test".into(),
    }
}

pub fn closed(pid: u32, round: u64) -> EventKind {
    EventKind::RendezvousClosed {
        pid,
        round,
        store_incarnation: 1,
    }
}

pub fn fault(kind: &str) -> EventKind {
    EventKind::FaultApplied {
        fault: kind.parse().expect("a fault kind"),
        detail: String::new(),
        role: None,
    }
}

pub fn workers_started(pid: u32, round: u64, group_rank: u32, world_size: u32) -> EventKind {
    EventKind::WorkersStarted {
        store_incarnation: 1,
        master: "node-0:32768".into(),
        pid,
        round,
        group_rank,
        world_size,
        restart_count: 0,
    }
}

/// Samples a node's ranks train on per step in test traces: 8 ranks × batch 4.
pub const STEP_SAMPLES_PER_NODE: u64 = 32;

pub fn step(pid: u32, round: u64, step: u64) -> EventKind {
    EventKind::Step {
        pid,
        round,
        step,
        epoch: 0,
        samples: STEP_SAMPLES_PER_NODE,
        trained: Default::default(),
        run: Default::default(),
    }
}

/// Which ranks of which world a node's workers are, for [`dealt_step`].
#[derive(Debug, Clone, Copy)]
pub struct RanksOf {
    pub world_size: u64,
    pub first_rank: u64,
    pub ranks: u32,
}

/// Step `step` of `pid` in `round`, training batch `batch` of `epoch` on `on`'s ranks with
/// exactly what the sampler of `s` deals them (run seed 1): the samples and their digest.
pub fn dealt_step(
    s: &Scenario,
    (pid, round, step): (u32, u64, u64),
    on: RanksOf,
    epoch: u64,
    batch: u64,
) -> EventKind {
    let source = super::sampler_deal::DealSource::new(&s.job, 1);
    let mut dealer = super::sampler_deal::Dealer::new(&source);
    let deal = dealer.deal(epoch, on.world_size).expect("a dealable epoch");
    let batches: Vec<Vec<u64>> = (on.first_rank..on.first_rank + u64::from(on.ranks))
        .map(|rank| deal.dealt().batch(rank, batch).to_vec())
        .collect();
    EventKind::Step {
        pid,
        round,
        step,
        epoch,
        samples: batches.iter().map(|b| b.len() as u64).sum(),
        trained: crate::trace::TrainedOn {
            batch,
            world_size: on.world_size,
            first_rank: on.first_rank,
            ranks: on.ranks,
            samples_digest: crate::trace::samples_digest(batches.iter().map(Vec::as_slice)),
        },
        run: Default::default(),
    }
}

pub fn checkpoint(pid: u32, step: u64) -> EventKind {
    EventKind::Checkpoint { pid, step }
}

pub fn resumed(pid: u32, step: u64) -> EventKind {
    EventKind::ResumedFromCheckpoint {
        pid,
        step,
        lost_steps: 0,
    }
}

pub fn restart(pid: u32, counted: bool, restart_count: u32) -> EventKind {
    let reason = if counted {
        "failure"
    } else {
        "membership_change"
    };
    EventKind::AgentRestart {
        pid,
        counted,
        restart_count,
        reason: reason.into(),
    }
}

/// Nodes 0..n (pid = 100 + index) start at 0 s, join at 1 s and complete round 0 at 2 s.
pub fn round_zero(n: u32) -> Vec<Event> {
    let nodes: Vec<u32> = (0..n).collect();
    let mut events = Vec::new();
    for &i in &nodes {
        events.push(e(0, &node_name(i), started(100 + i)));
    }
    for &i in &nodes {
        events.push(e(1, &node_name(i), joining(100 + i)));
    }
    for &i in &nodes {
        events.push(e(2, &node_name(i), completed(100 + i, 0, i, &nodes)));
    }
    events
}

/// `round_zero(n)`, then every node trains `steps` steps (one a second from 3 s, a
/// checkpoint every 5 by node-0) on 8 ranks each, the batches [`scenario`]'s sampler deals
/// them, and exits SUCCEEDED.
pub fn happy_run(n: u32, steps: u64) -> Vec<Event> {
    let mut events = round_zero(n);
    for i in 0..n {
        events.push(e(2, &node_name(i), workers_started(100 + i, 0, i, n)));
        events.push(e(2, &node_name(i), resumed(100 + i, 0)));
    }
    let dealt = scenario();
    let ranks_per_node = (STEP_SAMPLES_PER_NODE / dealt.job.sampler.batch_size) as u32;
    let world_size = u64::from(n * ranks_per_node);
    let batches = crate::sampler::samples_per_rank(dealt.job.dataset.len, world_size, false)
        .0
        .div_ceil(dealt.job.sampler.batch_size);
    for s in 1..=steps {
        let (epoch, batch) = ((s - 1) / batches, (s - 1) % batches);
        for i in 0..n {
            let on = RanksOf {
                world_size,
                first_rank: u64::from(i * ranks_per_node),
                ranks: ranks_per_node,
            };
            let step = dealt_step(&dealt, (100 + i, 0, s), on, epoch, batch);
            events.push(e(2 + s, &node_name(i), step));
        }
        if s % 5 == 0 {
            events.push(e(2 + s, "node-0", checkpoint(100, s)));
        }
    }
    events.push(e(3 + steps, "node-0", closed(100, 0)));
    for i in 0..n {
        events.push(e(
            3 + steps,
            &node_name(i),
            exited(100 + i, AgentState::Succeeded),
        ));
    }
    events
}
