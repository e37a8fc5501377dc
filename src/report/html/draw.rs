//! Renders the timeline: zoom controls, a time axis and the goodput strip that stay on
//! screen, then one SVG row per node (drawn by `row`): the nodes a fault or a violation
//! touched first, then the rest in numeric order. Past `GROUP_ROWS_MIN`
//! nodes, untouched nodes whose rows tell the same story fold into one line a click opens.

use super::esc;
use super::row::draw_row;
use super::timeline::{Row, Timeline, RDZV};
use crate::sim_time::{secs_to_ms, SimDuration};
use std::collections::BTreeMap;
use std::fmt::Write;

pub(super) const LABEL_W: f64 = 170.0;
pub(super) const PLOT_W: f64 = 1150.0;
/// Fewer nodes than this are all shown.
const GROUP_ROWS_MIN: usize = 24;
/// The fewest alike nodes folded into one line.
const GROUP_LEN_MIN: usize = 3;

/// The whole timeline section; `strip` is the goodput strip drawn under the axis.
pub(super) fn section(t: &Timeline, strip: &str) -> String {
    let mut html = format!(
        "<div id=\"timeline\" data-end-us=\"{}\" data-plot-w=\"{PLOT_W}\" data-label-w=\"{LABEL_W}\" data-view=\"0-{0}\">\n\
         <div class=\"tl-head\"><div id=\"zoom-controls\"><button id=\"zoom-in\" type=\"button\">zoom in</button>\
         <button id=\"zoom-out\" type=\"button\">zoom out</button><button id=\"pan-left\" type=\"button\">◀</button>\
         <button id=\"pan-right\" type=\"button\">▶</button><button id=\"zoom-reset\" type=\"button\">reset</button>\
         <span id=\"zoom-view\">0 s – {1}</span><span class=\"hint\">wheel on the axis (or ctrl+wheel) zooms, drag pans</span></div>\n",
        t.end_us,
        secs_to_ms(t.end_us)
    );
    axis(&mut html, t.end_us);
    html.push_str(strip);
    html.push_str("</div><div id=\"rows\">\n");
    let rows: Vec<(&str, &Row)> = t.rows.iter().map(|((_, n), r)| (n.as_str(), r)).collect();
    let count = rows.len();
    let (touched, rest): (Vec<_>, Vec<_>) = rows.into_iter().partition(|(_, r)| touched(r));
    for (node, row) in &touched {
        draw_row(&mut html, node, row, t);
    }
    if count < GROUP_ROWS_MIN {
        for (node, row) in &rest {
            draw_row(&mut html, node, row, t);
        }
    } else {
        alike_groups(&mut html, &rest, t);
    }
    html.push_str("</div></div>\n");
    html
}

/// The untouched rows: each story told by `GROUP_LEN_MIN` nodes or more folds into one
/// line (in the order of its first node); the others are drawn one by one.
fn alike_groups(html: &mut String, rest: &[(&str, &Row)], t: &Timeline) {
    let stories: Vec<String> = rest.iter().map(|(_, row)| signature(row)).collect();
    let mut groups: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, story) in stories.iter().enumerate() {
        groups.entry(story.as_str()).or_default().push(i);
    }
    let mut drawn = vec![false; rest.len()];
    for i in 0..rest.len() {
        if drawn[i] {
            continue;
        }
        let members = &groups[stories[i].as_str()];
        if members.len() < GROUP_LEN_MIN {
            drawn[i] = true;
            draw_row(html, rest[i].0, rest[i].1, t);
            continue;
        }
        let names: Vec<&str> = members.iter().map(|&m| rest[m].0).collect();
        let _ = writeln!(
            html,
            "<details class=\"alike\"><summary>{} nodes alike, untouched by any fault ({}): {}</summary>",
            members.len(),
            esc(&name_list(&names)),
            esc(&stories[i])
        );
        for &m in members {
            drawn[m] = true;
            draw_row(html, rest[m].0, rest[m].1, t);
        }
        html.push_str("</details>\n");
    }
}

/// `node-0, node-1, … node-127` for a long list.
fn name_list(names: &[&str]) -> String {
    match names {
        [first, second, .., last] if names.len() > 4 => format!("{first}, {second}, … {last}"),
        _ => names.join(", "),
    }
}

/// The axis as drawn before the script redraws it at every zoom: whole seconds, or whole
/// hours on a run of more than three.
fn axis(html: &mut String, end_us: u64) {
    let _ = write!(
        html,
        "<svg id=\"axis\" width=\"{}\" height=\"20\"><g id=\"ticks\">",
        LABEL_W + PLOT_W + 10.0
    );
    let hour = SimDuration::from_secs(3_600);
    let long = end_us >= 3 * hour.as_us();
    for tick in 0..=5u64 {
        let unit = if long {
            hour
        } else {
            SimDuration::from_secs(1)
        };
        let at = SimDuration::from_us(end_us * tick / 5).floor_to(unit);
        let x = LABEL_W + at.as_us() as f64 * PLOT_W / end_us as f64;
        let label = if long {
            format!("{} h", at.as_secs() / hour.as_secs())
        } else {
            secs_to_ms(at.as_us())
        };
        let _ = write!(
            html,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"14\" y2=\"20\"/><text x=\"{x:.1}\" y=\"11\" text-anchor=\"middle\">{label}</text>"
        );
    }
    html.push_str("</g></svg>\n");
}

/// Whether a fault or a violation touched the row: its node was hit, started, or broke an
/// invariant. (A worker failing because a peer went is every survivor's story, not its own.)
pub(super) fn touched(row: &Row) -> bool {
    !row.shades.is_empty()
        || row
            .marks
            .iter()
            .any(|m| matches!(m.class, "fault" | "fault-end" | "violation"))
}

/// What alike rows share: their rounds, restarts, stalls, last state and exit.
fn signature(row: &Row) -> String {
    let rounds: Vec<&str> = row
        .spans
        .iter()
        .filter(|s| s.lane == RDZV && s.class == "round")
        .map(|s| s.title.split(':').next().unwrap_or(""))
        .collect();
    let count = |class: &str, one: &str, many: &str| match row
        .marks
        .iter()
        .filter(|m| m.class == class)
        .count()
    {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    };
    let exits: Vec<&str> = row
        .notes
        .iter()
        .filter(|n| n.class == "exit-note")
        .map(|n| n.text.as_str())
        .collect();
    format!(
        "{}; {}, {}, {}; {} flat stretches; {}",
        if rounds.is_empty() {
            "no round".to_owned()
        } else {
            rounds.join(", ")
        },
        count("worker-failed", "worker failure", "worker failures"),
        count("restart-counted", "counted restart", "counted restarts"),
        count("restart-free", "free restart", "free restarts"),
        row.flats.len(),
        if exits.is_empty() {
            row.last_state.clone()
        } else {
            exits.join("; ")
        }
    )
}
