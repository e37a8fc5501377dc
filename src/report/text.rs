//! The text report for people: the job's story first, then the verdict, then the details.
//!
//! The story says whether the job finished, when training stopped for good and why (each
//! agent's end in words), the steps done of the steps asked and the time lost. The verdict
//! line starts `verdict  as expected` or `verdict  UNEXPECTED`, tokens CI may grep. Every
//! report, passing or not, ends with its repro command on a line of its own, so the last
//! line is always what to paste to replay the run.

use super::{AgentSummary, Report};
use crate::check::{secs, Status};
use std::fmt::Write;

/// The verdict's words when every expectation was met, and when one was not.
pub const VERDICT_AS_EXPECTED: &str = "as expected";
pub const VERDICT_UNEXPECTED: &str = "UNEXPECTED";

/// Renders a report; see the module docs for the layout's promises.
pub(super) fn render(report: &Report) -> String {
    let mut out = String::new();
    let r = report;
    let _ = writeln!(out, "scenario {} ({}), seed {}", r.scenario, r.file, r.seed);
    story(&mut out, report);
    verdict(&mut out, report);
    let _ = writeln!(out, "details");
    details(&mut out, report);
    rounds(&mut out, report);
    agents(&mut out, report);
    invariants(&mut out, report);
    let _ = writeln!(out, "replay with:");
    let _ = writeln!(out, "{}", r.repro);
    out
}

/// A reason can list dozens of store keys; the JSON report has every sentence whole.
const REASON_CHARS_MAX: usize = 200;

/// At most this many distinct agent ends are listed; the JSON report has every agent.
const ENDS_LISTED_MAX: usize = 6;

/// `text` cut to `max` characters, with an ellipsis when it was cut.
fn cut(text: &str, max: usize) -> String {
    match text.chars().count() > max {
        true => text.chars().take(max).collect::<String>() + " …",
        false => text.to_owned(),
    }
}

/// Finished or not, when training stopped for good and why, steps done of steps asked, and
/// the time lost.
fn story(out: &mut String, r: &Report) {
    let g = &r.goodput;
    let (done, asked) = (r.job.steps_done, r.job.steps_asked);
    let stopped = secs(g.training_stopped_at_us);
    let line = match r.outcome.as_str() {
        "succeeded" => format!("finished: training ended at {stopped} with all {asked} steps done"),
        "timed_out" => format!(
            "did not finish: the time limit ended the run at {} with step {done} of {asked} \
             done; training last advanced at {stopped}",
            secs(r.sim_time_us)
        ),
        _ => format!(
            "did not finish: training stopped for good at {stopped} after step {done} of {asked}"
        ),
    };
    let _ = writeln!(out, "job      {line}");
    if r.outcome != "succeeded" {
        agent_ends(out, r);
    }
    goodput(out, r);
}

/// Which agent ended the job and why, then each agent's end in words, agents that ended
/// alike on one line, in node order.
fn agent_ends(out: &mut String, r: &Report) {
    if let Some((node, reason)) = failed_first(&r.goodput.fate) {
        let _ = writeln!(
            out,
            "why      {node}'s agent failed: {}",
            cut(reason, REASON_CHARS_MAX)
        );
    }
    let mut ends: Vec<(String, Vec<&str>)> = Vec::new();
    for agent in &r.agents {
        let end = agent_end(agent);
        match ends.iter_mut().find(|(e, _)| *e == end) {
            Some((_, nodes)) => nodes.push(&agent.node),
            None => ends.push((end, vec![&agent.node])),
        }
    }
    if ends.is_empty() {
        let _ = writeln!(out, "ends     no agent ever started");
    }
    for (i, (end, nodes)) in ends.iter().enumerate().take(ENDS_LISTED_MAX) {
        let label = if i == 0 { "ends" } else { "" };
        let _ = writeln!(out, "{label:<8} {} {end}", node_list(nodes));
    }
    if ends.len() > ENDS_LISTED_MAX {
        let agents: usize = ends[ENDS_LISTED_MAX..].iter().map(|(_, n)| n.len()).sum();
        let _ = writeln!(
            out,
            "         … and {agents} more agents that ended otherwise (each in --format json)"
        );
    }
}

/// The node whose agent's failure ended the job, and its reason, as the fate names them.
fn failed_first(fate: &str) -> Option<(&str, &str)> {
    let (before, reason) = fate.split_once(super::goodput::AGENT_FAILED)?;
    let node = before.rsplit(": ").next()?;
    Some((node, reason))
}

