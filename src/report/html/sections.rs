//! The run page's lists around the timeline: its key (only what this run drew), the faults
//! in time order (each linked to its marker), and the rounds and agents with counted and
//! free restarts, alike agents on one line.

use super::timeline::Timeline;
use super::{esc, page_text, secs};
use crate::report::Report;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The timeline's key: each entry with the markup that shows the run drew it. Its colours
/// are none of the goodput bar's, so a colour means one thing on the page.
const KEY: [(&str, &str, &str); 22] = [
    (
        "class=\"state-HEALTHY\"",
        "background:#8fcfc4",
        "agent: workers healthy",
    ),
    (
        "class=\"state-INIT\"",
        "background:#e3e3e8",
        "agent: workers starting",
    ),
    (
        "class=\"state-STOPPED\"",
        "background:#efe0b9",
        "agent: workers stopped",
    ),
    (
        "class=\"state-FAILED\"",
        "background:#f4b6b0",
        "agent: workers failed",
    ),
    (
        "class=\"state-UNHEALTHY\"",
        "background:#f4b6b0",
        "agent: workers unhealthy",
    ),
    (
        "class=\"state-SUCCEEDED\"",
        "background:#c3e6c8",
        "agent: workers succeeded",
    ),
    (
        "class=\"joining\"",
        "background:#c9d6db",
        "rendezvous: joining",
    ),
    (
        "class=\"round\"",
        "background:#3f6f7a",
        "rendezvous: in a round",
    ),
    (
        "class=\"round-pending\"",
        "background:repeating-linear-gradient(90deg,#3f6f7a 0 2px,#c9d6db 2px 4px)",
        "in a round, its own join not returned",
    ),
    (
        "class=\"rdzv-failed\"",
        "background:#e07a70",
        "rendezvous failed",
    ),
    (
        "class=\"workers\"",
        "background:#eef4ef;border-bottom:2px solid #2e7d4f",
        "workers running, steps done",
    ),
    (
        "class=\"flat\"",
        "background:#f7d560",
        "no step (flat stretch)",
    ),
    (
        "shade-partition\"",
        "background:#b3261e;opacity:.3",
        "partitioned",
    ),
    ("shade-paused\"", "background:#6b6b2a;opacity:.3", "paused"),
    ("shade-off\"", "background:#333;opacity:.35", "powered off"),
    (
        "shade-stopped\"",
        "background:#8e6c3a;opacity:.35",
        "SIGTERM'd",
    ),
    (
        "line class=\"fault\"",
        "background:#b3261e;width:3px",
        "fault",
    ),
    (
        "line class=\"fault-end\"",
        "background:#0a7c2f;width:3px",
        "node started or back",
    ),
    (
        "line class=\"restart-counted\"",
        "background:#b03a8c;width:3px",
        "counted restart",
    ),
    (
        "line class=\"restart-free\"",
        "background:repeating-linear-gradient(#b03a8c 0 3px,transparent 3px 5px);width:3px",
        "free restart (membership change)",
    ),
    (
        "line class=\"worker-failed\"",
        "background:#7a1f1a;width:3px",
        "worker failed",
    ),
    (
        "line class=\"violation\"",
        "background:#ff2d55;width:3px",
        "violation",
    ),
];

/// The key of what `timeline_html` draws, leaving out what it does not.
pub(super) fn key(html: &mut String, timeline_html: &str) {
    html.push_str("<div class=\"legend\" id=\"timeline-key\"><b>on the timeline:</b> ");
    let store = ("class=\"store\"", "background:#a07850", "store server");
    for (needle, style, label) in KEY.into_iter().chain([store]) {
        if timeline_html.contains(needle) {
            let _ = write!(html, "<span><i style=\"{style}\"></i>{label}</span>");
        }
    }
    html.push_str("</div>\n");
}

/// The faults in time order, each linked to its marker on the timeline.
pub(super) fn faults(html: &mut String, t: &Timeline) {
    if t.faults.is_empty() {
        return;
    }
    let _ = write!(
        html,
        "<details id=\"faults\"{}><summary><b>Faults</b> ({}; a link shows one on the timeline)</summary>\n\
         <table><tr><th>at</th><th>node</th><th>what</th><th>detail</th></tr>\n",
        if t.faults.len() <= 20 { " open" } else { "" },
        t.faults.len()
    );
    for (i, f) in t.faults.iter().enumerate() {
        let _ = writeln!(
            html,
            "<tr class=\"fault-row\"><td><a href=\"#f-{i}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            secs(f.at_us),
            esc(&f.node),
            esc(&f.what),
            esc(&f.detail)
        );
    }
    html.push_str("</table></details>\n");
}

/// The rounds, and the agents with their counted and free restarts; agents that ended
/// alike share a line.
pub(super) fn rounds_and_agents(html: &mut String, report: &Report) {
    let _ = write!(
        html,
        "<details id=\"rounds\"><summary><b>Rounds and agents</b> ({} rounds; restarts \
         counted against max_restarts and free ones for a membership change)</summary>\n\
         <table><tr><th>round</th><th>completed</th><th>world</th><th>participants</th></tr>\n",
        report.rounds.len()
    );
    for r in &report.rounds {
        let _ = writeln!(
            html,
            "<tr><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            r.round,
            if r.store_incarnation > 1 {
                format!(" (store {})", r.store_incarnation)
            } else {
                String::new()
            },
            secs(r.completed_at_us),
            r.world_size,
            esc(&short_list(&r.participants))
        );
    }
    html.push_str("</table>\n<table id=\"agents\"><tr><th>nodes</th><th>counted restarts</th><th>free restarts</th><th>final state</th><th>exit</th></tr>\n");
    let mut alike: BTreeMap<(u32, u32, &str, String), Vec<String>> = BTreeMap::new();
    for a in &report.agents {
        let key = (
            a.restarts,
            a.membership_restarts,
            a.final_state.as_str(),
            page_text(&a.exit_reason),
        );
        alike.entry(key).or_default().push(a.node.clone());
    }
    let mut lines: Vec<_> = alike.into_iter().collect();
    // In the order of each line's first node, as the report lists agents.
    let position = |node: &str| report.agents.iter().position(|a| a.node == node);
    lines.sort_by_key(|(_, nodes)| position(&nodes[0]));
    for ((counted, free, state, exit), nodes) in lines {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{counted}</td><td>{free}</td><td>{}</td><td>{}</td></tr>",
            esc(&short_list(&nodes)),
            esc(state),
            esc(&exit)
        );
    }
    html.push_str("</table></details>\n");
}

/// A list of nodes, cut after ten with how many more.
fn short_list(nodes: &[String]) -> String {
    match nodes.len() {
        0..=10 => nodes.join(" "),
        n => format!("{} … and {} more ({n})", nodes[..8].join(" "), n - 8),
    }
}
