//! The run's timeline as data: per node, bars for the agent's worker-group states, its
//! rendezvous (joining; in a round from when any node saw it complete with this one in it;
//! then the round with its rank and world size), its worker groups and the store; its
//! training progress as steps over time; point markers for kills, restarts (counted or
//! free), worker failures and violations; and notes written in text (each agent's exit).
//! Faults and flat stretches are added by `fault_shades` and `stretches`; `draw` renders it.

use super::{esc, fault_shades, page_text, stretches};
use crate::report::{node_order, Report};
use crate::scenario::model::Scenario;
use crate::scenario::node::NodeIndex;
use crate::sim_time::SimInstant;
use crate::trace::{Event, EventKind, Trace};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The lanes of a node's row, top to bottom.
pub(super) const STATE: u8 = 0;
pub(super) const RDZV: u8 = 1;
pub(super) const WORKERS: u8 = 2;
pub(super) const STORE: u8 = 3;
/// The row of events that name no node.
pub(super) const CLUSTER: &str = "cluster";

/// The node an event happened on, when one applies: the one place the page reads it.
pub(super) fn node_of(event: &Event) -> Option<String> {
    event.node.map(|n| n.to_string())
}

/// A bar on one lane.
pub(super) struct Span {
    pub lane: u8,
    pub start_us: u64,
    pub end_us: u64,
    pub class: String,
    pub title: String,
    /// Extra `data-*` attributes, already escaped.
    pub attrs: String,
}

/// A point marker across the row.
pub(super) struct Mark {
    pub at_us: u64,
    pub class: &'static str,
    pub title: String,
    pub id: Option<String>,
    pub attrs: String,
}

/// Text written on the row at a moment (an exit reason, a flat stretch, a fault).
pub(super) struct Note {
    pub at_us: u64,
    pub class: &'static str,
    pub text: String,
}

/// A stretch of time shaded over the row (a fault's duration) or over its steps (a flat
/// stretch of training).
pub(super) struct Shade {
    pub start_us: u64,
    pub end_us: u64,
    pub class: &'static str,
    pub title: String,
}

/// One node's row.
#[derive(Default)]
pub(super) struct Row {
    pub spans: Vec<Span>,
    pub marks: Vec<Mark>,
    pub notes: Vec<Note>,
    /// Faults over the whole row.
    pub shades: Vec<Shade>,
    /// Flat stretches over the steps lane.
    pub flats: Vec<Shade>,
    /// Each worker group's progress: (time, step), ending flat at the group's end.
    pub lines: Vec<Vec<(u64, u64)>>,
    /// The agent's last word: SUCCEEDED, FAILED, STOPPED, KILLED or RUNNING.
    pub last_state: String,
}

/// A worker group's life on one node, for the flat-stretch pass.
pub(super) struct Group {
    pub node: String,
    pub start_us: u64,
    pub end_us: u64,
    /// (time, step) of each step it recorded.
    pub steps: Vec<(u64, u64)>,
}

/// A fault as the page's list of faults names it, linked to its marker `f-N`.
pub(super) struct FaultEntry {
    pub at_us: u64,
    pub node: String,
    /// What happened, in words (`powered off`, `preempted: SIGTERM, …`).
    pub what: String,
    /// The trace's own detail.
    pub detail: String,
}

/// The whole timeline.
pub(super) struct Timeline {
    pub rows: BTreeMap<(u64, String), Row>,
    /// Every fault applied or skipped, in time order; the k-th is marker `f-k`.
    pub faults: Vec<FaultEntry>,
    pub end_us: u64,
    /// The top of the steps axis: the job's steps (or the most any node reached).
    pub steps_max: u64,
}

/// An open bar: where it started and what it will be drawn as.
struct Open {
    node: String,
    start_us: u64,
    class: String,
    title: String,
    attrs: String,
}

/// Turns the trace into rows.
#[derive(Default)]
struct Builder {
    rows: BTreeMap<(u64, String), Row>,
    /// Open bars by (lane, pid); the store lane uses the node's name instead of a pid.
    open: BTreeMap<(u8, String), Open>,
    /// Each running worker group's steps, by pid.
    steps: BTreeMap<u32, Vec<(u64, u64)>>,
    groups: Vec<Group>,
}

impl Builder {
    fn row(&mut self, node: &str) -> &mut Row {
        self.rows.entry(node_order(node)).or_default()
    }

    fn open(&mut self, lane: u8, key: String, mut open: Open) {
        // A node's own word that it is in the round it was already counted in: one bar
        // from the round's completion, not a sliver of "not returned" before it.
        let pending = self.open.get(&(lane, key.clone()));
        let same_round = |p: &&Open| {
            let round = p.attrs.split(" data-pending").next().unwrap_or_default();
            p.class == "round-pending" && open.class == "round" && open.attrs.starts_with(round)
        };
        if let Some(p) = pending.filter(same_round) {
            open.start_us = p.start_us;
            self.open.remove(&(lane, key.clone()));
        }
        self.close(lane, &key, open.start_us);
        self.open.insert((lane, key), open);
    }

