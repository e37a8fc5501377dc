//! Flat stretches: a running worker group that took no step for much longer than a step
//! takes (a hang until a collective's timeout, a wait for a paused peer), shaded on its node
//! and labelled with what the trace says began and ended it.

use super::page_text;
use super::timeline::{interval, node_of, Group, Note, Shade, Timeline};
use crate::check::at_secs;
use crate::report::node_order;
use crate::scenario::model::Scenario;
use crate::sim_time::SimDuration;
use crate::trace::{EventKind, Trace};

/// No stretch shorter than this is flat, however short a step is.
const FLAT_US_MIN: u64 = 5_000_000;
/// A stretch is flat past this many step times (plus a checkpoint's save time when the
/// group wrote one at its start).
const STEPS_FLAT: u64 = 10;

/// Shades and labels every flat stretch of every worker group.
pub(super) fn add(timeline: &mut Timeline, scenario: &Scenario, trace: &Trace, groups: &[Group]) {
    for group in groups {
        let gaps = gaps(group);
        // A step as long as the group's steps took (the all-reduce can outlast the compute).
        let step_us = median_step_us(&gaps).max(scenario.job.step_time.as_us());
        for (start_us, end_us, ended_by_step) in gaps {
            let allowed_us = (STEPS_FLAT * step_us).max(FLAT_US_MIN);
            let gap_us = end_us - start_us;
            // A checkpoint written within the stretch accounts for its save time.
            if gap_us <= allowed_us
                || (gap_us <= allowed_us + scenario.job.checkpoint_save_time.as_us()
                    && wrote_checkpoint(trace, start_us, end_us))
            {
                continue;
            }
            let label = page_text(&label(
                trace,
                group,
                start_us,
                end_us,
                ended_by_step,
                step_us,
            ));
            let row = timeline.rows.entry(node_order(&group.node)).or_default();
            row.flats.push(Shade {
                start_us,
                end_us,
                class: "flat",
                title: format!("{label} ({})", interval(start_us, end_us)),
            });
            row.notes.push(Note {
                at_us: start_us,
                class: "flat-note",
                text: label,
            });
        }
    }
}

/// The median time between the group's steps (0 with fewer than two).
fn median_step_us(gaps: &[(u64, u64, Option<u64>)]) -> u64 {
    let mut between: Vec<u64> = gaps
        .iter()
        .filter(|g| g.2.is_some())
        .map(|g| g.1 - g.0)
        .collect();
    between.sort_unstable();
    between.get(between.len() / 2).copied().unwrap_or(0)
}

/// The group's stretches without a step: between steps, and from its last step to its end
/// (or from its start, when it never took one). Each says whether a step ended it.
fn gaps(group: &Group) -> Vec<(u64, u64, Option<u64>)> {
    let mut out = Vec::new();
    let Some(&(first_us, _)) = group.steps.first() else {
        out.push((group.start_us, group.end_us, None));
        return out;
    };
    let mut last_us = first_us;
    for &(at_us, step) in &group.steps[1..] {
        out.push((last_us, at_us, Some(step)));
        last_us = at_us;
    }
    out.push((last_us, group.end_us, None));
    out
}

/// Whether group rank 0 (on whichever node) finished writing a checkpoint within the
/// stretch: a blocking save holds every node's next step for its save time.
fn wrote_checkpoint(trace: &Trace, start_us: u64, end_us: u64) -> bool {
    trace.events.iter().any(|e| {
        matches!(e.kind, EventKind::Checkpoint { .. })
            && (start_us..=end_us).contains(&e.at.as_us())
    })
}

/// `no step for 599.9 s — from the power_off of node-2 at 40 s until worker 0 failed: …`.
fn label(
    trace: &Trace,
    group: &Group,
    start_us: u64,
    end_us: u64,
    ended_by_step: Option<u64>,
    step_us: u64,
) -> String {
    // Tenths of a second: the stretch's exact ends are in its tooltip.
    let stalled = SimDuration::from_us(end_us - start_us);
    let mut text = format!("no step for {:.1} s", stalled.as_secs_f64());
    // The first fault from one step before the stretch to its end: what the trace shows
    // happening as training stopped.
    let fault = trace.events.iter().find(|e| {
        matches!(e.kind, EventKind::FaultApplied { .. })
            && e.at.as_us() + step_us >= start_us
            && e.at.as_us() < end_us
    });
    if let Some(e) = fault {
        if let EventKind::FaultApplied { fault, .. } = &e.kind {
            let on = node_of(e).map(|n| format!(" of {n}")).unwrap_or_default();
            text.push_str(&format!(" — from the {fault}{on} at {}", at_secs(e.at)));
        }
    }
    let until = match ended_by_step {
        Some(step) => format!("step {step}"),
        None => ending(trace, group, start_us, end_us),
    };
    text.push_str(&format!(" until {until}"));
    text
}

/// What the trace shows ending the group's stretch on its node.
fn ending(trace: &Trace, group: &Group, start_us: u64, end_us: u64) -> String {
    let found = trace
        .events
        .iter()
        .filter(|e| e.at.as_us() > start_us && e.at.as_us() <= end_us)
        .filter(|e| node_of(e).as_deref() == Some(group.node.as_str()))
        .find_map(|e| match &e.kind {
            EventKind::WorkerFailed {
                local_rank, reason, ..
            } => Some(format!("worker {local_rank} failed: {reason}")),
            EventKind::AgentRestart { reason, .. } => {
                Some(format!("the agent restarted ({reason})"))
            }
            EventKind::WorkersStopped { reason, .. } => {
                Some(format!("the agent stopped its workers ({reason})"))
            }
            EventKind::AgentKilled { .. } => Some("the agent was killed".to_owned()),
            EventKind::AgentExited { state, reason, .. } => {
                Some(format!("the agent exited {state}: {reason}"))
            }
            _ => None,
        });
    found.unwrap_or_else(|| "the run ended".to_owned())
}
