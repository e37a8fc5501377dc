//! Faults drawn on the nodes they hit: a partition shades the cut-off nodes until it heals, a
//! pause until the resume, a SIGTERM or a power-off until the node starts again; every fault
//! is a marker at its moment (`f-N`, which the page's list of faults links to), named in
//! the words people know it by (a SIGTERM whose host then goes is a preemption with its
//! grace; a kill by a power-off is the host lost). Faults a `[failures]` process drew are
//! ordinary faults in the trace, so they are drawn the same way; a fault aimed at a role no
//! node held is a marker on the cluster's row.

use super::page_text;
use super::timeline::{interval, node_of, FaultEntry, Mark, Note, Shade, Timeline, CLUSTER};
use crate::report::node_order;
use crate::scenario::model::{node_name, FaultKind, FaultName, Scenario};
use crate::scenario::node::NodeIndex;
use crate::sim_time::{brief, SimDuration};
use crate::trace::{Event, EventKind, Trace};
use std::collections::BTreeMap;

/// A shade still open: since when, drawn as what.
struct Open {
    start_us: u64,
    class: &'static str,
    what: String,
}

/// Adds every fault of the trace to the rows of the nodes it hit, each named in words and
/// listed (marker `f-N`) for the page's list of faults.
pub(super) fn add(timeline: &mut Timeline, scenario: &Scenario, trace: &Trace) {
    // Partitions come from the scenario file only, applied in its order: the k-th applied
    // partition is the file's k-th.
    let mut partitions = scenario.faults.iter().filter_map(|f| match &f.kind {
        FaultKind::Partition { groups } => Some(groups.clone()),
        _ => None,
    });
    let faults: Vec<&Event> = trace
        .events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::FaultApplied { .. } | EventKind::FaultSkipped { .. }
            )
        })
        .collect();
    let mut open: BTreeMap<String, Open> = BTreeMap::new();
    for (i, event) in faults.iter().enumerate() {
        let at_us = event.at.as_us();
        let id = format!("f-{i}");
        if skipped(timeline, event, &id) {
            continue;
        }
        let EventKind::FaultApplied { fault, detail, .. } = &event.kind else {
            continue;
        };
        let node = node_of(event);
        let what = name(scenario, &faults[i + 1..], event, &open);
        let title = format!("{what}: {detail}");
        let end_class = matches!(
            fault,
            FaultName::Resume | FaultName::Start | FaultName::Restart | FaultName::Heal
        );
        let mark_class = if end_class { "fault-end" } else { "fault" };
        let on = node.clone().unwrap_or_else(|| CLUSTER.to_owned());
        fault_mark(timeline, &on, at_us, mark_class, &id, title);
        list(timeline, at_us, &on, what.clone(), detail.clone());
        match (fault, node.as_deref()) {
            (FaultName::Partition, _) => {
                let groups = partitions.next().unwrap_or_default();
                open_partition(timeline, &mut open, at_us, &groups);
            }
            (FaultName::Heal, _) => close_partitions(timeline, &mut open, at_us),
            (FaultName::Pause | FaultName::Stop | FaultName::PowerOff, Some(node)) => {
                open_shade(timeline, &mut open, *fault, node, at_us, what);
            }
            (_, node) => row_note(timeline, node.unwrap_or(CLUSTER), at_us, what),
        }
    }
    let nodes: Vec<String> = open.keys().cloned().collect();
    for node in nodes {
        close(timeline, &mut open, &node, timeline.end_us);
    }
}

/// A fault aimed at a role no node held: a marker on the cluster's row, and listed.
fn skipped(timeline: &mut Timeline, event: &Event, id: &str) -> bool {
    let EventKind::FaultSkipped {
        fault,
        role,
        reason,
    } = &event.kind
    else {
        return false;
    };
    let at_us = event.at.as_us();
    let what = format!("{} of {role} skipped", words(*fault));
    let title = format!("{what}: {reason}");
    fault_mark(timeline, CLUSTER, at_us, "fault", id, title);
    list(timeline, at_us, CLUSTER, what, reason.clone());
    true
}

/// A pause, a SIGTERM or a power-off shades its node from now until it is back.
fn open_shade(
    timeline: &mut Timeline,
    open: &mut BTreeMap<String, Open>,
    fault: FaultName,
    node: &str,
    at_us: u64,
    what: String,
) {
    let class = match fault {
        FaultName::Pause => "shade-paused",
        FaultName::Stop => "shade-stopped",
        _ => "shade-off",
    };
    if fault == FaultName::PowerOff {
        host_gone(timeline, node, at_us, &what);
    }
    close(timeline, open, node, at_us);
    let o = Open {
        start_us: at_us,
        class,
        what: what.clone(),
    };
    open.insert(node.to_owned(), o);
    row_note(timeline, node, at_us, what);
}

/// A fault kind in words (`power off`).
fn words(fault: FaultName) -> String {
    fault.to_string().replace('_', " ")
}