    fn close(&mut self, lane: u8, key: &str, end_us: u64) {
        if let Some(o) = self.open.remove(&(lane, key.to_owned())) {
            if lane == WORKERS {
                self.end_group(&o, key, end_us);
            }
            let span = Span {
                lane,
                start_us: o.start_us,
                end_us,
                class: o.class,
                title: o.title,
                attrs: o.attrs,
            };
            self.row(&o.node).spans.push(span);
        }
    }

    /// A worker group ended: its progress line stays flat until now.
    fn end_group(&mut self, open: &Open, pid: &str, end_us: u64) {
        let pid: u32 = pid.parse().expect("worker bars are keyed by pid");
        let steps = self.steps.remove(&pid).unwrap_or_default();
        if let Some(&(_, last)) = steps.last() {
            let mut line = steps.clone();
            line.push((end_us, last));
            self.row(&open.node).lines.push(line);
        }
        self.groups.push(Group {
            node: open.node.clone(),
            start_us: open.start_us,
            end_us,
            steps,
        });
    }

    fn mark(&mut self, node: &str, at_us: u64, class: &'static str, title: String) {
        self.row(node).marks.push(Mark {
            at_us,
            class,
            title,
            id: None,
            attrs: String::new(),
        });
    }

    fn note(&mut self, node: &str, at_us: u64, class: &'static str, text: String) {
        self.row(node).notes.push(Note { at_us, class, text });
    }

    /// A process's bars all end (it exited or was killed).
    fn process_ends(&mut self, pid: u32, at_us: u64) {
        for lane in [STATE, RDZV, WORKERS] {
            self.close(lane, &pid.to_string(), at_us);
        }
    }

    fn event(&mut self, at_us: u64, node: &str, kind: &EventKind) {
        let open = |class: &str, title: String, attrs: String| Open {
            node: node.to_owned(),
            start_us: at_us,
            class: class.to_owned(),
            title,
            attrs,
        };
        match kind {
            EventKind::AgentStarted { pid } => {
                let title = format!("agent pid {pid} starting");
                self.open(STATE, pid.to_string(), open("agent", title, String::new()));
                self.row(node).last_state = "RUNNING".into();
            }
            EventKind::WorkerGroupState { pid, state } => {
                let (class, title) = (format!("state-{state}"), format!("pid {pid}: {state}"));
                self.open(STATE, pid.to_string(), open(&class, title, String::new()));
            }
            EventKind::AgentExited { pid, state, reason } => {
                self.process_ends(*pid, at_us);
                self.row(node).last_state = state.to_string();
                self.note(
                    node,
                    at_us,
                    "exit-note",
                    page_text(&format!("exited {state}: {reason}")),
                );
            }
            EventKind::AgentKilled { pid } => {
                self.process_ends(*pid, at_us);
                self.row(node).last_state = "KILLED".into();
                self.note(node, at_us, "kill-note", format!("agent pid {pid} killed"));
            }
            EventKind::RendezvousJoining { pid } => {
                let title = format!("pid {pid} joining");
                self.open(RDZV, pid.to_string(), open("joining", title, String::new()));
            }
            EventKind::RendezvousCompleted {
                pid,
                round,
                rank,
                world_size,
                store_incarnation,
                participants,
            } => {
                self.in_round_before_told(at_us, *round, participants);
                let title = format!("round {round}: rank {rank} of {world_size}");
                let attrs = format!(
                    " data-round=\"{round}\" data-rank=\"{rank}\" data-world=\"{world_size}\" data-store=\"{store_incarnation}\""
                );
                self.open(RDZV, pid.to_string(), open("round", title, attrs));
            }
            EventKind::RendezvousFailed {
                pid,
                error,
                message,
            } => {
                let title = page_text(&format!("rendezvous failed ({error}): {message}"));
                self.open(
                    RDZV,
                    pid.to_string(),
                    open("rdzv-failed", title, String::new()),
                );
                self.close(RDZV, &pid.to_string(), at_us + 1);
            }
            other => self.job_or_marker(at_us, node, other),
        }
    }

