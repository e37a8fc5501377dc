//! `trainsim run --explain`: the run as a plain event log, one line per thing that changed
//! the job's course, in time order, read from the trace alone.
//!
//! Faults, rendezvous rounds (who joined, who left, the world size), agent processes
//! starting, restarting and exiting with their reasons, worker-group state changes, worker
//! failures, the store, checkpoints and restores, and the job's end. Steps, heartbeats and
//! reader buffers are left out: the Perfetto trace (`--trace`) has every event. A long log
//! keeps its beginning and its end and says how many lines it skipped.
//!
//! After it, the rendezvous round by round, from the run's story (`rounds_story`): each
//! round's participants, waiters and redundant nodes, then the steps that moved them.

use super::rounds_story::{self, Move, RoundTold};
use crate::scenario::node::NodeIndex;
use crate::sim_time::SimInstant;
use crate::trace::story::{distinct, names_shown, Member, STORY_MEMBERS_MAX, STORY_STEPS_MAX};
use crate::trace::{Event, EventKind, Story, Trace};
use std::collections::BTreeSet;

/// Lines shown from the start of a long log.
pub const HEAD_LINES_MAX: usize = 120;
/// Lines shown from the end of a long log (where the job's end is).
pub const TAIL_LINES_MAX: usize = 40;

/// One moment of the run as `m:ss.mmm`, or `h:mm:ss.mmm` past an hour.
pub fn clock(at: SimInstant) -> String {
    let span = at.since_start();
    let (ms, s_total) = (span.subsec_ms(), span.as_secs());
    let (s, m_total) = (s_total % 60, s_total / 60);
    let (m, h) = (m_total % 60, m_total / 60);
    match h {
        0 => format!("{m:02}:{s:02}.{ms:03}"),
        h => format!("{h}:{m:02}:{s:02}.{ms:03}"),
    }
}

/// What the log remembers while it reads the trace, so repeated facts print once.
#[derive(Default)]
struct Seen {
    /// Rounds already told, as (store incarnation, round).
    rounds: BTreeSet<(u64, u64)>,
    /// The participants of the round told last, to say who joined and who left.
    last_members: Vec<NodeIndex>,
    /// Checkpoint steps already told (every node records its own).
    checkpoints: BTreeSet<u64>,
    /// Whether the job's last step was told.
    finished: bool,
}

/// Every line of the log, in time order; `steps_asked` is the job's `steps`, to tell when
/// it finished.
pub fn lines(trace: &Trace, steps_asked: u64) -> Vec<String> {
    let mut seen = Seen::default();
    let mut out = Vec::new();
    for event in &trace.events {
        if let Some((text, scope)) = describe(event, steps_asked, &mut seen) {
            let at = clock(event.at);
            out.push(match (&event.node, scope) {
                (Some(node), Scope::Node) => format!("{at}  {node}: {text}"),
                _ => format!("{at}  {text}"),
            });
        }
    }
    if trace.truncated {
        out.push("the trace stopped recording here: it reached its event limit".to_owned());
    }
    out
}

/// Whether a line is about the node that recorded it, or about the whole job (a round, a
/// checkpoint, the job's end), which the first node to see it recorded.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    Node,
    Job,
}

/// What the log makes of an event about the whole job.
enum JobWide {
    /// A line to tell.
    Line(String),
    /// Told already (another node saw the same round or checkpoint).
    Told,
    /// Not about the whole job: the node's own line, if any.
    No,
}

/// One event in words and its scope, or `None` when the log leaves it out.
fn describe(event: &Event, steps_asked: u64, seen: &mut Seen) -> Option<(String, Scope)> {
    match job_wide(event, steps_asked, seen) {
        JobWide::Line(text) => Some((text, Scope::Job)),
        JobWide::Told => None,
        JobWide::No => node_line(&event.kind).map(|text| (text, Scope::Node)),
    }
}

/// A round, a checkpoint or the job's last step, the first time a node records it.
fn job_wide(event: &Event, steps_asked: u64, seen: &mut Seen) -> JobWide {
    use EventKind::*;
    match &event.kind {
        RendezvousCompleted {
            round,
            world_size,
            participants,
            store_incarnation,
            ..
        } => match seen.rounds.insert((*store_incarnation, *round)) {
            true => JobWide::Line(round_line(*round, *world_size, participants, seen)),
            false => JobWide::Told,
        },
        Checkpoint { step, .. } => match seen.checkpoints.insert(*step) {
            true => JobWide::Line(format!("checkpoint of step {step} written")),
            false => JobWide::Told,
        },
        Step { step, .. } if *step == steps_asked && !seen.finished => {
            seen.finished = true;
            JobWide::Line(format!(
                "training finished: step {step} of {steps_asked} done"
            ))
        }
        _ => JobWide::No,
    }
}

