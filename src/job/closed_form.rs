//! Closed-form timing of a run of synchronous training steps: when each step's all-reduce
//! releases and when each step is done, from every member's compute times, exactly as the
//! simulator times them one step at a time.
//!
//! One step of one node is a compute sleep, the all-reduce barrier (released when the last
//! rank arrives) and a sleep for the ring's cost. Every member leaves a step's barrier at
//! the same moment and pays the same cost, so the group starts the next step together, and
//! step `j` of a run that starts at 0 ends at `done(j) = max_i(done(j−1) + c_i(j)) + cost`.
//! madsim sleeps at least 1 ms, so each sleep here does too.

use crate::sim_time::SimDuration;

/// madsim's shortest sleep.
pub const SLEEP_MIN: SimDuration = SimDuration::from_ms(1);

/// One step of a run, as spans from the run's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepTiming {
    /// When the last member arrives at the step's all-reduce.
    pub release: SimDuration,
    /// When every member is done with the step (the all-reduce's cost paid).
    pub done: SimDuration,
}

/// What one sleep of `duration` lasts in the simulator.
pub fn slept(duration: SimDuration) -> SimDuration {
    duration.max(SLEEP_MIN)
}

/// The steps of a run whose slowest member computes step `j` for `slowest[j]` (the
/// all-reduce waits for the last rank), each all-reduce costing `cost`, kept while a step
/// is done before `horizon`.
pub fn step_timings(
    slowest: &[SimDuration],
    cost: SimDuration,
    horizon: SimDuration,
) -> Vec<StepTiming> {
    let mut timings = Vec::with_capacity(slowest.len());
    let mut start = SimDuration::ZERO;
    for &compute in slowest {
        let release = start.saturating_add(slept(compute));
        let done = release.saturating_add(slept(cost));
        if done >= horizon {
            break;
        }
        timings.push(StepTiming { release, done });
        start = done;
    }
    // Each step releases after the previous one is done, and is done after it releases.
    assert!(
        timings
            .windows(2)
            .all(|w| w[0].done < w[1].release && w[1].release < w[1].done),
        "step timings out of order: {timings:?}"
    );
    timings
}

/// When step `step` of the run started (every member starts it together).
pub fn started(timings: &[StepTiming], step: usize) -> SimDuration {
    assert!(
        step <= timings.len(),
        "step {step} of a run of {} steps",
        timings.len()
    );
    match step {
        0 => SimDuration::ZERO,
        _ => timings[step - 1].done,
    }
}

/// How many steps of the run were done by `at`: a member leaving at `at` breaks the step in
/// progress then, whether its members were still computing, waiting at the barrier or
/// moving the gradients around the ring.
pub fn done_by(timings: &[StepTiming], at: SimDuration) -> usize {
    timings.partition_point(|t| t.done <= at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> SimDuration {
        SimDuration::from_us(n)
    }

    fn each_us(spans: &[u64]) -> Vec<SimDuration> {
        spans.iter().copied().map(us).collect()
    }

    #[test]
    #[should_panic(expected = "step 3 of a run of 2 steps")]
    fn a_step_past_the_run_stops_the_run() {
        let a = each_us(&[10_000; 2]);
        started(&step_timings(&a, us(0), us(u64::MAX)), 3);
    }

    #[test]
    fn the_slowest_member_sets_each_step() {
        // Members computing [10, 10, 30] and [20, 5, 10] ms: the slower one of each step.
        let slowest = each_us(&[20_000, 10_000, 30_000]);
        let timings = step_timings(&slowest, us(2_000), us(u64::MAX));
        let done: Vec<SimDuration> = timings.iter().map(|t| t.done).collect();
        assert_eq!(done, each_us(&[22_000, 34_000, 66_000]));
        assert_eq!(timings[1].release, us(32_000));
    }

    #[test]
    fn sleeps_last_at_least_a_millisecond() {
        let a = each_us(&[10, 10]);
        let timings = step_timings(&a, us(0), us(u64::MAX));
        assert_eq!(timings[0].release, us(1_000));
        assert_eq!(timings[1].done, us(4_000));
    }

    #[test]
    fn the_horizon_keeps_only_steps_done_before_it() {
        // Each step: 10 ms of compute, then a cost rounded up to madsim's 1 ms.
        let a = each_us(&[10_000; 5]);
        assert_eq!(step_timings(&a, us(0), us(33_001)).len(), 3);
        assert_eq!(step_timings(&a, us(0), us(33_000)).len(), 2);
        assert!(step_timings(&a, us(0), us(11_000)).is_empty());
    }

    #[test]
    fn a_departure_cuts_the_run_at_the_step_in_progress() {
        // Steps release at 10, 21, 32, 43 ms and are done a millisecond later.
        let a = each_us(&[10_000; 4]);
        let timings = step_timings(&a, us(1_000), us(u64::MAX));
        assert_eq!(
            done_by(&timings, us(10_500)),
            0,
            "inside the first step's ring"
        );
        assert_eq!(done_by(&timings, us(11_000)), 1);
        assert_eq!(done_by(&timings, us(21_500)), 1);
        assert_eq!(started(&timings, 1), us(11_000));
        assert_eq!(done_by(&timings, us(u64::MAX)), 4);
    }
}
