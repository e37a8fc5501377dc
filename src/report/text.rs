//! The text report for people: the same facts as the JSON, laid out to read in a terminal.
//!
//! A failed run ends with its repro command on a line of its own, so the last line of any
//! failure is what to paste to replay it.

use super::Report;
use crate::check::{secs, Status};
use std::fmt::Write;

/// Renders a report; see the module docs for the layout's one promise.
pub(super) fn render(report: &Report) -> String {
    let mut out = String::new();
    header(&mut out, report);
    rounds(&mut out, report);
    agents(&mut out, report);
    invariants(&mut out, report);
    verdict(&mut out, report);
    out
}

fn header(out: &mut String, r: &Report) {
    let hash: String = r.trace_hash.chars().take(16).collect();
    let _ = writeln!(out, "scenario {} ({}), seed {}", r.scenario, r.file, r.seed);
    let _ = writeln!(
        out,
        "outcome  {} at {}, {} events, trace {hash}",
        r.outcome,
        secs(r.sim_time_us),
        r.events
    );
    let _ = writeln!(
        out,
        "job      {} steps done, {} samples seen, {} epochs",
        r.job.steps_done, r.job.samples_seen, r.job.epochs
    );
    goodput(out, r);
    if let Some(reader) = &r.reader {
        let records: u64 = reader.epochs.iter().map(|e| e.records_delivered).sum();
        let skipped: u64 = reader.epochs.iter().map(|e| e.records_skipped).sum();
        let _ = writeln!(
            out,
            "reader   {} epochs on node-0, {records} records delivered, {skipped} skipped, trainer stalled {}",
            reader.epochs.len(),
            secs(reader.stall_us)
        );
    }
}

/// The job's fate, then its goodput: the share of the wall time its kept steps took, and
/// where the rest went, largest first.
fn goodput(out: &mut String, r: &Report) {
    // A reason can list dozens of store keys; the JSON report has the sentence whole.
    const FATE_CHARS_MAX: usize = 300;
    let g = &r.goodput;
    let fate: String = match g.fate.chars().count() > FATE_CHARS_MAX {
        true => g.fate.chars().take(FATE_CHARS_MAX).collect::<String>() + " …",
        false => g.fate.clone(),
    };
    let _ = writeln!(out, "fate     {fate}");
    let mut lost: Vec<(&str, u64)> = g
        .badput_us
        .iter()
        .filter(|(_, &us)| us > 0)
        .map(|(&cause, &us)| (cause, us))
        .collect();
    lost.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let lost: Vec<String> = lost
        .iter()
        .map(|(cause, us)| format!("{} {}", cause.replace('_', " "), secs(*us)))
        .collect();
    let _ = writeln!(
        out,
        "goodput  ETTR {:.1} %: {} of {} trained and kept{}",
        g.ettr * 100.0,
        secs(g.productive_us),
        secs(g.wall_us),
        match lost.is_empty() {
            true => String::new(),
            false => format!("; lost: {}", lost.join(", ")),
        }
    );
}

fn rounds(out: &mut String, r: &Report) {
    if r.rounds.is_empty() {
        let _ = writeln!(out, "rounds   none completed");
        return;
    }
    let _ = writeln!(
        out,
        "rounds   {:>5}  {:>12}  {:>5}  participants",
        "round", "completed", "world"
    );
    for round in &r.rounds {
        let _ = writeln!(
            out,
            "         {:>5}  {:>12}  {:>5}  {}{}",
            round.round,
            secs(round.completed_at_us),
            round.world_size,
            participant_list(&round.participants),
            match round.store_incarnation {
                0 | 1 => String::new(),
                k => format!("  (restarted store, incarnation {k})"),
            }
        );
    }
}

/// Participants in rank order; a long list is cut (the JSON report has it whole).
fn participant_list(participants: &[String]) -> String {
    const SHOWN_MAX: usize = 16;
    if participants.len() <= SHOWN_MAX {
        return participants.join(" ");
    }
    let shown = participants[..SHOWN_MAX].join(" ");
    format!("{shown} … and {} more", participants.len() - SHOWN_MAX)
}

fn agents(out: &mut String, r: &Report) {
    if r.agents.is_empty() {
        let _ = writeln!(out, "agents   none started");
        return;
    }
    let _ = writeln!(
        out,
        "agents   {:<10} {:>8} {:>5}  final state",
        "node", "restarts", "free"
    );
    // A big cluster lists only the agents that differ from the usual one (the JSON report
    // has every agent).
    const LISTED_MAX: usize = 32;
    let usual = most_common_state(r);
    let notable = |a: &&crate::report::AgentSummary| a.restarts > 0 || a.final_state != usual;
    let listed: Vec<_> = if r.agents.len() <= LISTED_MAX {
        r.agents.iter().collect()
    } else {
        r.agents.iter().filter(notable).take(LISTED_MAX).collect()
    };
    for agent in &listed {
        let _ = writeln!(
            out,
            "         {:<10} {:>8} {:>5}  {}",
            agent.node, agent.restarts, agent.membership_restarts, agent.final_state
        );
    }
    let hidden = r.agents.len() - listed.len();
    let hidden_notable =
        r.agents.iter().filter(notable).count() - listed.iter().filter(|a| notable(a)).count();
    if hidden > 0 && hidden_notable == 0 {
        let _ = writeln!(
            out,
            "         … and {hidden} more, each {usual} with 0 restarts"
        );
    } else if hidden > 0 {
        let _ = writeln!(
            out,
            "         … and {hidden} more (all of them in --format json)"
        );
    }
}

/// The final state most agents ended in (ties go to the first in name order).
fn most_common_state(r: &Report) -> String {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for agent in &r.agents {
        *counts.entry(agent.final_state.as_str()).or_default() += 1;
    }
    let best = counts.values().copied().max().unwrap_or(0);
    counts
        .into_iter()
        .find(|(_, n)| *n == best)
        .map(|(s, _)| s.to_owned())
        .unwrap_or_default()
}

fn invariants(out: &mut String, r: &Report) {
    let _ = writeln!(out, "invariants");
    for inv in &r.invariants {
        let verdict = match inv.status {
            Status::Held => "held",
            Status::Violated => "VIOLATED",
            Status::NotApplicable => "n/a",
        };
        let _ = writeln!(out, "  {verdict:<9} {}", inv.name);
        for v in &inv.violations {
            let _ = writeln!(out, "              {}: {}", v.when_and_where(), v.message);
        }
    }
}

fn verdict(out: &mut String, r: &Report) {
    if r.passed() {
        let _ = writeln!(out, "PASSED");
        return;
    }
    let _ = writeln!(out, "FAILED");
    for failure in &r.expect.failures {
        let _ = writeln!(out, "  - {failure}");
    }
    let _ = writeln!(out, "reproduce with:");
    let _ = writeln!(out, "{}", r.repro);
}