/// An event of one node in words, or `None` when the log leaves it out.
fn node_line(kind: &EventKind) -> Option<String> {
    use EventKind::*;
    let text = match kind {
        FaultApplied { fault, detail, .. } => format!("fault {fault}: {detail}"),
        FaultSkipped {
            fault,
            role,
            reason,
        } => format!("fault {fault} of {role} skipped: {reason}"),
        AgentStarted { pid } => format!("agent process started (pid {pid})"),
        AgentExited { state, reason, .. } => format!("agent exited {state}: {reason}"),
        AgentKilled { .. } => "agent process killed (SIGKILL or power loss)".to_owned(),
        RendezvousFailed { error, message, .. } => {
            format!("rendezvous failed ({error}): {message}")
        }
        RendezvousClosed { round, .. } => format!("closed the rendezvous in round {round}"),
        AgentRestart {
            counted,
            restart_count,
            reason,
            ..
        } => match counted {
            true => format!("agent restarts its workers (restart {restart_count}): {reason}"),
            false => format!("agent restarts its workers for a membership change (free): {reason}"),
        },
        WorkerGroupState { state, .. } => format!("worker group {state}"),
        WorkerFailed {
            local_rank,
            exit_code,
            reason,
            ..
        } => format!("worker {local_rank} failed (exit code {exit_code}): {reason}"),
        ResumedFromCheckpoint {
            step: 0,
            lost_steps: 0,
            ..
        } => "training starts from step 0".to_owned(),
        ResumedFromCheckpoint {
            step, lost_steps, ..
        } => format!("resumed from the checkpoint of step {step}, {lost_steps} steps to do again"),
        StoreStarted => "store server started".to_owned(),
        StoreDied { reason } => format!("store server died: {reason}"),
        ReaderHang { reason, .. } => format!("reader hangs: {reason}"),
        ReaderWorkerFailed { worker, reason, .. } => {
            format!("reader worker {worker} failed: {reason}")
        }
        RunEnded { outcome } => format!("run ended: {outcome}"),
        _ => return None,
    };
    Some(text)
}

/// A round as its first completion saw it: world size, members, who joined and who left
/// since the round told before.
fn round_line(round: u64, world_size: u32, members: &[NodeIndex], seen: &mut Seen) -> String {
    let joined: Vec<NodeIndex> = members
        .iter()
        .filter(|m| !seen.last_members.contains(m))
        .copied()
        .collect();
    let left: Vec<NodeIndex> = seen
        .last_members
        .iter()
        .filter(|m| !members.contains(m))
        .copied()
        .collect();
    let mut change = String::new();
    if !seen.last_members.is_empty() && !joined.is_empty() {
        change.push_str(&format!("; joined: {}", short_list(&joined)));
    }
    if !left.is_empty() {
        change.push_str(&format!("; left: {}", short_list(&left)));
    }
    let line = format!(
        "rendezvous round {round} complete: world size {world_size} ({}){change}",
        short_list(members)
    );
    seen.last_members = members.to_vec();
    line
}

/// Node names, a long list cut.
fn short_list(nodes: &[NodeIndex]) -> String {
    const SHOWN_MAX: usize = 8;
    let names = |nodes: &[NodeIndex]| {
        let names: Vec<String> = nodes.iter().map(ToString::to_string).collect();
        names.join(" ")
    };
    match nodes.len() > SHOWN_MAX {
        true => format!(
            "{} and {} more",
            names(&nodes[..SHOWN_MAX]),
            nodes.len() - SHOWN_MAX
        ),
        false => names(nodes),
    }
}

/// The rendezvous round by round, one line per round and one per move (see
/// `rounds_story`); empty when the story holds no step worth telling.
pub fn rendezvous_lines(story: &Story) -> Vec<String> {
    let rounds = rounds_story::rounds(story);
    let incarnations: BTreeSet<u64> = rounds.iter().map(|r| r.store_incarnation).collect();
    let mut out = Vec::new();
    for round in &rounds {
        out.push(round_header(round, incarnations.len() > 1));
        out.extend(
            round
                .moves
                .iter()
                .map(|m| format!("  {}", move_line(m, round.round))),
        );
        if let Some(alike) = round.alike {
            let first = alike.last_round + 1 - alike.rounds;
            let others = if alike.members_varied {
                ", other nodes taking the same places"
            } else {
                ""
            };
            out.push(format!(
                "rounds {first}-{} ({} rounds) went as round {} did{others}, until {}",
                alike.last_round,
                alike.rounds,
                round.round,
                clock(alike.last_at)
            ));
        }
    }
    if story.cut() {
        out.push(format!(
            "the story left out {} steps and the lists of {} more (its bounds: {STORY_STEPS_MAX} \
             steps, {STORY_MEMBERS_MAX} list entries)",
            story.steps_left_out, story.lists_left_out
        ));
    }
    out
}

