//! Runs of training steps settled in closed form. Between moments that can change the
//! group's stepping (a fault, a checkpoint, a member's workers leaving), the members pool
//! their compute times, sleep once to the run's end and record each step at the moment it
//! would have ended, with the same samples in the ledger and the same record (what its
//! ranks trained on) as a step taken one at a time. A run may cross into the next data
//! epoch: the epoch ends and the next opens at the moment its last step ended, as the step
//! loop would have done then. A member that leaves in the middle cuts the run for the
//! others at the step in progress then (its ring or barrier breaks); an aborted run settles
//! the steps already done when it is dropped.

use super::closed_form::{self, StepTiming};
use super::compute::{usable_gpus, ComputeOn};
use super::epoch_plan::EpochPlan;
use super::epochs;
use super::ledger::SampleLedger;
use super::{consume, trained_on, GroupPlan, Position, WorkerStatus};
use crate::scenario::model::Complexity;
use crate::sim_time::{SimDuration, SimInstant};
use crate::trace::{EventKind, StepRun, TrainedOn};
use crate::world::segments::Gathered;
use crate::world::{time, NodeEnv};
use futures::future::{select, Either};
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What a node's step loop shares with a run: the group, its data and where steps go.
pub(super) struct Steps<'a> {
    pub env: &'a NodeEnv,
    pub plan: &'a GroupPlan,
    pub epoch_plan: &'a Arc<EpochPlan>,
    /// The sampler's key of each data epoch (the epoch `set_epoch` last set for it).
    pub key_of: &'a epochs::KeyOf<'a>,
    pub dataset_key: u64,
    pub ledger: &'a Mutex<SampleLedger>,
    pub reached: &'a AtomicU64,
}

/// How a try at a closed-form run ended.
#[derive(Debug, Default)]
pub(super) struct Run {
    /// Steps completed and recorded.
    pub settled: u64,
    /// When the step after the settled ones started, if not now: a departure cut the run
    /// in the middle of it, or the group declined a run after this node came to it.
    pub next_step_started: Option<SimInstant>,
    /// Where the settled steps left the group; `None` when none was settled.
    pub ended: Option<Ended>,
}

impl Run {
    /// No run: the next step, begun at `started`, is taken one at a time.
    pub fn declined(started: SimInstant) -> Self {
        Run {
            settled: 0,
            next_step_started: Some(started),
            ended: None,
        }
    }
}

/// Where a run's settled steps left the group: at batch `batch` of data epoch `epoch`,
/// dealt by `epoch_plan` (the batch after the last settled step; the epoch's batch count
/// when that step ended the run's last epoch).
#[derive(Debug)]
pub(super) struct Ended {
    pub epoch: u64,
    pub batch: u64,
    pub epoch_plan: Arc<EpochPlan>,
}

/// The fewest steps worth a run: a single step costs less one at a time.
const RUN_STEPS_MIN: u64 = 2;

/// Data epochs one run may span: the one it starts in and the next. When a run spans two,
/// group rank 0 asks the prefetch thread for the plans after them as it begins, so that
/// the next run finds its plans dealt rather than dealing them on the run's thread.
const LEGS_MAX: usize = 2;

/// The largest dataset whose runs may span epochs: six epochs' deals (the run's two and
/// the four dealt ahead) then hold at most 6 Mi ids, of the 8 Mi the process keeps. Runs of
/// larger datasets have long epochs, whose one run per epoch costs little.
pub(super) const SPANNING_DATASET_LEN_MAX: u64 = 1 << 20;

/// One data epoch's part of a run: `steps` steps from batch `first_batch` of `epoch_plan`.
struct Leg {
    epoch: u64,
    epoch_plan: Arc<EpochPlan>,
    first_batch: u64,
    steps: u64,
}

