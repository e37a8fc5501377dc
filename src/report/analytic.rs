//! Closed-form goodput models from the literature, to set beside what a run measures:
//! Kokolis et al.'s expected ETTR of a job under failures and Daly's optimum checkpoint
//! interval.
//!
//! Both treat recovery as a constant and failures as a Poisson process; trainsim runs the
//! protocol instead. Where torch recovers cleanly the two must agree (a test pins it);
//! where torch's recovery hangs, races or spends its budget they part, and that gap is what
//! trainsim is for (docs/goodput.md).

/// Seconds in a day: failure rates are per node-day.
const SECONDS_PER_DAY: f64 = 86_400.0;

/// A job as Kokolis et al.'s ETTR model sees it ("Revisiting Reliability in Large-Scale
/// Machine Learning Research Clusters", HPCA 2025).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobReliability {
    /// N: nodes the job runs on.
    pub nodes: u32,
    /// r_f: failures per node per day.
    pub failures_per_node_day: f64,
    /// u0: the time one failure costs besides lost progress (detection, rendezvous, worker
    /// start, checkpoint restore).
    pub restart_overhead_s: f64,
    /// Δt_cp: training time between two checkpoints.
    pub checkpoint_interval_s: f64,
    /// w_cp: training time one blocking checkpoint write takes.
    pub checkpoint_write_s: f64,
}

impl JobReliability {
    /// The job's mean time between failures, M = 1 / (N · r_f), in seconds.
    pub fn mean_time_between_failures_s(&self) -> f64 {
        SECONDS_PER_DAY / (f64::from(self.nodes) * self.failures_per_node_day)
    }

    /// The expected failures per checkpoint interval and restart, N · r_f · (u0 + Δt_cp):
    /// the first-order model holds while this is small (at most [`KOKOLIS_VALID_LOAD_MAX`]),
    /// so that two failures rarely fall into one interval or one recovery.
    pub fn failure_load(&self) -> f64 {
        (self.restart_overhead_s + self.checkpoint_interval_s) / self.mean_time_between_failures_s()
    }

    /// E[ETTR] ≈ (1 − N·r_f·(u0 + Δt_cp/2)) / (1 + w_cp/Δt_cp): each failure loses the
    /// restart and, on average, half an interval of progress; every interval pays one write.
    pub fn kokolis_expected_ettr(&self) -> f64 {
        let lost_per_failure_s = self.restart_overhead_s + self.checkpoint_interval_s / 2.0;
        let kept = 1.0 - lost_per_failure_s / self.mean_time_between_failures_s();
        kept.max(0.0) / (1.0 + self.checkpoint_write_s / self.checkpoint_interval_s)
    }

    /// Daly's optimum checkpoint interval for this job's write time and MTBF.
    pub fn daly_optimal_interval_s(&self) -> f64 {
        daly_optimal_interval_s(self.checkpoint_write_s, self.mean_time_between_failures_s())
    }
}

/// The failure load up to which [`JobReliability::kokolis_expected_ettr`] is taken as valid:
/// about one failure in seven intervals-plus-restarts.
pub const KOKOLIS_VALID_LOAD_MAX: f64 = 0.15;

/// Daly's higher-order estimate of the checkpoint interval that maximises useful work
/// ("A higher order estimate of the optimum checkpoint interval for restart dumps", 2006):
/// τ = sqrt(2δM)·[1 + (1/3)·sqrt(δ/(2M)) + (1/9)·δ/(2M)] − δ for δ < 2M, and M beyond,
/// with δ the write time and M the mean time between failures.
pub fn daly_optimal_interval_s(write_s: f64, mtbf_s: f64) -> f64 {
    if write_s >= 2.0 * mtbf_s {
        return mtbf_s;
    }
    let ratio = write_s / (2.0 * mtbf_s);
    (2.0 * write_s * mtbf_s).sqrt() * (1.0 + ratio.sqrt() / 3.0 + ratio / 9.0) - write_s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> JobReliability {
        JobReliability {
            nodes: 4,
            failures_per_node_day: 18.0,
            restart_overhead_s: 25.0,
            checkpoint_interval_s: 120.0,
            checkpoint_write_s: 5.0,
        }
    }

    #[test]
    fn the_mtbf_divides_a_day_by_the_job_failure_rate() {
        assert!((job().mean_time_between_failures_s() - 1200.0).abs() < 1e-9);
    }

    #[test]
    fn kokolis_by_hand() {
        // (1 - (25 + 60) / 1200) / (1 + 5 / 120)
        let expected = (1.0 - 85.0 / 1200.0) / (1.0 + 5.0 / 120.0);
        assert!((job().kokolis_expected_ettr() - expected).abs() < 1e-12);
        assert!((job().failure_load() - 145.0 / 1200.0).abs() < 1e-12);
    }

    #[test]
    fn without_failures_only_the_writes_cost() {
        let quiet = JobReliability {
            failures_per_node_day: 1e-12,
            ..job()
        };
        assert!((quiet.kokolis_expected_ettr() - 120.0 / 125.0).abs() < 1e-6);
    }

    #[test]
    fn daly_by_hand_and_near_young() {
        // δ = 5 s, M = 1200 s: sqrt(12000) · (1 + sqrt(1/480)/3 + 1/4320) - 5
        let ratio: f64 = 5.0 / 2400.0;
        let expected = 12_000f64.sqrt() * (1.0 + ratio.sqrt() / 3.0 + ratio / 9.0) - 5.0;
        assert!((job().daly_optimal_interval_s() - expected).abs() < 1e-9);
        // Young's first-order sqrt(2δM) is within a few percent when δ ≪ M.
        let young = 12_000f64.sqrt();
        assert!((expected / young - 1.0).abs() < 0.05);
        assert_eq!(daly_optimal_interval_s(50.0, 10.0), 10.0);
    }

    #[test]
    fn the_daly_interval_maximises_the_kokolis_ettr_closely() {
        let best = job().daly_optimal_interval_s();
        let at = |interval: f64| {
            JobReliability {
                checkpoint_interval_s: interval,
                ..job()
            }
            .kokolis_expected_ettr()
        };
        assert!(at(best) > at(best / 2.0) && at(best) > at(best * 2.0));
    }
}
