//! `[failures]`: failures as a process, read and bounded. The draw itself, from the run's
//! seed, is in `failure_draw`.

use super::limits::{FAULTS_MAX, TIME_LIMIT_US_MAX};
use super::locate::FieldPath;
use super::model::{AfterFailure, Cluster, FailureKind, FailureProcess};
use super::raw::RawFailures;
use super::values::*;
use crate::sim_time::{SimDuration, SimInstant};

/// The highest failure rate a node may have: one failure every 15 simulated minutes.
pub const RATE_PER_NODE_DAY_MAX: f64 = 96.0;
/// The Weibull shapes allowed: below 0.1 or above 10 the draws leave any cluster's data.
pub const WEIBULL_SHAPE_MIN: f64 = 0.1;
pub const WEIBULL_SHAPE_MAX: f64 = 10.0;
/// How many failures a run may expect at most (nodes × rate × days, counting every node
/// that may run): a tenth of the faults bound, so the draw stays far below it.
pub const EXPECTED_FAILURES_MAX: f64 = (FAULTS_MAX / 10) as f64;

/// Defaults: a repair takes half an hour, a replacement five minutes to schedule, and a
/// preempted pod has Kubernetes' `terminationGracePeriodSeconds` of 30 s.
const REPAIR_TIME_DEFAULT: SimDuration = SimDuration::from_ms(30 * 60_000);
const REPLACE_DELAY_DEFAULT: SimDuration = SimDuration::from_ms(5 * 60_000);
const PREEMPTION_GRACE_DEFAULT: SimDuration = SimDuration::from_ms(30_000);

const US_PER_DAY: f64 = 86_400e6;

/// Checks `[failures]` against the cluster and the time limit.
pub fn failures(
    raw: &Option<RawFailures>,
    cluster: &Cluster,
    time_limit: SimDuration,
) -> Check<Option<FailureProcess>> {
    let Some(f) = raw else {
        return Ok(None);
    };
    let p = FieldPath::root().key("failures");
    let rate_path = p.key("rate_per_node_day");
    let rate = required(&rate_path, &f.rate_per_node_day)?;
    let rate_per_node_day = float_in(&rate_path, rate, 0.0, RATE_PER_NODE_DAY_MAX)?;
    if rate_per_node_day <= 0.0 {
        return Err(issue(&rate_path, "must be above 0"));
    }
    let weibull_shape = float_in(
        &p.key("weibull_shape"),
        f.weibull_shape.unwrap_or(1.0),
        WEIBULL_SHAPE_MIN,
        WEIBULL_SHAPE_MAX,
    )?;
    let kinds = kinds(&p.key("kinds"), f)?;
    let duration =
        |key: &str, value, default| duration_or(&p.key(key), value, default, 0..=TIME_LIMIT_US_MAX);
    let from = SimInstant::from_start(duration("from", f.from, SimDuration::ZERO)?);
    let until = SimInstant::from_start(duration("until", f.until, time_limit)?);
    if until <= from {
        return Err(issue(&p.key("until"), "must be after `from`"));
    }
    let process = FailureProcess {
        rate_per_node_day,
        weibull_shape,
        kinds,
        after: f.after.unwrap_or(AfterFailure::Repair),
        repair_time: duration("repair_time", f.repair_time, REPAIR_TIME_DEFAULT)?,
        replace_delay: duration("replace_delay", f.replace_delay, REPLACE_DELAY_DEFAULT)?,
        preemption_grace: duration(
            "preemption_grace",
            f.preemption_grace,
            PREEMPTION_GRACE_DEFAULT,
        )?,
        from,
        until,
    };
    let days = until.since(from).as_us() as f64 / US_PER_DAY;
    let expected = f64::from(cluster.total_nodes()) * rate_per_node_day * days;
    if expected > EXPECTED_FAILURES_MAX {
        let msg = format!(
            "{} nodes at this rate over {days:.2} days expect {expected:.0} failures; at most \
             {EXPECTED_FAILURES_MAX:.0} may be expected",
            cluster.total_nodes()
        );
        return Err(issue(&rate_path, msg));
    }
    Ok(Some(process))
}

/// `kinds`: each kind's share, above 0, adding up to 1; `power_off` alone by default.
fn kinds(p: &FieldPath, f: &RawFailures) -> Check<Vec<(FailureKind, f64)>> {
    let Some(kinds) = &f.kinds else {
        return Ok(vec![(FailureKind::PowerOff, 1.0)]);
    };
    if kinds.is_empty() {
        return Err(issue(p, "must name at least one kind"));
    }
    let mut shares = Vec::new();
    for (kind, share) in kinds {
        let share = float_in(&p.key(&kind.to_string()), *share, 0.0, 1.0)?;
        if share <= 0.0 {
            return Err(issue(&p.key(&kind.to_string()), "must be above 0"));
        }
        shares.push((*kind, share));
    }
    let total: f64 = shares.iter().map(|(_, s)| s).sum();
    if (total - 1.0).abs() > 1e-9 {
        return Err(issue(
            p,
            format!("the shares must add up to 1 (they add up to {total})"),
        ));
    }
    Ok(shares)
}
