//! The run's timeline as inline SVG: a band per node (then the dedicated store and the
//! cluster), with lanes for the agent's worker-group states, its rendezvous (joining, then
//! the round it belongs to with its rank and world size), its worker groups and their steps,
//! and the store; faults, restarts, worker failures and violations are markers.

use super::{esc, secs};
use crate::report::{node_order, Report};
use crate::trace::{EventKind, Trace};
use std::collections::BTreeMap;
use std::fmt::Write;

const LABEL_W: u64 = 150;
const PLOT_W: u64 = 1100;
const LANE_H: u64 = 12;
const LANES: u64 = 4;
const ROW_GAP: u64 = 10;
const AXIS_H: u64 = 22;
const LANE_NAMES: [&str; LANES as usize] = ["agent", "rendezvous", "workers", "store"];
/// The row of events that name no node.
const CLUSTER: &str = "cluster";

/// A bar on one lane.
struct Span {
    lane: u64,
    start_us: u64,
    end_us: u64,
    class: String,
    title: String,
    /// Extra `data-*` attributes, already escaped.
    attrs: String,
}

/// A point marker.
struct Mark {
    at_us: u64,
    class: &'static str,
    title: String,
    id: Option<String>,
    attrs: String,
}

#[derive(Default)]
struct Row {
    spans: Vec<Span>,
    marks: Vec<Mark>,
}

/// An open bar: where it started and what it will be drawn as.
struct Open {
    node: String,
    start_us: u64,
    class: String,
    title: String,
    attrs: String,
}

/// Turns the trace into rows of bars and markers.
#[derive(Default)]
struct Builder {
    rows: BTreeMap<(u64, String), Row>,
    /// Open bars by (lane, pid); the store lane uses the node's name instead of a pid.
    open: BTreeMap<(u64, String), Open>,
    /// Steps of each pid's running worker group: (first, last).
    steps: BTreeMap<u32, (u64, u64)>,
}

impl Builder {
    fn row(&mut self, node: &str) -> &mut Row {
        self.rows.entry(node_order(node)).or_default()
    }

    fn open(&mut self, lane: u64, key: String, open: Open) {
        self.close(lane, &key, open.start_us);
        self.open.insert((lane, key), open);
    }