/// How one agent ended, in words. The store keys a timed-out wait lists differ from agent
/// to agent, so they are left out and agents that timed out alike share a line.
fn agent_end(agent: &AgentSummary) -> String {
    match agent.final_state.as_str() {
        "KILLED" => "lost to a fault (killed or powered off), not restarted".to_owned(),
        "RUNNING" => "still running when the run ended".to_owned(),
        state if agent.exit_reason.is_empty() => format!("{state}: no reason recorded"),
        state => {
            let reason = match agent.exit_reason.split_once("keys: ") {
                Some((gist, keys)) => {
                    let after_keys = keys.find(')').map_or("", |i| &keys[i..]);
                    format!("{gist}keys: …{after_keys}")
                }
                None => agent.exit_reason.clone(),
            };
            format!("{state}: {}", cut(&reason, REASON_CHARS_MAX))
        }
    }
}

/// Node names, a long list cut.
fn node_list(nodes: &[&str]) -> String {
    const SHOWN_MAX: usize = 4;
    match nodes.len() > SHOWN_MAX {
        true => format!(
            "{} and {} more",
            nodes[..SHOWN_MAX].join(", "),
            nodes.len() - SHOWN_MAX
        ),
        false => nodes.join(", "),
    }
}

/// The job's goodput: the share of the wall time its kept steps took, and where the rest
/// went, largest first.
fn goodput(out: &mut String, r: &Report) {
    let g = &r.goodput;
    let mut lost: Vec<(&str, u64)> = g
        .badput_us
        .iter()
        .filter(|(_, &us)| us > 0)
        .map(|(&cause, &us)| (cause, us))
        .collect();
    lost.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let lost_us: u64 = lost.iter().map(|(_, us)| us).sum();
    let causes: Vec<String> = lost
        .iter()
        .map(|(cause, us)| format!("{} {}", cause.replace('_', " "), secs(*us)))
        .collect();
    let _ = writeln!(
        out,
        "goodput  ETTR {:.1} %: {} of {} trained and kept{}",
        g.ettr * 100.0,
        secs(g.productive_us),
        secs(g.wall_us),
        match causes.is_empty() {
            true => "; no time lost".to_owned(),
            false => format!("; {} lost: {}", secs(lost_us), causes.join(", ")),
        }
    );
}

/// One line for one seed of a passing batch (`run --seeds`): the seed, how the job ended,
/// its ETTR and the verdict. A run that did not pass prints its whole report instead.
pub fn batch_line(r: &Report) -> String {
    let stopped = secs(r.goodput.training_stopped_at_us);
    let (done, asked) = (r.job.steps_done, r.job.steps_asked);
    let job = match r.outcome.as_str() {
        "succeeded" => format!("finished at {stopped}"),
        "timed_out" => format!("timed out, step {done} of {asked}"),
        _ => format!("stopped for good at {stopped}, step {done} of {asked}"),
    };
    let mut verdict = String::new();
    self::verdict(&mut verdict, r);
    let verdict = verdict
        .lines()
        .next()
        .unwrap_or("")
        .trim_start_matches("verdict  ");
    format!(
        "seed {:<5} {job:<48} ETTR {:>5.1} %  {verdict}",
        r.seed,
        r.goodput.ettr * 100.0
    )
}

/// The verdict line, and each unmet expectation under it: what a batch (`trainsim check`)
/// shows of a run that failed.
pub fn verdict_block(r: &Report) -> String {
    let mut out = String::new();
    verdict(&mut out, r);
    out
}

/// `as expected` or `UNEXPECTED`, with what happened in brackets; an unexpected run lists
/// each unmet expectation under it.
fn verdict(out: &mut String, r: &Report) {
    let job = match r.outcome.as_str() {
        "succeeded" => "job finished",
        "timed_out" => "job timed out",
        _ => "job failed",
    };
    let violated = r
        .invariants
        .iter()
        .filter(|i| i.status == Status::Violated)
        .count();
    // A passing run's violations are the ones its scenario expects.
    let kind = if r.passed() { "expected " } else { "" };
    let violations = match violated {
        0 => "no violations".to_owned(),
        1 => format!("1 {kind}violation"),
        n => format!("{n} {kind}violations"),
    };
    if r.passed() {
        let _ = writeln!(out, "verdict  {VERDICT_AS_EXPECTED} ({job}, {violations})");
        return;
    }
    let unmet = match r.expect.failures.len() {
        1 => "1 expectation not met".to_owned(),
        n => format!("{n} expectations not met"),
    };
    let _ = writeln!(
        out,
        "verdict  {VERDICT_UNEXPECTED} ({job}, {violations}; {unmet})"
    );
    for failure in &r.expect.failures {
        let _ = writeln!(out, "  - {failure}");
    }
}

