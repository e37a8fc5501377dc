//! Tests of the failure draw: seeded, at the rate asked, with repairs and replacements as
//! ordinary faults that parse back.

use super::*;
use crate::scenario::model::FaultName;
use crate::sim_time::{SimDuration, SimInstant};

const DAY_US: u64 = 86_400_000_000;

fn with_failures(nodes: u32, days: u64, text: &str) -> Scenario {
    let file = format!(
        "name = \"f\"\ntime_limit = \"{}h\"\n[cluster]\nnodes = {nodes}\n[rendezvous]\nmin_nodes = 1\nmax_nodes = {nodes}\n[failures]\n{text}\n",
        days * 24
    );
    crate::scenario::parse(&file, "f.toml").expect("a valid scenario")
}

fn count(s: &Scenario, name: FaultName) -> usize {
    s.faults
        .iter()
        .filter(|f| FaultName::from(&f.kind) == name)
        .count()
}

#[test]
fn no_process_plays_the_file_as_it_is() {
    let s = crate::scenario::default_scenario("plain");
    assert!(matches!(expand(&s, 3), Ok(Cow::Borrowed(_))));
}

#[test]
fn a_seed_draws_the_same_failures_and_another_seed_others() {
    let s = with_failures(16, 7, "rate_per_node_day = 0.5");
    let a = expand(&s, 1).unwrap().into_owned();
    let b = expand(&s, 1).unwrap().into_owned();
    let c = expand(&s, 2).unwrap().into_owned();
    assert_eq!(a, b);
    assert_ne!(a.faults, c.faults);
    assert!(a.failures.is_none() && a.seed == 1);
}

#[test]
fn failures_come_at_the_rate_asked() {
    // 20 nodes at 5 a day for 7 days, repaired at once: 700 failures expected, the horizon
    // 35 mean gaps long, so the renewal count is near horizon / mean for every shape.
    for shape in ["1.0", "0.7", "2.0"] {
        let text =
            format!("rate_per_node_day = 5.0\nrepair_time = \"0s\"\nweibull_shape = {shape}");
        let s = with_failures(20, 7, &text);
        assert_eq!(s.time_limit.as_us(), 7 * DAY_US);
        let drawn = expand(&s, 5).unwrap();
        let failures = count(&drawn, FaultName::PowerOff);
        assert!(
            (630..=770).contains(&failures),
            "shape {shape}: {failures} failures"
        );
        assert_eq!(count(&drawn, FaultName::Restart), failures);
    }
}

#[test]
fn a_replacement_is_a_new_node_that_starts_after_the_delay() {
    let s = with_failures(
        8,
        2,
        "rate_per_node_day = 1.0\nafter = \"replace\"\nreplace_delay = \"5m\"\nkinds = { preempt = 1.0 }\npreemption_grace = \"30s\"",
    );
    let drawn = expand(&s, 7).unwrap();
    let starts: Vec<&Fault> = drawn
        .faults
        .iter()
        .filter(|f| matches!(f.kind, FaultKind::Start { .. }))
        .collect();
    assert!(!starts.is_empty());
    assert_eq!(
        drawn.cluster.spare_nodes as usize,
        count(&drawn, FaultName::Stop)
    );
    for (i, start) in starts.iter().enumerate() {
        assert_eq!(start.kind, FaultKind::Start { node: 8 + i as u32 });
    }
    // Each preemption: SIGTERM, the host gone 30 s later, its replacement 5 min after that.
    let stop = drawn
        .faults
        .iter()
        .find(|f| matches!(f.kind, FaultKind::Stop { .. }))
        .unwrap();
    let FaultKind::Stop { node } = stop.kind else {
        unreachable!()
    };
    let gone = drawn
        .faults
        .iter()
        .find(|f| f.kind == FaultKind::PowerOff { node })
        .unwrap();
    assert_eq!(gone.at, stop.at.after(SimDuration::from_secs(30)));
    assert!(starts
        .iter()
        .any(|s| s.at == gone.at.after(SimDuration::from_secs(300))));
}

#[test]
fn the_drawn_scenario_is_an_ordinary_file() {
    let s = with_failures(
        4,
        1,
        "rate_per_node_day = 2.0\nkinds = { power_off = 0.5, gpu_fail = 0.25, hang = 0.25 }",
    );
    let drawn = expand(&s, 11).unwrap().into_owned();
    let text = crate::scenario::emit::to_toml(&drawn);
    assert_eq!(crate::scenario::parse(&text, "drawn.toml").unwrap(), drawn);
    // And the process itself writes back as it was read.
    let text = crate::scenario::emit::to_toml(&s);
    assert_eq!(crate::scenario::parse(&text, "f.toml").unwrap(), s);
}

#[test]
fn a_draw_past_the_faults_bound_is_an_error() {
    let mut s = with_failures(4, 1, "rate_per_node_day = 1.0");
    if let Some(p) = s.failures.as_mut() {
        p.rate_per_node_day = 1e9;
        p.repair_time = SimDuration::ZERO;
    }
    assert_eq!(expand(&s, 1).unwrap_err(), DrawError::TooManyFaults);
}

#[test]
fn a_failed_gpu_drains_its_node_for_repair() {
    let s = with_failures(
        4,
        2,
        "rate_per_node_day = 2.0\nkinds = { gpu_fail = 1.0 }\npreemption_grace = \"30s\"\nrepair_time = \"1h\"",
    );
    let drawn = expand(&s, 3).unwrap();
    let failures: Vec<&Fault> = drawn
        .faults
        .iter()
        .filter(|f| matches!(f.kind, FaultKind::GpuFail { .. }))
        .collect();
    assert!(failures.len() > 4, "{} gpu failures", failures.len());
    for failure in failures {
        let FaultKind::GpuFail { node, .. } = failure.kind else {
            unreachable!()
        };
        let after = |kind: FaultKind, delay: SimDuration| {
            drawn
                .faults
                .iter()
                .any(|f| f.kind == kind && f.at == failure.at.after(delay))
        };
        // The agent is stopped at once, the node goes down after the grace, back 1 h later.
        assert!(
            after(FaultKind::Stop { node }, SimDuration::ZERO),
            "{failure:?} drains"
        );
        let down = SimDuration::from_secs(30);
        let back = down.saturating_add(SimDuration::from_secs(3_600));
        let repaired = after(FaultKind::Restart { node }, back);
        assert!(after(FaultKind::PowerOff { node }, down), "{failure:?}");
        assert!(
            repaired || failure.at.after(back) >= SimInstant::from_start(s.time_limit),
            "{failure:?} is repaired"
        );
    }
    assert!(
        count(&drawn, FaultName::Restart) > 0,
        "some drained node is repaired"
    );
}
