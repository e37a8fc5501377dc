//! Closed-form timing of a run of synchronous training steps: when each step's all-reduce
//! releases and when each step is done, from every member's compute times, exactly as the
//! simulator times them one step at a time.
//!
//! One step of one node is a compute sleep, the all-reduce barrier (released when the last
//! rank arrives) and a sleep for the ring's cost. Every member leaves a step's barrier at
//! the same moment and pays the same cost, so the group starts the next step together, and
//! step `j` of a run that starts at 0 ends at `done(j) = max_i(done(j−1) + c_i(j)) + cost`.
//! madsim sleeps at least 1 ms, so each sleep here does too.

/// madsim's shortest sleep.
pub const SLEEP_US_MIN: u64 = 1_000;

/// One step of a run, in microseconds from the run's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepTiming {
    /// When the last member arrives at the step's all-reduce.
    pub release_us: u64,
    /// When every member is done with the step (the all-reduce's cost paid).
    pub done_us: u64,
}

/// What one sleep of `duration_us` lasts in the simulator.
pub fn slept_us(duration_us: u64) -> u64 {
    duration_us.max(SLEEP_US_MIN)
}

/// The steps of a run whose slowest member computes step `j` for `slowest_us[j]` (the
/// all-reduce waits for the last rank), each all-reduce costing `cost_us`, kept while a step
/// is done before `horizon_us`.
pub fn step_timings(slowest_us: &[u64], cost_us: u64, horizon_us: u64) -> Vec<StepTiming> {
    let mut timings = Vec::with_capacity(slowest_us.len());
    let mut start_us = 0u64;
    for &compute_us in slowest_us {
        let release_us = start_us.saturating_add(slept_us(compute_us));
        let done_us = release_us.saturating_add(slept_us(cost_us));
        if done_us >= horizon_us {
            break;
        }
        timings.push(StepTiming {
            release_us,
            done_us,
        });
        start_us = done_us;
    }
    // Each step releases after the previous one is done, and is done after it releases.
    assert!(
        timings
            .windows(2)
            .all(|w| w[0].done_us < w[1].release_us && w[1].release_us < w[1].done_us),
        "step timings out of order: {timings:?}"
    );
    timings
}

/// When step `step` of the run started (every member starts it together).
pub fn started_us(timings: &[StepTiming], step: usize) -> u64 {
    assert!(
        step <= timings.len(),
        "step {step} of a run of {} steps",
        timings.len()
    );
    match step {
        0 => 0,
        _ => timings[step - 1].done_us,
    }
}

/// How many steps of the run were done by `at_us`: a member leaving at `at_us` breaks the
/// step in progress then, whether its members were still computing, waiting at the barrier
/// or moving the gradients around the ring.
pub fn done_by(timings: &[StepTiming], at_us: u64) -> usize {
    timings.partition_point(|t| t.done_us <= at_us)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "step 3 of a run of 2 steps")]
    fn a_step_past_the_run_stops_the_run() {
        let a = [10_000; 2];
        started_us(&step_timings(&a, 0, u64::MAX), 3);
    }

    #[test]
    fn the_slowest_member_sets_each_step() {
        // Members computing [10, 10, 30] and [20, 5, 10] ms: the slower one of each step.
        let slowest = [20_000, 10_000, 30_000];
        let timings = step_timings(&slowest, 2_000, u64::MAX);
        let done: Vec<u64> = timings.iter().map(|t| t.done_us).collect();
        assert_eq!(done, vec![22_000, 34_000, 66_000]);
        assert_eq!(timings[1].release_us, 32_000);
    }

    #[test]
    fn sleeps_last_at_least_a_millisecond() {
        let a = [10, 10];
        let timings = step_timings(&a, 0, u64::MAX);
        assert_eq!(timings[0].release_us, 1_000);
        assert_eq!(timings[1].done_us, 4_000);
    }

    #[test]
    fn the_horizon_keeps_only_steps_done_before_it() {
        // Each step: 10 ms of compute, then a cost rounded up to madsim's 1 ms.
        let a = [10_000; 5];
        assert_eq!(step_timings(&a, 0, 33_001).len(), 3);
        assert_eq!(step_timings(&a, 0, 33_000).len(), 2);
        assert!(step_timings(&a, 0, 11_000).is_empty());
    }

    #[test]
    fn a_departure_cuts_the_run_at_the_step_in_progress() {
        // Steps release at 10, 21, 32, 43 ms and are done a millisecond later.
        let a = [10_000; 4];
        let timings = step_timings(&a, 1_000, u64::MAX);
        assert_eq!(done_by(&timings, 10_500), 0, "inside the first step's ring");
        assert_eq!(done_by(&timings, 11_000), 1);
        assert_eq!(done_by(&timings, 21_500), 1);
        assert_eq!(started_us(&timings, 1), 11_000);
        assert_eq!(done_by(&timings, u64::MAX), 4);
    }
}