/// What a fault is, in words a reader knows it by: a SIGTERM followed by the host's power
/// going off is a preemption with its grace; a node started that the cluster did not
/// start with is a replacement.
fn name(
    scenario: &Scenario,
    later: &[&Event],
    event: &Event,
    open: &BTreeMap<String, Open>,
) -> String {
    let EventKind::FaultApplied { fault, .. } = &event.kind else {
        return String::new();
    };
    let node = node_of(event);
    let next_on_node = later.iter().find(|e| {
        node.is_some() && node_of(e) == node && matches!(e.kind, EventKind::FaultApplied { .. })
    });
    let stopped_at = node
        .as_ref()
        .and_then(|n| open.get(n))
        .filter(|o| o.class == "shade-stopped")
        .map(|o| o.start_us);
    let at_us = event.at.as_us();
    match fault {
        FaultName::Stop => match next_on_node.map(|e| (&e.kind, e.at.as_us())) {
            Some((
                EventKind::FaultApplied {
                    fault: FaultName::PowerOff,
                    ..
                },
                off_us,
            )) => format!(
                "preempted: SIGTERM, the host goes {} later",
                brief(SimDuration::from_us(off_us.saturating_sub(at_us)))
            ),
            _ => "SIGTERM".to_owned(),
        },
        FaultName::PowerOff => match stopped_at {
            Some(since) => format!(
                "host gone: the preemption's {} grace is over",
                brief(SimDuration::from_us(at_us - since))
            ),
            None => "powered off: the host vanished".to_owned(),
        },
        FaultName::Kill => "killed (SIGKILL)".to_owned(),
        FaultName::Start => {
            let index = event
                .node
                .map(|n| n.to_string())
                .and_then(|n| n.parse::<NodeIndex>().ok());
            match index {
                Some(NodeIndex(i)) if i >= scenario.cluster.nodes => {
                    "replacement node started".to_owned()
                }
                _ => "node started".to_owned(),
            }
        }
        FaultName::Restart => "host restarted".to_owned(),
        FaultName::Pause => "paused (hung)".to_owned(),
        other => words(*other),
    }
}

/// The host went off under a running agent: its kill is the power-off, and is called so.
fn host_gone(timeline: &mut Timeline, node: &str, at_us: u64, what: &str) {
    let row = timeline.rows.entry(node_order(node)).or_default();
    let mut lost = false;
    for note in row.notes.iter_mut() {
        if note.class == "kill-note" && note.at_us == at_us {
            let pid = note
                .text
                .trim_start_matches("agent pid ")
                .trim_end_matches(" killed");
            note.text = format!("agent pid {pid} lost with its host ({what})");
            lost = true;
        }
    }
    if lost && row.last_state == "KILLED" {
        row.last_state = "POWERED OFF".to_owned();
    }
}

fn list(timeline: &mut Timeline, at_us: u64, node: &str, what: String, detail: String) {
    timeline.faults.push(FaultEntry {
        at_us,
        node: node.to_owned(),
        what,
        detail: page_text(&detail),
    });
}

/// A partition at `at_us` into `groups`: it replaces any partition still open, and shades
/// every node it cuts off until the next heal or partition.
fn open_partition(
    timeline: &mut Timeline,
    open: &mut BTreeMap<String, Open>,
    at_us: u64,
    groups: &[Vec<u32>],
) {
    close_partitions(timeline, open, at_us);
    for (node, what) in cut_off(groups) {
        let o = Open {
            start_us: at_us,
            class: "shade-partition",
            what,
        };
        open.insert(node, o);
    }
}

/// The nodes a partition cuts off, each with what it is cut off from: every group but the
/// largest (the first of equals), which holds the rest of the job.
fn cut_off(groups: &[Vec<u32>]) -> Vec<(String, String)> {
    let main = (0..groups.len()).min_by_key(|&i| (std::cmp::Reverse(groups[i].len()), i));
    let mut out = Vec::new();
    for (i, group) in groups.iter().enumerate() {
        if Some(i) == main {
            continue;
        }
        let others: Vec<String> = groups
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .flat_map(|(_, g)| g.iter().map(|&n| node_name(n)))
            .collect();
        for &n in group {
            out.push((
                node_name(n),
                format!("partitioned from {}", others.join(", ")),
            ));
        }
    }
    out
}

fn close_partitions(timeline: &mut Timeline, open: &mut BTreeMap<String, Open>, at_us: u64) {
    let cut: Vec<String> = open
        .iter()
        .filter(|(_, o)| o.class == "shade-partition")
        .map(|(n, _)| n.clone())
        .collect();
    for node in cut {
        close(timeline, open, &node, at_us);
    }
}

/// Ends the node's open shade, if any, and draws it.
fn close(timeline: &mut Timeline, open: &mut BTreeMap<String, Open>, node: &str, end_us: u64) {
    let Some(o) = open.remove(node) else { return };
    let title = format!("{} ({})", o.what, interval(o.start_us, end_us));
    let is_partition = o.class == "shade-partition";
    let row = timeline.rows.entry(node_order(node)).or_default();
    row.shades.push(Shade {
        start_us: o.start_us,
        end_us,
        class: o.class,
        title,
    });
    if is_partition {
        row.notes.push(Note {
            at_us: o.start_us,
            class: "fault-note",
            text: o.what,
        });
    }
}

fn fault_mark(
    timeline: &mut Timeline,
    node: &str,
    at_us: u64,
    class: &'static str,
    id: &str,
    title: String,
) {
    let row = timeline.rows.entry(node_order(node)).or_default();
    row.marks.push(Mark {
        at_us,
        class,
        title,
        id: Some(id.to_owned()),
        attrs: String::new(),
    });
}

/// The fault's name written at its moment, so a shade or a marker says what it is.
fn row_note(timeline: &mut Timeline, node: &str, at_us: u64, text: String) {
    let row = timeline.rows.entry(node_order(node)).or_default();
    row.notes.push(Note {
        at_us,
        class: "fault-note",
        text,
    });
}
