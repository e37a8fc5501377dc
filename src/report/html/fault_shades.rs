//! Faults drawn on the nodes they hit: a partition shades the cut-off nodes until it heals, a
//! pause until the resume, a SIGTERM or a power-off until the node starts again; a kill, a
//! worker crash or any other one-moment fault is a marker at its moment. Faults a `[failures]`
//! process drew are ordinary faults in the trace, so they are drawn the same way; a fault
//! aimed at a role no node held is a marker on the cluster's row.

use super::timeline::{interval, node_of, Mark, Note, Shade, Timeline, CLUSTER};
use crate::report::node_order;
use crate::scenario::model::{node_name, FaultKind, FaultName, Scenario};
use crate::trace::{EventKind, Trace};
use std::collections::BTreeMap;

/// A shade still open: since when, drawn as what.
struct Open {
    start_us: u64,
    class: &'static str,
    what: String,
}

/// Adds every fault of the trace to the rows of the nodes it hit.
pub(super) fn add(timeline: &mut Timeline, scenario: &Scenario, trace: &Trace) {
    // Partitions come from the scenario file only, applied in its order: the k-th applied
    // partition is the file's k-th.
    let mut partitions = scenario.faults.iter().filter_map(|f| match &f.kind {
        FaultKind::Partition { groups } => Some(groups.clone()),
        _ => None,
    });
    let mut open: BTreeMap<String, Open> = BTreeMap::new();
    for event in &trace.events {
        if let EventKind::FaultSkipped {
            fault,
            role,
            reason,
        } = &event.kind
        {
            let title = format!("{fault} of {role} skipped: {reason}");
            mark(timeline, CLUSTER, event.at.as_us(), "fault", title);
            continue;
        }
        let EventKind::FaultApplied { fault, detail, .. } = &event.kind else {
            continue;
        };
        let at_us = event.at.as_us();
        let node = node_of(event);
        let node = node.as_deref();
        let title = format!("{fault}: {detail}");
        match (fault, node) {
            (FaultName::Partition, _) => {
                let groups = partitions.next().unwrap_or_default();
                open_partition(timeline, &mut open, at_us, &groups);
            }
            (FaultName::Heal, _) => close_partitions(timeline, &mut open, at_us),
            (FaultName::Pause | FaultName::Stop | FaultName::PowerOff, Some(node)) => {
                let (class, what) = match fault {
                    FaultName::Pause => ("shade-paused", "paused".to_owned()),
                    FaultName::Stop => ("shade-stopped", format!("SIGTERM ({detail})")),
                    _ => ("shade-off", "powered off".to_owned()),
                };
                close(timeline, &mut open, node, at_us);
                let o = Open {
                    start_us: at_us,
                    class,
                    what,
                };
                open.insert(node.to_owned(), o);
                row_note(timeline, node, at_us, fault);
            }
            (FaultName::Resume | FaultName::Start | FaultName::Restart, Some(node)) => {
                close(timeline, &mut open, node, at_us);
                mark(timeline, node, at_us, "fault-end", title);
            }
            (_, node) => {
                let node = node.unwrap_or(CLUSTER);
                mark(timeline, node, at_us, "fault", title);
                row_note(timeline, node, at_us, fault);
            }
        }
    }
    let nodes: Vec<String> = open.keys().cloned().collect();
    for node in nodes {
        close(timeline, &mut open, &node, timeline.end_us);
    }
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

fn mark(timeline: &mut Timeline, node: &str, at_us: u64, class: &'static str, title: String) {
    let row = timeline.rows.entry(node_order(node)).or_default();
    row.marks.push(Mark {
        at_us,
        class,
        title,
        id: None,
        attrs: String::new(),
    });
}

/// The fault's name written at its moment, so a shade or a marker says what it is.
fn row_note(timeline: &mut Timeline, node: &str, at_us: u64, fault: &FaultName) {
    let row = timeline.rows.entry(node_order(node)).or_default();
    row.notes.push(Note {
        at_us,
        class: "fault-note",
        text: fault.to_string().replace('_', " "),
    });
}