    fn close(&mut self, lane: u64, key: &str, end_us: u64) {
        if let Some(o) = self.open.remove(&(lane, key.to_owned())) {
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

    fn mark(&mut self, node: &str, mark: Mark) {
        self.row(node).marks.push(mark);
    }

    /// A process's bars all end (it exited or was killed).
    fn process_ends(&mut self, pid: u32, at_us: u64) {
        self.close(0, &pid.to_string(), at_us);
        self.close(1, &pid.to_string(), at_us);
        self.close_workers(pid, at_us);
    }

    /// Ends a worker group's bar, naming the steps it took.
    fn close_workers(&mut self, pid: u32, at_us: u64) {
        let key = (2, pid.to_string());
        if let Some(open) = self.open.get_mut(&key) {
            if let Some((first, last)) = self.steps.remove(&pid) {
                let _ = write!(open.title, ", steps {first}–{last}");
            }
        }
        self.close(2, &pid.to_string(), at_us);
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
            EventKind::AgentStarted { pid } => self.open(
                0,
                pid.to_string(),
                open("agent", format!("agent pid {pid}"), String::new()),
            ),
            EventKind::WorkerGroupState { pid, state } => self.open(
                0,
                pid.to_string(),
                open(
                    &format!("state-{state}"),
                    format!("pid {pid}: {state}"),
                    String::new(),
                ),
            ),
            EventKind::AgentExited { pid, state, .. } => {
                self.process_ends(*pid, at_us);
                let title = format!("agent pid {pid} exited {state}");
                self.mark(node, mark(at_us, "exit", title));
            }
            EventKind::AgentKilled { pid } => {
                self.process_ends(*pid, at_us);
                self.mark(
                    node,
                    mark(at_us, "fault", format!("agent pid {pid} killed")),
                );
            }
            EventKind::RendezvousJoining { pid } => self.open(
                1,
                pid.to_string(),
                open("joining", format!("pid {pid} joining"), String::new()),
            ),
            EventKind::RendezvousCompleted {
                pid,
                round,
                rank,
                world_size,
                store_incarnation,
                ..
            } => {
                let title = format!("round {round}: rank {rank} of {world_size}");
                let attrs = format!(
                    " data-round=\"{round}\" data-rank=\"{rank}\" data-world=\"{world_size}\" data-store=\"{store_incarnation}\""
                );
                self.open(1, pid.to_string(), open("round", title, attrs));
            }
            EventKind::RendezvousFailed { pid, error, .. } => {
                let title = format!("rendezvous failed: {error}");
                self.open(
                    1,
                    pid.to_string(),
                    open("rdzv-failed", title, String::new()),
                );
                self.close(1, &pid.to_string(), at_us + 1);
            }
            other => self.job_or_marker(at_us, node, other),
        }
    }

    fn job_or_marker(&mut self, at_us: u64, node: &str, kind: &EventKind) {
        match kind {
            EventKind::WorkersStarted {
                pid, round, master, ..
            } => {
                self.close_workers(*pid, at_us);
                self.open(
                    2,
                    pid.to_string(),
                    Open {
                        node: node.to_owned(),
                        start_us: at_us,
                        class: "workers".into(),
                        title: format!("workers of round {round}, master {master}"),
                        attrs: format!(" data-round=\"{round}\""),
                    },
                );
            }
            EventKind::Step { pid, step, .. } => {
                let entry = self.steps.entry(*pid).or_insert((*step, *step));
                entry.1 = *step;
            }
            EventKind::WorkersStopped { pid, .. } => self.close_workers(*pid, at_us),
            EventKind::WorkerFailed {
                local_rank, reason, ..
            } => {
                let title = format!("worker {local_rank} failed: {reason}");
                self.mark(node, mark(at_us, "worker-failed", title));
            }
            EventKind::AgentRestart {
                counted, reason, ..
            } => {
                let kind = if *counted { "counted" } else { "free" };
                self.mark(
                    node,
                    mark(at_us, "restart", format!("{kind} restart ({reason})")),
                );
            }
            EventKind::FaultApplied { fault, detail } => {
                self.mark(
                    node,
                    mark(at_us, "fault", format!("fault {fault}: {detail}")),
                );
            }
            EventKind::StoreStarted => self.open(
                3,
                node.to_owned(),
                Open {
                    node: node.to_owned(),
                    start_us: at_us,
                    class: "store".into(),
                    title: "store".into(),
                    attrs: String::new(),
                },
            ),
            EventKind::StoreDied { reason } => {
                self.close(3, node, at_us);
                self.mark(node, mark(at_us, "fault", format!("store died: {reason}")));
            }
            _ => {}
        }
    }
}

fn mark(at_us: u64, class: &'static str, title: String) -> Mark {
    Mark {
        at_us,
        class,
        title,
        id: None,
        attrs: String::new(),
    }
}

/// The timeline of a run.
pub(super) fn svg(report: &Report, trace: &Trace) -> String {
    let mut b = Builder::default();
    for event in &trace.events {
        let node = event.node.map(|n| n.to_string());
        b.event(event.at_us, node.as_deref().unwrap_or(CLUSTER), &event.kind);
    }
    let end_us = report.sim_time_us.max(1);
    let keys: Vec<(u64, String)> = b.open.keys().cloned().collect();
    for (lane, key) in keys {
        b.close(lane, &key, end_us);
    }
    let mut index = 0usize;
    for inv in &report.invariants {
        for v in &inv.violations {
            let node = v.node.map_or_else(|| CLUSTER.to_owned(), |n| n.to_string());
            b.mark(
                &node,
                Mark {
                    at_us: v.at_us,
                    class: "violation",
                    title: format!("{}: {}", inv.name, v.message),
                    id: Some(format!("v-{index}")),
                    attrs: format!(" data-invariant=\"{}\"", esc(&inv.name)),
                },
            );
            index += 1;
        }
    }
    draw(&b.rows, end_us)
}

fn draw(rows: &BTreeMap<(u64, String), Row>, end_us: u64) -> String {
    let row_h = LANES * LANE_H + ROW_GAP;
    let height = AXIS_H + row_h * rows.len() as u64 + 4;
    let width = LABEL_W + PLOT_W + 10;
    let x = |us: u64| LABEL_W as f64 + us.min(end_us) as f64 * PLOT_W as f64 / end_us as f64;
    let mut svg = format!(
        "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\">\n"
    );
    for tick in 0..=5u64 {
        // Ticks at whole seconds, so their labels stay short.
        let us = end_us * tick / 5 / 1_000_000 * 1_000_000;
        let anchor = if tick == 5 { "end" } else { "middle" };
        let _ = writeln!(
            svg,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"16\" y2=\"{height}\" stroke=\"#eee\"/><text x=\"{0:.1}\" y=\"12\" text-anchor=\"{anchor}\">{1}</text>",
            x(us),
            secs(us)
        );
    }
    for (i, ((_, node), row)) in rows.iter().enumerate() {
        let top = AXIS_H + row_h * i as u64;
        let _ = writeln!(
            svg,
            "<g class=\"node\" data-node=\"{0}\"><text x=\"4\" y=\"{1}\" font-weight=\"600\">{0}</text>",
            esc(node),
            top + LANE_H
        );
        for (lane, name) in LANE_NAMES.iter().enumerate() {
            let _ = write!(
                svg,
                "<text class=\"lane-label\" x=\"70\" y=\"{}\">{name}</text>",
                top + LANE_H * lane as u64 + 10
            );
        }
        for s in &row.spans {
            let (x0, x1) = (x(s.start_us), x(s.end_us));
            let _ = writeln!(
                svg,
                "<rect class=\"{}\"{} x=\"{x0:.1}\" y=\"{}\" width=\"{:.1}\" height=\"{}\"><title>{} ({} – {})</title></rect>",
                esc(&s.class),
                s.attrs,
                top + LANE_H * s.lane + 1,
                (x1 - x0).max(1.0),
                LANE_H - 2,
                esc(&s.title),
                secs(s.start_us),
                secs(s.end_us)
            );
        }
        for m in &row.marks {
            let id =
                m.id.as_deref()
                    .map(|id| format!(" id=\"{id}\""))
                    .unwrap_or_default();
            let _ = writeln!(
                svg,
                "<g{id} class=\"mark {0}-mark\"{1}><rect class=\"{0}\" x=\"{2:.1}\" y=\"{3}\" width=\"3\" height=\"{4}\"><title>{5}: {6}</title></rect></g>",
                m.class,
                m.attrs,
                x(m.at_us) - 1.0,
                top,
                LANES * LANE_H,
                secs(m.at_us),
                esc(&m.title)
            );
        }
        svg.push_str("</g>\n");
    }
    svg.push_str("</svg>\n");
    svg
}