/// When the simulation ended (after the job's end, as agents wind down), the trace, and
/// the job's counters.
fn details(out: &mut String, r: &Report) {
    let hash: String = r.trace_hash.chars().take(16).collect();
    let _ = writeln!(
        out,
        "outcome  {}; the simulation ended at {}, {} events, trace {hash}",
        r.outcome,
        secs(r.sim_time_us),
        r.events
    );
    let _ = writeln!(
        out,
        "steps    {} done of {}, {} samples seen, {} epochs",
        r.job.steps_done, r.job.steps_asked, r.job.samples_seen, r.job.epochs
    );
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
    if let Some(eval) = &r.eval {
        let _ = writeln!(out, "eval     {}", eval_line(eval));
    }
}

/// The evaluation pass in one sentence: what evening the set out did and the bias bound.
fn eval_line(e: &crate::job::eval::EvalPass) -> String {
    let split = format!(
        "{} samples over {} ranks (drop_last {}): {} per rank, {} evaluated",
        e.dataset_len, e.world_size, e.drop_last, e.per_rank, e.evaluated
    );
    let what = if e.duplicated > 0 && e.duplicated < e.dataset_len {
        let last = e.duplicated - 1;
        format!(
            "padding counts samples 0 to {last} twice ({} copies)",
            e.duplicated
        )
    } else if e.duplicated > 0 {
        format!("padding repeats the whole set ({} copies)", e.duplicated)
    } else if e.dropped > 0 {
        format!(
            "drop_last leaves out {} samples (indices {} to {})",
            e.dropped,
            e.dataset_len - e.dropped,
            e.dataset_len - 1
        )
    } else {
        "an even split, every sample once".to_owned()
    };
    let bias = match e.mean_bias_max {
        Some(b) => format!("a mean metric in [0, 1] can be off by up to {b}"),
        None => "no rank evaluates a sample: the mean is undefined".to_owned(),
    };
    format!("{split}; {what}; {bias}")
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

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(node: &str, state: &str, reason: &str) -> AgentSummary {
        AgentSummary {
            node: node.to_owned(),
            restarts: 0,
            final_state: state.to_owned(),
            membership_restarts: 0,
            processes: 1,
            restart_count: 0,
            worker_group_state: String::new(),
            exit_reason: reason.to_owned(),
        }
    }

    #[test]
    fn agents_that_timed_out_alike_share_a_line_whatever_keys_they_waited_for() {
        let a = agent(
            "node-0",
            "FAILED",
            "wait timeout after 60000ms, keys: a/0, a/1",
        );
        let b = agent("node-1", "FAILED", "wait timeout after 60000ms, keys: a/7");
        assert_eq!(agent_end(&a), agent_end(&b));
        assert_eq!(agent_end(&a), "FAILED: wait timeout after 60000ms, keys: …");
        let c = agent(
            "node-2",
            "FAILED",
            "worker 0 failed (x, keys: k/0) and no restarts remain",
        );
        assert_eq!(
            agent_end(&c),
            "FAILED: worker 0 failed (x, keys: …) and no restarts remain"
        );
        assert!(agent_end(&agent("node-3", "KILLED", "")).starts_with("lost to a fault"));
    }

    #[test]
    fn the_fate_names_the_agent_that_ended_the_job() {
        let fate = format!(
            "training stopped for good at 5 s after step 3 of 10: node-4{}boom",
            crate::report::goodput::AGENT_FAILED
        );
        assert_eq!(failed_first(&fate), Some(("node-4", "boom")));
        assert_eq!(
            failed_first("training finished at 5 s: all 10 steps done"),
            None
        );
    }

    #[test]
    fn long_lists_and_reasons_are_cut() {
        assert_eq!(node_list(&["a", "b"]), "a, b");
        assert_eq!(
            node_list(&["a", "b", "c", "d", "e", "f"]),
            "a, b, c, d and 2 more"
        );
        assert_eq!(cut("abcdef", 3), "abc …");
        assert_eq!(cut("abc", 3), "abc");
    }
}