    fn job_or_marker(&mut self, at_us: u64, node: &str, kind: &EventKind) {
        match kind {
            EventKind::WorkersStarted {
                pid, round, master, ..
            } => {
                let open = Open {
                    node: node.to_owned(),
                    start_us: at_us,
                    class: "workers".into(),
                    title: format!("workers of round {round}, master {master}"),
                    attrs: format!(" data-round=\"{round}\""),
                };
                self.open(WORKERS, pid.to_string(), open);
            }
            EventKind::Step { pid, .. } => {
                let steps = self.steps.entry(*pid).or_default();
                steps.extend(
                    kind.each_step(SimInstant::from_us(at_us))
                        .map(|v| (v.at.as_us(), v.step)),
                );
            }
            EventKind::WorkersStopped { pid, .. } => self.close(WORKERS, &pid.to_string(), at_us),
            EventKind::WorkerFailed {
                local_rank, reason, ..
            } => {
                let title = page_text(&format!("worker {local_rank} failed: {reason}"));
                self.mark(node, at_us, "worker-failed", title);
            }
            EventKind::AgentRestart {
                counted, reason, ..
            } => {
                let (class, title) = if *counted {
                    (
                        "restart-counted",
                        format!("restart, counted against max_restarts ({reason})"),
                    )
                } else {
                    (
                        "restart-free",
                        format!("free restart, not counted: a membership change ({reason})"),
                    )
                };
                self.mark(node, at_us, class, title);
            }
            EventKind::StoreStarted => {
                let open = Open {
                    node: node.to_owned(),
                    start_us: at_us,
                    class: "store".into(),
                    title: "store server".into(),
                    attrs: String::new(),
                };
                self.open(STORE, node.to_owned(), open);
            }
            EventKind::StoreDied { reason } => {
                self.close(STORE, node, at_us);
                self.mark(node, at_us, "fault", format!("store died: {reason}"));
            }
            _ => {}
        }
    }

    /// A round completed with nodes in it whose own `next_rendezvous()` had not returned
    /// (it fails on, waiting for what the round's first node publishes): their lane says
    /// they are in the round from its completion, not still joining.
    fn in_round_before_told(&mut self, at_us: u64, round: u64, participants: &[NodeIndex]) {
        let waiting: Vec<(String, String)> = self
            .open
            .iter()
            .filter(|((lane, _), o)| *lane == RDZV && o.class == "joining")
            .filter(|(_, o)| participants.iter().any(|p| p.to_string() == o.node))
            .map(|((_, pid), o)| (pid.clone(), o.node.clone()))
            .collect();
        for (pid, node) in waiting {
            let o = Open {
                node,
                start_us: at_us,
                class: "round-pending".into(),
                title: format!(
                    "in round {round} (the text report lists it), but its own next_rendezvous() \
                     had not returned"
                ),
                attrs: format!(" data-round=\"{round}\" data-pending=\"1\""),
            };
            self.open(RDZV, pid, o);
        }
    }

    /// Ends every bar still open when the run ended.
    fn close_all(&mut self, end_us: u64) {
        let keys: Vec<(u8, String)> = self.open.keys().cloned().collect();
        for (lane, key) in keys {
            self.close(lane, &key, end_us);
        }
    }

    /// A marker per violation, `v-N` in the report's order, which the verdicts link to.
    fn violations(&mut self, report: &Report) {
        let mut index = 0usize;
        for inv in &report.invariants {
            for v in &inv.violations {
                let node = v.node.map_or_else(|| CLUSTER.to_owned(), |n| n.to_string());
                self.row(&node).marks.push(Mark {
                    at_us: v.at.as_us(),
                    class: "violation",
                    title: format!("{}: {}", inv.name, v.message),
                    id: Some(format!("v-{index}")),
                    attrs: format!(" data-invariant=\"{}\"", esc(&inv.name)),
                });
                index += 1;
            }
        }
    }
}

/// The timeline of a run.
pub(super) fn build(scenario: &Scenario, report: &Report, trace: &Trace) -> Timeline {
    let mut b = Builder::default();
    for event in &trace.events {
        let node = node_of(event);
        b.event(
            event.at.as_us(),
            node.as_deref().unwrap_or(CLUSTER),
            &event.kind,
        );
    }
    let end_us = report.sim_time_us.max(1);
    b.close_all(end_us);
    for row in b.rows.values_mut() {
        if row.last_state == "RUNNING" {
            let text = "still running when the run ended".to_owned();
            row.notes.push(Note {
                at_us: end_us,
                class: "exit-note",
                text,
            });
        }
    }
    b.violations(report);
    let steps_max = b
        .groups
        .iter()
        .flat_map(|g| g.steps.iter().map(|s| s.1))
        .fold(scenario.job.steps, u64::max)
        .max(1);
    let mut timeline = Timeline {
        rows: b.rows,
        faults: Vec::new(),
        end_us,
        steps_max,
    };
    fault_shades::add(&mut timeline, scenario, trace);
    stretches::add(&mut timeline, scenario, trace, &b.groups);
    timeline
}

/// `12.5 s – 40 s`, as titles give a stretch.
pub(super) fn interval(start_us: u64, end_us: u64) -> String {
    let mut text = super::secs(start_us);
    let _ = write!(text, " – {}", super::secs(end_us));
    text
}
