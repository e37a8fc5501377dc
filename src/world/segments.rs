//! Step segments: the members of a worker group pool their per-step compute times, so each
//! can settle a run of training steps in closed form instead of one timer and one barrier per
//! step, and each hears when a member's workers leave the group in the middle of such a run.
//!
//! A segment never spans a moment at which the world changes by itself (a fault, the end of
//! a timed fault, the time limit): [`NodeEnv::next_change_at_or_after`] bounds it. What
//! no schedule knows, an agent stopping its workers, reaches the other members through
//! [`NodeEnv::watch_departures`].

use super::collectives::{covers_world, CollectiveError, RankBlock};
use super::env::NodeEnv;
use super::time;
use crate::scenario::model::{FaultKind, Scenario};
use crate::sim_time::{SimDuration, SimInstant};
use futures::channel::oneshot;
use futures::future::{select, Either};
use std::collections::BTreeMap;
use std::pin::pin;
use std::sync::Arc;

/// Gathers kept at once; the oldest go first (one is left behind only when a member left
/// the group while the others were gathering).
const GATHERS_MAX: usize = 4096;

/// How far apart members may come to one gather and still start the run together: madsim's
/// shortest sleep, far more than its per-poll clock noise, far less than any step.
const IN_STEP: SimDuration = SimDuration::from_ms(1);

/// What a gather gives back: when the first member came (the run's common start) and every
/// member's compute times, in the order of their ranks; or `Declined` when the group cannot
/// take a closed-form run now (a member declined or left, the group is cut by a partition,
/// or its connections were reset).
#[derive(Debug, Clone)]
pub enum Gathered {
    All {
        /// When the first member came: the run's common start.
        start: SimInstant,
        /// For each step the members all computed, the longest compute time among them:
        /// the one the step's all-reduce waits for. Taken once here rather than by every
        /// member, which would cost each of N members N lists.
        slowest: Arc<Vec<SimDuration>>,
    },
    Declined,
}

/// One gather in progress: the contributions so far, and who waits for the rest.
struct Gather {
    start: SimInstant,
    /// Each member's ranks and compute times, by node.
    contributions: BTreeMap<u32, (RankBlock, Vec<SimDuration>)>,
    /// The contributions' rank counts, summed: they can cover a world only once this
    /// reaches its size, so the full check runs at the last member rather than at each.
    ranks_held: u64,
    waiters: Vec<oneshot::Sender<Gathered>>,
    /// Set once the gather can no longer succeed; later members get `Declined` at once.
    declined: bool,
}

/// The run's gathers, by (group key, first step).
#[derive(Default)]
pub struct Segments {
    gathers: BTreeMap<(u64, u64), Gather>,
}

/// One member's part of a gather.
struct Contribution {
    member: u32,
    /// The ranks this member's workers hold.
    ranks: RankBlock,
    /// `None`: the member declines.
    times: Option<Vec<SimDuration>>,
    now: SimInstant,
}

impl Segments {
    /// Adds a contribution to the gather `key`: its result when the gather is decided, or
    /// where the result will come when it is not yet.
    fn contribute(
        &mut self,
        key: (u64, u64),
        c: Contribution,
    ) -> Result<Gathered, oneshot::Receiver<Gathered>> {
        if !self.gathers.contains_key(&key) {
            while self.gathers.len() >= GATHERS_MAX {
                self.gathers.pop_first();
            }
        }
        let gather = self.gathers.entry(key).or_insert_with(|| Gather {
            start: c.now,
            contributions: BTreeMap::new(),
            ranks_held: 0,
            waiters: Vec::new(),
            declined: false,
        });
        // madsim advances its clock 50–100 ns per task poll, so members released by one
        // barrier start a few microseconds apart; a member a whole sleep late is not in step.
        let in_step = c.now < gather.start.after(IN_STEP);
        match c.times {
            Some(times) if in_step && !gather.declined => {
                let earlier = gather.contributions.insert(c.member, (c.ranks, times));
                gather.ranks_held = gather.ranks_held.saturating_add(c.ranks.count);
                assert!(
                    earlier.is_none(),
                    "node {} contributed twice to the gather of group {:#x} from step {}",
                    c.member,
                    key.0,
                    key.1
                );
            }
            _ => gather.declined = true,
        }
        let result = if gather.declined {
            Gathered::Declined
        } else if gather.ranks_held >= c.ranks.world_size
            && covers_world(gather.contributions.values().map(|(ranks, _)| *ranks))
        {
            let times = gather
                .contributions
                .values()
                .map(|(_, times)| times.as_slice());
            Gathered::All {
                start: gather.start,
                slowest: Arc::new(slowest_of(times)),
            }
        } else {
            let (tx, rx) = oneshot::channel();
            gather.waiters.push(tx);
            return Err(rx);
        };
        for waiter in gather.waiters.drain(..) {
            let _ = waiter.send(result.clone());
        }
        if matches!(result, Gathered::All { .. }) {
            self.gathers.remove(&key);
        }
        Ok(result)
    }