/// Tries a closed-form run from `at`. `Run::default()` means "take one step as usual":
/// every member decides that alike, from what they all see at the same moment.
pub(super) async fn run(s: &Steps<'_>, at: &Position) -> Result<Run, WorkerStatus> {
    let Some(legs) = legs(s, at) else {
        return Ok(Run::default());
    };
    let came = time::now();
    let mine = own_compute(s, &legs);
    let first_compute = mine.as_ref().and_then(|m| m.first().copied());
    let first_arrival = came.after(closed_form::slept(first_compute.unwrap_or_default()));
    let timeout = s.env.scenario().job.collective_timeout;
    let deadline = first_arrival.after(timeout);
    let gathered = s
        .env
        .gather_step_times(s.plan.group_key(), at.step, s.plan.ranks(), mine, deadline)
        .await;
    let gathered = match gathered {
        Ok(gathered) => gathered,
        Err(e) => {
            return Err(super::collective_failure(s.env, e, at.step + 1, first_arrival).await)
        }
    };
    let Gathered::All { start, slowest } = gathered else {
        // A node that waited for late members still began its step when it came.
        return Ok(Run::declined(came));
    };
    // From the common start, so that every member sees the same horizon; the steps' ends
    // fall on whole microseconds, and so is the horizon counted.
    let whole_us = SimDuration::from_us(1);
    let horizon = s.env.next_change_at_or_after(start);
    let horizon = horizon.since(start).floor_to(whole_us);
    let cost = super::ring_cost(s.env, s.plan);
    let timings = closed_form::step_timings(&slowest, cost, horizon);
    if timings.is_empty() {
        return Ok(Run::declined(came));
    }
    let mut settler = Settler {
        s,
        at_step: at.step,
        legs: &legs,
        leg: 0,
        leg_start: 0,
        start,
        timings: &timings,
        settled: 0,
        completable: timings.len(),
    };
    settler.sleep_through_run().await
}

/// The epochs a run from `at` may span and its steps in each, when a run is allowed at
/// all: it stops at the job's end and the next checkpoint, which the step loop handles, and
/// before an epoch whose plan cannot step (the loop raises that error when it gets there).
fn legs(s: &Steps<'_>, at: &Position) -> Option<Vec<Leg>> {
    let env = s.env;
    let job = &env.scenario().job;
    assert!(
        at.step < job.steps && at.batch < s.epoch_plan.batches(),
        "a run was tried from step {} of {}, batch {} of {}",
        at.step,
        job.steps,
        at.batch,
        s.epoch_plan.batches()
    );
    // The group's first step is one at a time: its members start it at different moments.
    if env.scenario().reader.is_some() || !env.segments_allowed() || at.step <= s.plan.start_step {
        return None;
    }
    let to_checkpoint = job.checkpoint_every - at.step % job.checkpoint_every;
    let mut left = (job.steps - at.step).min(to_checkpoint);
    let mut leg = Leg {
        epoch: at.epoch,
        epoch_plan: Arc::clone(s.epoch_plan),
        first_batch: at.batch,
        steps: 0,
    };
    let legs_max = if job.dataset.len <= SPANNING_DATASET_LEN_MAX {
        LEGS_MAX
    } else {
        1
    };
    let mut legs = Vec::with_capacity(legs_max);
    loop {
        leg.steps = left.min(leg.epoch_plan.batches() - leg.first_batch);
        left -= leg.steps;
        let epoch = leg.epoch + 1;
        legs.push(leg);
        if left == 0 || legs.len() == legs_max {
            break;
        }
        let Ok(epoch_plan) = epochs::steppable_plan(env, s.plan, (s.key_of)(epoch)) else {
            break;
        };
        leg = Leg {
            epoch,
            epoch_plan,
            first_batch: 0,
            steps: 0,
        };
    }
    let steps: u64 = legs.iter().map(|leg| leg.steps).sum();
    if legs.len() > 1 {
        let last = legs.last().expect("a run has a leg");
        let batches = last.epoch_plan.batches();
        let next_epoch_step = at.step + steps + (batches - last.first_batch - last.steps);
        epochs::prefetch_after(env, s.plan, s.key_of, last.epoch, next_epoch_step, batches);
    }
    (steps >= RUN_STEPS_MIN).then_some(legs)
}