/// A round's line: its participants and when it completed, who waited, who was redundant,
/// who expired, and when it closed.
fn round_header(round: &RoundTold<'_>, name_incarnation: bool) -> String {
    let mut line = match name_incarnation {
        true => format!(
            "store incarnation {}, round {}:",
            round.store_incarnation, round.round
        ),
        false => format!("round {}:", round.round),
    };
    let participants = match round.participants.is_empty() {
        true => "none".to_owned(),
        false => members_text(&round.participants),
    };
    match round.completed_at {
        Some(at) => line.push_str(&format!(
            " participants {participants}, marked complete at {}",
            clock(at)
        )),
        None => line.push_str(&format!(" participants {participants}, not complete")),
    }
    for (label, list) in [
        ("waited", &round.waited),
        ("redundant", &round.redundant),
        ("heartbeat expired", &round.dropped),
    ] {
        if !list.is_empty() {
            line.push_str(&format!("; {label}: {}", members_text(list)));
        }
    }
    if let Some(at) = round.closed_at {
        line.push_str(&format!("; closed at {}", clock(at)));
    }
    if round.lists_left_out {
        line.push_str("; some lists left out (the story's bound)");
    }
    line
}

/// One move of round `round`: when, who, which step of which op, and what it did beyond
/// its name.
fn move_line(m: &Move<'_>, round: u64) -> String {
    let when = match m.first_at == m.last_at {
        true => clock(m.first_at),
        false => format!("{}-{}", clock(m.first_at), clock(m.last_at)),
    };
    let takers = distinct(&m.takers);
    let times = match m.takers.len() == takers.len() {
        true => String::new(),
        false => format!(", {} steps", m.takers.len()),
    };
    let mut line = format!(
        "{when}  {}: {} ({}){times}",
        members_text(&takers),
        m.action,
        m.op.name()
    );
    if m.opened {
        line.push_str(&format!(", round {round} opens"));
    }
    if m.completed {
        line.push_str(", round complete");
    }
    if !m.dropped.is_empty() {
        line.push_str(&format!(
            ", removed {} (heartbeat expired)",
            members_text(&m.dropped)
        ));
    }
    line
}

/// List entries by node name, a long list cut; a node listed with two processes (a
/// restarted node's old entry) names each one's pid.
fn members_text(members: &[Member]) -> String {
    const SHOWN_MAX: usize = 8;
    let (shown, more) = names_shown(members, SHOWN_MAX, |m| {
        format!("{} (pid {})", m.node, m.pid)
    });
    match more {
        0 => shown.join(" "),
        more => format!("{} and {more} more", shown.join(" ")),
    }
}

/// The log for a terminal: every line when it is short, else its head and tail with the
/// count of lines between and where to find them.
pub fn render(lines: &[String], repro: &str) -> String {
    render_section("what happened", lines, repro)
}

/// A section of the log titled `title`, bounded as [`render`] bounds the event log.
pub fn render_section(title: &str, lines: &[String], repro: &str) -> String {
    let mut out = format!("{title}\n");
    let shown_max = HEAD_LINES_MAX + TAIL_LINES_MAX;
    let push = |out: &mut String, line: &String| {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    };
    if lines.len() <= shown_max {
        lines.iter().for_each(|l| push(&mut out, l));
        return out;
    }
    lines[..HEAD_LINES_MAX]
        .iter()
        .for_each(|l| push(&mut out, l));
    let skipped = lines.len() - shown_max;
    out.push_str(&format!(
        "  ... {skipped} more lines; every event is in the Perfetto trace: {repro} --trace run.json\n"
    ));
    lines[lines.len() - TAIL_LINES_MAX..]
        .iter()
        .for_each(|l| push(&mut out, l));
    out
}

/// The title of the rendezvous's section.
pub const RENDEZVOUS_TITLE: &str =
    "the rendezvous, round by round (steps that moved nodes between its lists)";

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;