    /// The workers of a node of `groups` left: gathers of those groups decline.
    pub fn member_left(&mut self, groups: &[u64]) {
        for ((group, _), gather) in self.gathers.iter_mut() {
            if groups.contains(group) && !gather.declined {
                gather.declined = true;
                for waiter in gather.waiters.drain(..) {
                    let _ = waiter.send(Gathered::Declined);
                }
            }
        }
    }
}

/// Step by step, the longest of the members' compute times, over the steps every member
/// computed.
fn slowest_of<'a>(members: impl Iterator<Item = &'a [SimDuration]> + Clone) -> Vec<SimDuration> {
    let steps = members.clone().map(<[SimDuration]>::len).min().unwrap_or(0);
    let mut slowest = vec![SimDuration::ZERO; steps];
    for times in members {
        for (longest, &time) in slowest.iter_mut().zip(times) {
            *longest = (*longest).max(time);
        }
    }
    slowest
}

/// Every moment at which the world changes by itself: each fault's time, the end of each
/// timed fault, and the run's time limit. Sorted, without repeats.
pub fn change_instants(scenario: &Scenario) -> Vec<SimInstant> {
    let mut instants = vec![SimInstant::from_start(scenario.time_limit)];
    for fault in &scenario.faults {
        instants.push(fault.at);
        let duration = match fault.kind {
            FaultKind::Latency { duration, .. } | FaultKind::Loss { duration, .. } => duration,
            FaultKind::GpuSlow { duration, .. } => Some(duration),
            _ => None,
        };
        if let Some(duration) = duration {
            instants.push(fault.at.after(duration));
        }
    }
    instants.sort_unstable();
    instants.dedup();
    instants
}

/// Whether a run may settle steps in closed form, decided once when it starts: not when the
/// command line asks for one-at-a-time timing. A pause and its resume are faults, so no run
/// spans either; a group whose paused member resumes late gathers its step times apart, and
/// takes the steps one at a time until an all-reduce has brought it together again.
pub fn segments_allowed(scenario: &Scenario, step_by_step: bool) -> bool {
    // A relaunched agent joins at a moment no fault names, so no run may span it.
    !step_by_step && scenario.agent.relaunch == crate::scenario::model::Relaunch::Never
}

impl NodeEnv {
    /// The first moment at or after `at` at which the world changes by itself (or the end
    /// of time), both read on the whole-microsecond clock of the schedule.
    pub fn next_change_at_or_after(&self, at: SimInstant) -> SimInstant {
        let at = at.cut_to_whole_us();
        let instants = &self.world().change_instants;
        let i = instants.partition_point(|&t| t < at);
        instants
            .get(i)
            .map_or(SimInstant::END, |t| t.cut_to_whole_us())
    }

    /// Whether steps may be settled in closed form in this run (see [`segments_allowed`]).
    pub fn segments_allowed(&self) -> bool {
        self.world().segments_allowed
    }

    /// Pools this node's compute times (`None`: it will not take part) with its group's for
    /// the run of steps from `first_step`, this node holding `ranks` of the group's world.
    /// Every member calls it at the same moment; past `deadline` without every rank it
    /// fails as the step's all-reduce would.
    pub async fn gather_step_times(
        &self,
        group: u64,
        first_step: u64,
        ranks: RankBlock,
        mine: Option<Vec<SimDuration>>,
        deadline: SimInstant,
    ) -> Result<Gathered, CollectiveError> {
        let rx = {
            let now = time::now();
            assert!(
                deadline > now,
                "the gather of group {group:#x} from step {first_step} has its deadline \
                 {} ns in the past (now {} ns)",
                deadline.as_ns(),
                now.as_ns()
            );
            let mut st = self.world().state.lock().expect("world lock");
            let members = st.collectives.members(group);
            let blocked = !st.connected(&members) || st.collectives.has_departures(group);
            let contribution = Contribution {
                member: self.index,
                ranks,
                times: mine.filter(|_| !blocked),
                now,
            };
            match st.segments.contribute((group, first_step), contribution) {
                Ok(result) => return Ok(result),
                Err(rx) => rx,
            }
        };
        let deadline = time::sleep_until(deadline);
        match select(pin!(rx), deadline).await {
            Either::Left((Ok(result), _)) => Ok(result),
            Either::Left((Err(_), _)) => Ok(Gathered::Declined),
            Either::Right(((), _)) => Err(CollectiveError::Timeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contribution(member: u32) -> Contribution {
        Contribution {
            member,
            ranks: RankBlock {
                first: u64::from(member),
                count: 1,
                world_size: 2,
            },
            times: Some(vec![SimDuration::from_ms(10); 2]),
            now: SimInstant::START,
        }
    }

    #[test]
    fn a_gather_completes_when_every_member_came() {
        let mut segments = Segments::default();
        assert!(segments.contribute((1, 5), contribution(0)).is_err());
        let all = segments.contribute((1, 5), contribution(1));
        assert!(matches!(all, Ok(Gathered::All { ref slowest, .. }) if slowest.len() == 2));
    }

    #[test]
    #[should_panic(expected = "node 0 contributed twice to the gather of group 0x1 from step 5")]
    fn a_member_contributing_twice_stops_the_run() {
        let mut segments = Segments::default();
        let _ = segments.contribute((1, 5), contribution(0));
        let _ = segments.contribute((1, 5), contribution(0));
    }
}