/// This node's compute time for each step of the run's `legs`, or `None` when a step
/// cannot be computed (a lost GPU): the node then declines and fails its step as usual.
fn own_compute(s: &Steps<'_>, legs: &[Leg]) -> Option<Vec<SimDuration>> {
    let gpus = usable_gpus(s.env, s.plan.local_world_size as usize).ok()?;
    // With a constant complexity every full batch of an epoch takes the same time on the
    // same GPUs, so it is computed once.
    let constant = matches!(
        s.env.scenario().job.dataset.complexity,
        Complexity::Constant { .. }
    );
    let mut times = Vec::with_capacity(legs.iter().map(|leg| leg.steps as usize).sum());
    for leg in legs {
        let on = ComputeOn {
            env: s.env,
            plan: s.plan,
            epoch_plan: &leg.epoch_plan,
            gpus: &gpus,
            dataset_key: s.dataset_key,
        };
        let full_batches = if constant {
            leg.epoch_plan.full_batches()
        } else {
            0
        };
        let mut full_batch_time = None;
        let mut time_of = |batch: u64| {
            if batch < full_batches {
                *full_batch_time.get_or_insert_with(|| on.slowest(batch))
            } else {
                on.slowest(batch)
            }
        };
        times.extend((0..leg.steps).map(|j| time_of(leg.first_batch + j)));
    }
    Some(times)
}

/// A departure cut a run of `steps` steps, `settled` of them recorded, after `done`: a
/// step already recorded ended before the departure.
fn assert_cut(done: usize, settled: usize, steps: usize) {
    assert!(
        settled <= done && done <= steps,
        "a departure left {done} of {steps} steps done with {settled} recorded: it cannot \
         take back a recorded step"
    );
}

/// Records the steps of a run as their moments pass; on drop (the workers stopped), the
/// steps done by then.
struct Settler<'a, 'b> {
    s: &'a Steps<'b>,
    at_step: u64,
    legs: &'a [Leg],
    /// The leg the next step to settle is in, and the run's step that leg begins at.
    leg: usize,
    leg_start: usize,
    start: SimInstant,
    timings: &'a [StepTiming],
    settled: usize,
    /// Steps that can complete: all of them, until a departure cuts the run.
    completable: usize,
}

impl Settler<'_, '_> {
    fn done_at(&self, step: usize) -> SimInstant {
        self.start.after(self.timings[step].done)
    }

    /// Sleeps to the run's end, or until a member departs and cuts it.
    async fn sleep_through_run(&mut self) -> Result<Run, WorkerStatus> {
        let steps = self.timings.len();
        assert!(
            steps > 0 && self.settled == 0,
            "a run sleeps through {steps} steps with {} already settled",
            self.settled
        );
        let end = self.done_at(steps - 1);
        let departures = self.s.env.watch_departures(self.s.plan.group_key());
        let departure = match select(pin!(time::sleep_until(end)), departures).await {
            Either::Left(((), _)) => None,
            Either::Right((departure, _)) => {
                Some(departure.map_or_else(|_| time::now(), |d| SimInstant::from_ns(d.at_ns)))
            }
        };
        let Some(departed) = departure else {
            self.settle_through(end);
            return Ok(Run {
                settled: steps as u64,
                next_step_started: None,
                ended: self.ended(),
            });
        };
        // The step in progress when the member left breaks: its ring or its barrier.
        let done = closed_form::done_by(self.timings, departed.since(self.start));
        assert_cut(done, self.settled, steps);
        self.completable = done;
        self.settle_through(time::now());
        let started = |done| closed_form::started(self.timings, done);
        Ok(Run {
            settled: done as u64,
            next_step_started: (done < steps).then(|| self.start.after(started(done))),
            ended: self.ended(),
        })
    }

    /// Where the steps settled so far left the group.
    fn ended(&self) -> Option<Ended> {
        let leg = &self.legs[self.leg];
        (self.settled > 0).then(|| Ended {
            epoch: leg.epoch,
            batch: leg.first_batch + (self.settled - self.leg_start) as u64,
            epoch_plan: Arc::clone(&leg.epoch_plan),
        })
    }

