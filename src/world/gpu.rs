//! The virtual GPUs: per-GPU slowdown windows (`gpu_slow`), Xid-style losses (`gpu_fail`) and
//! the compute cost of a rank's batch on a GPU profile.
//!
//! A slowdown window multiplies the compute time of every batch that *starts* inside it
//! (a step is short next to a straggler window, so no batch is split across a window's
//! edge). A lost GPU stays lost across worker restarts, as after Xid 79 ("fallen off the
//! bus") where only a reset brings it back: a `restart` of the node (a new process after a
//! reboot) gives it back.

use crate::sim_time::{SimDuration, SimInstant};
use std::collections::BTreeMap;

/// A worker whose GPU fell off the bus dies on a CUDA error: Python exits with 1.
pub const GPU_LOST_EXIT_CODE: i32 = 1;

/// One `gpu_slow` window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlowWindow {
    pub factor: f64,
    /// The moment the window ends; [`SimInstant::END`] for a slowdown without a `duration`.
    pub until: SimInstant,
}

/// The GPUs of every node: what faults did to them.
#[derive(Debug, Default)]
pub struct Gpus {
    slow: BTreeMap<(u32, u32), Vec<SlowWindow>>,
    failed: BTreeMap<u32, std::collections::BTreeSet<u32>>,
}

impl Gpus {
    /// `gpu_slow`: from `now`, for `duration` (zero: for the rest of the run).
    pub fn slow_down(
        &mut self,
        node: u32,
        gpu: u32,
        factor: f64,
        now: SimInstant,
        duration: SimDuration,
    ) {
        let until = if duration.is_zero() {
            SimInstant::END
        } else {
            now.after(duration)
        };
        self.slow
            .entry((node, gpu))
            .or_default()
            .push(SlowWindow { factor, until });
    }

    /// The slowdown of `gpu` on `node` at `now`: the product of the windows in force.
    pub fn slowdown(&mut self, node: u32, gpu: u32, now: SimInstant) -> f64 {
        let Some(windows) = self.slow.get_mut(&(node, gpu)) else {
            return 1.0;
        };
        windows.retain(|w| w.until > now);
        windows.iter().map(|w| w.factor).product()
    }

    /// `gpu_fail`: the GPU is lost until the node restarts.
    pub fn fail(&mut self, node: u32, gpu: u32) {
        self.failed.entry(node).or_default().insert(gpu);
    }

    /// Whether `gpu` of `node` is lost.
    pub fn is_failed(&self, node: u32, gpu: u32) -> bool {
        self.failed.get(&node).is_some_and(|g| g.contains(&gpu))
    }

    /// A node restart resets its GPUs.
    pub fn reset_node(&mut self, node: u32) {
        self.failed.remove(&node);
    }
}

/// The GPU a local rank runs on: torchrun's scripts pin local rank r to device
/// `r % gpus_per_node`.
pub fn gpu_of_local_rank(local_rank: u32, gpus_per_node: u32) -> u32 {
    local_rank % gpus_per_node.max(1)
}

/// SCENARIO.md's compute cost of one rank's batch:
/// `step_time × (sum of complexities) / batch_size × slowdown`, divided by the profile's
/// relative speed (h100 = 1). Rounded to the microsecond, as the step time is given.
pub fn compute_time(
    step_time: SimDuration,
    complexity_sum: u64,
    batch_size: u64,
    slowdown: f64,
    compute_speed: f64,
) -> SimDuration {
    let per_sample_us = step_time.as_us() as f64 / batch_size.max(1) as f64;
    let us = per_sample_us * complexity_sum as f64 * slowdown / compute_speed;
    SimDuration::from_us_f64_rounded(us)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complexity_one_batch_takes_step_time() {
        let ms = SimDuration::from_ms;
        assert_eq!(compute_time(ms(200), 32, 32, 1.0, 1.0), ms(200));
        assert_eq!(compute_time(ms(200), 64, 32, 1.0, 1.0), ms(400));
        assert_eq!(compute_time(ms(200), 32, 32, 3.0, 1.0), ms(600));
        assert_eq!(compute_time(ms(200), 32, 32, 1.0, 0.5), ms(400));
        assert_eq!(
            compute_time(ms(200), 32, 32, f64::INFINITY, 1.0).as_ns(),
            u64::MAX
        );
    }

    #[test]
    fn windows_multiply_and_expire() {
        let us = SimInstant::from_us;
        let mut g = Gpus::default();
        g.slow_down(1, 2, 3.0, us(100), SimDuration::from_us(50));
        assert_eq!(g.slowdown(1, 2, us(110)), 3.0);
        g.slow_down(1, 2, 2.0, us(120), SimDuration::ZERO);
        assert_eq!(g.slowdown(1, 2, us(130)), 6.0);
        assert_eq!(g.slowdown(1, 2, us(150)), 2.0);
        assert_eq!(g.slowdown(1, 3, us(150)), 1.0);
        assert_eq!(g.slowdown(1, 2, SimInstant::from_ns(u64::MAX - 1)), 2.0);
    }

    #[test]
    fn failures_last_until_reset() {
        let mut g = Gpus::default();
        g.fail(0, 3);
        assert!(g.is_failed(0, 3));
        assert!(!g.is_failed(0, 2));
        g.reset_node(0);
        assert!(!g.is_failed(0, 3));
        assert_eq!(gpu_of_local_rank(9, 8), 1);
    }
}