    /// Records every step done by `now` and not yet recorded, in pieces of evenly spaced
    /// steps, one `Step` event each.
    fn settle_through(&mut self, now: SimInstant) {
        assert!(
            self.settled <= self.completable && self.completable <= self.timings.len(),
            "settled {} of {} completable steps in a run of {}",
            self.settled,
            self.completable,
            self.timings.len()
        );
        let mut piece: Option<Piece> = None;
        while self.settled < self.completable && self.done_at(self.settled) <= now {
            let step = self.settled;
            let (s, legs) = (self.s, self.legs);
            let (plan, leg) = (s.plan, &legs[self.leg]);
            let batch = leg.first_batch + (step - self.leg_start) as u64;
            let global_step = self.at_step + step as u64 + 1;
            s.reached.fetch_max(global_step, Ordering::Relaxed);
            let samples = consume(s.ledger, plan, leg.epoch, &leg.epoch_plan, batch);
            let trained = trained_on(plan, batch, &leg.epoch_plan);
            // Recorded on the trace's whole-microsecond clock, as a step taken alone is.
            let done = self.done_at(step).cut_to_whole_us();
            let extended = piece
                .as_mut()
                .is_some_and(|p| p.extend(global_step, done, samples, trained.samples_digest));
            if !extended {
                if let Some(finished) = piece.take() {
                    self.record(finished, leg.epoch);
                }
                piece = Some(Piece::new(global_step, done, samples, trained));
            }
            self.settled += 1;
            let leg_ended = self.settled == self.leg_start + leg.steps as usize;
            if leg_ended && self.leg + 1 < legs.len() {
                // A piece holds the steps of one epoch.
                if let Some(finished) = piece.take() {
                    self.record(finished, leg.epoch);
                }
                self.cross_into_next_leg(done);
            }
        }
        if let Some(finished) = piece {
            self.record(finished, self.legs[self.leg].epoch);
        }
    }

    /// The current leg's epoch ended at `moment` with the step just settled: it finishes,
    /// and the next leg's epoch opens from its first batch, as the step loop does.
    fn cross_into_next_leg(&mut self, moment: SimInstant) {
        let (s, legs) = (self.s, self.legs);
        epochs::finish_epoch(s.env, s.plan, s.ledger, legs[self.leg].epoch, moment);
        self.leg += 1;
        self.leg_start = self.settled;
        let next = &legs[self.leg];
        let at = Position {
            step: self.at_step + self.settled as u64,
            epoch: next.epoch,
            batch: 0,
        };
        epochs::open_epoch(s.env, s.plan, &next.epoch_plan, s.key_of, &at, moment);
    }

    /// One `Step` event for a piece of the run, at its last step's end.
    fn record(&self, piece: Piece, epoch: u64) {
        let s = self.s;
        s.env.record_at(
            piece.last_done,
            EventKind::Step {
                pid: s.env.pid,
                round: s.plan.round,
                step: piece.last_step,
                epoch,
                samples: piece.samples,
                trained: piece.first,
                run: piece.run,
            },
        );
    }
}

/// Evenly spaced steps of a run not yet recorded.
struct Piece {
    first: TrainedOn,
    last_step: u64,
    last_done: SimInstant,
    samples: u64,
    run: StepRun,
}

impl Piece {
    fn new(step: u64, done: SimInstant, samples: u64, first: TrainedOn) -> Self {
        Piece {
            first,
            last_step: step,
            last_done: done,
            samples,
            run: StepRun::default(),
        }
    }

    /// Adds the next step when it ends as far after the last as the steps before did.
    fn extend(&mut self, step: u64, done: SimInstant, samples: u64, digest: u64) -> bool {
        let step_time = done.since(self.last_done);
        if !self.run.is_single() && step_time != self.run.step {
            return false;
        }
        self.run.step = step_time;
        self.run.later_digests.push(digest);
        self.last_step = step;
        self.last_done = done;
        self.samples += samples;
        true
    }
}

impl Drop for Settler<'_, '_> {
    fn drop(&mut self) {
        if self.settled < self.completable {
            if let Some(now_ns) = time::elapsed_ns_in_run() {
                self.settle_through(SimInstant::from_ns(now_ns));
                // Dropped with its process in the middle of the run: the others must know.
                self.s.env.workers_vanished();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_keeps_every_recorded_step() {
        assert_cut(2, 2, 5);
        assert_cut(5, 0, 5);
    }

    #[test]
    #[should_panic(expected = "a departure left 1 of 5 steps done with 2 recorded")]
    fn a_cut_that_takes_back_a_recorded_step_stops_the_run() {
        assert_cut(1, 2, 5);
    }
}
