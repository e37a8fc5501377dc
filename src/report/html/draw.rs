//! Renders the timeline: zoom controls, a time axis that stays on screen, and one SVG row per
//! node (nodes in numeric order). Bars, shades and progress lines sit in a group the page's
//! script scales on the time axis; markers and text are pinned at a moment and moved, not
//! stretched. Past `GROUP_ROWS_MIN` nodes, runs of alike nodes that met no fault, flat
//! stretch or violation fold into one line a click opens.

use super::esc;
use super::timeline::{Note, Row, Timeline, RDZV, STATE, STORE, WORKERS};
use crate::check::secs;
use crate::sim_time::SimDuration;
use std::fmt::Write;

const LABEL_W: f64 = 170.0;
const PLOT_W: f64 = 1150.0;
const LANE_H: f64 = 7.0;
const STEPS_H: f64 = 28.0;
const STORE_H: f64 = 6.0;
const NOTE_H: f64 = 13.0;
/// Text cut past this many characters (the whole text stays in its tooltip).
const NOTE_CHARS_MAX: usize = 120;
/// Roughly how wide a character of a note is, to keep notes on one line from overlapping.
const CHAR_W: f64 = 6.0;
/// Fewer nodes than this are all shown.
const GROUP_ROWS_MIN: usize = 24;
/// The fewest alike nodes folded into one line.
const GROUP_LEN_MIN: usize = 3;

/// The whole timeline section.
pub(super) fn section(t: &Timeline) -> String {
    let mut html = format!(
        "<h2>Timeline</h2>\n<div id=\"timeline\" data-end-us=\"{}\" data-plot-w=\"{PLOT_W}\" data-label-w=\"{LABEL_W}\" data-view=\"0-{0}\">\n\
         <div class=\"tl-head\"><div id=\"zoom-controls\"><button id=\"zoom-in\" type=\"button\">zoom in</button>\
         <button id=\"zoom-out\" type=\"button\">zoom out</button><button id=\"pan-left\" type=\"button\">◀</button>\
         <button id=\"pan-right\" type=\"button\">▶</button><button id=\"zoom-reset\" type=\"button\">reset</button>\
         <span id=\"zoom-view\">0 s – {1}</span><span class=\"hint\">wheel on the axis (or ctrl+wheel) zooms, drag pans</span></div>\n",
        t.end_us,
        secs(t.end_us)
    );
    axis(&mut html, t.end_us);
    html.push_str("</div><div id=\"rows\">\n");
    let rows: Vec<(&str, &Row)> = t.rows.iter().map(|((_, n), r)| (n.as_str(), r)).collect();
    let mut i = 0;
    while i < rows.len() {
        let alike = if rows.len() >= GROUP_ROWS_MIN {
            rows[i..]
                .iter()
                .take_while(|(_, r)| quiet(r) && signature(r) == signature(rows[i].1))
                .count()
        } else {
            0
        };
        if alike >= GROUP_LEN_MIN {
            let group = &rows[i..i + alike];
            let _ = writeln!(
                html,
                "<details class=\"alike\"><summary>{} … {}: {alike} nodes alike, with no fault, flat stretch or violation — {}</summary>",
                esc(group[0].0),
                esc(group[alike - 1].0),
                esc(&signature(group[0].1))
            );
            for (node, row) in group {
                draw_row(&mut html, node, row, t);
            }
            html.push_str("</details>\n");
            i += alike;
        } else {
            draw_row(&mut html, rows[i].0, rows[i].1, t);
            i += 1;
        }
    }
    html.push_str("</div></div>\n");
    html
}

/// The axis as drawn before the script redraws it at every zoom.
fn axis(html: &mut String, end_us: u64) {
    let _ = write!(
        html,
        "<svg id=\"axis\" width=\"{}\" height=\"20\"><g id=\"ticks\">",
        LABEL_W + PLOT_W + 10.0
    );
    for tick in 0..=5u64 {
        // Whole seconds, so the labels stay short.
        let us = SimDuration::from_us(end_us * tick / 5)
            .floor_to(SimDuration::from_secs(1))
            .as_us();
        let x = LABEL_W + us as f64 * PLOT_W / end_us as f64;
        let _ = write!(
            html,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"14\" y2=\"20\"/><text x=\"{x:.1}\" y=\"11\" text-anchor=\"middle\">{}</text>",
            secs(us)
        );
    }
    html.push_str("</g></svg>\n");
}

/// A row with nothing a reader must look at: no fault, flat stretch, violation or failure.
fn quiet(row: &Row) -> bool {
    row.shades.is_empty()
        && row.flats.is_empty()
        && row.marks.is_empty()
        && row.notes.iter().all(|n| n.class == "exit-note")
}

/// What alike rows share: their rounds, their last state and exit.
fn signature(row: &Row) -> String {
    let rounds: Vec<&str> = row
        .spans
        .iter()
        .filter(|s| s.lane == RDZV && s.class == "round")
        .map(|s| s.title.split(':').next().unwrap_or(""))
        .collect();
    let exits: Vec<&str> = row.notes.iter().map(|n| n.text.as_str()).collect();
    format!(
        "{}; {}",
        if rounds.is_empty() {
            "no round".to_owned()
        } else {
            rounds.join(", ")
        },
        if exits.is_empty() {
            row.last_state.clone()
        } else {
            exits.join("; ")
        }
    )
}

/// Where a row's lanes sit, top to bottom.
struct Layout {
    state_y: f64,
    rdzv_y: f64,
    steps_y: f64,
    store_y: f64,
    /// The bottom of the lanes: markers and shades reach down to it.
    lanes_bottom: f64,
}

fn layout(row: &Row) -> Layout {
    let has_agent = row.spans.iter().any(|s| s.lane != STORE);
    let has_store = row.spans.iter().any(|s| s.lane == STORE);
    let top = 3.0;
    let mut bottom = top;
    let mut l = Layout {
        state_y: top,
        rdzv_y: top + LANE_H + 2.0,
        steps_y: top + 2.0 * (LANE_H + 2.0),
        store_y: top,
        lanes_bottom: top,
    };
    if has_agent {
        bottom = l.steps_y + STEPS_H;
    }
    if has_store {
        l.store_y = bottom + 2.0;
        bottom = l.store_y + STORE_H;
    }
    l.lanes_bottom = bottom.max(top + 14.0);
    l
}

fn x(us: u64, end_us: u64) -> f64 {
    us.min(end_us) as f64 * PLOT_W / end_us as f64
}

fn draw_row(html: &mut String, node: &str, row: &Row, t: &Timeline) {
    let l = layout(row);
    let lines = note_lines(row, t.end_us);
    let line_count = lines.iter().map(|(line, _)| line + 1).max().unwrap_or(0);
    let height = l.lanes_bottom + NOTE_H * line_count as f64 + 6.0;
    let _ = write!(
        html,
        "<svg class=\"row node\" data-node=\"{0}\" width=\"{1}\" height=\"{height}\">\
         <text x=\"4\" y=\"13\" font-weight=\"600\">{0}</text><text class=\"lane-label\" x=\"4\" y=\"26\">{2}</text>",
        esc(node),
        LABEL_W + PLOT_W + 10.0,
        esc(&row.last_state)
    );
    labels(html, row, &l, t.steps_max);
    let _ = write!(
        html,
        "<svg class=\"plot\" x=\"{LABEL_W}\" y=\"0\" width=\"{PLOT_W}\" height=\"{height}\"><g class=\"zoom\">"
    );
    shapes(html, row, &l, t);
    html.push_str("</g>");
    pins(html, row, &l, t.end_us);
    for (line, note) in lines {
        let x = x(note.at_us, t.end_us);
        let anchor = if ends_at(note, x) { "end" } else { "start" };
        let text: String = note.text.chars().take(NOTE_CHARS_MAX).collect();
        let cut = if text.len() < note.text.len() {
            "…"
        } else {
            ""
        };
        let _ = write!(
            html,
            "<g class=\"pin note {}\" data-x=\"{x:.2}\" transform=\"translate({x:.2},0)\"><text x=\"0\" y=\"{:.1}\" text-anchor=\"{anchor}\">{}{cut}</text><title>{}: {}</title></g>",
            note.class,
            l.lanes_bottom + NOTE_H * (line as f64 + 1.0),
            esc(&text),
            secs(note.at_us),
            esc(&note.text)
        );
    }
    html.push_str("</svg></svg>\n");
}

/// The lanes' names, only for the lanes the row has.
fn labels(html: &mut String, row: &Row, l: &Layout, steps_max: u64) {
    let mut label = |y: f64, text: &str| {
        let _ = write!(
            html,
            "<text class=\"lane-label\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{text}</text>",
            LABEL_W - 6.0,
            y
        );
    };
    if row.spans.iter().any(|s| s.lane != STORE) {
        label(l.state_y + 7.0, "agent");
        label(l.rdzv_y + 7.0, "rendezvous");
        label(l.steps_y + 10.0, &format!("step {steps_max}"));
        label(l.steps_y + STEPS_H, "step 0");
    }
    if row.spans.iter().any(|s| s.lane == STORE) {
        label(l.store_y + 6.0, "store server");
    }
}

/// Everything that stretches with the time axis: fault shades, bars, flat stretches and the
/// progress lines.
fn shapes(html: &mut String, row: &Row, l: &Layout, t: &Timeline) {
    let rect = |html: &mut String, x0: f64, x1: f64, y: f64, h: f64, class: &str, attrs: &str| {
        let _ = write!(
            html,
            "<rect class=\"{class}\"{attrs} x=\"{x0:.2}\" y=\"{y:.1}\" width=\"{:.2}\" height=\"{h:.1}\">",
            (x1 - x0).max(0.5)
        );
    };
    for s in &row.shades {
        let (x0, x1) = (x(s.start_us, t.end_us), x(s.end_us, t.end_us));
        rect(
            html,
            x0,
            x1,
            0.0,
            l.lanes_bottom,
            &format!("shade {}", s.class),
            "",
        );
        let _ = write!(html, "<title>{}</title></rect>", esc(&s.title));
    }
    for s in &row.spans {
        let (x0, x1) = (x(s.start_us, t.end_us), x(s.end_us, t.end_us));
        let (y, h) = match s.lane {
            STATE => (l.state_y, LANE_H),
            RDZV => (l.rdzv_y, LANE_H),
            WORKERS => (l.steps_y, STEPS_H),
            _ => (l.store_y, STORE_H),
        };
        rect(html, x0, x1, y, h, &esc(&s.class), &s.attrs);
        let _ = write!(
            html,
            "<title>{} ({} – {})</title></rect>",
            esc(&s.title),
            secs(s.start_us),
            secs(s.end_us)
        );
    }
    for f in &row.flats {
        let (x0, x1) = (x(f.start_us, t.end_us), x(f.end_us, t.end_us));
        rect(html, x0, x1, l.steps_y, STEPS_H, f.class, "");
        let _ = write!(html, "<title>{}</title></rect>", esc(&f.title));
    }
    for line in &row.lines {
        html.push_str("<polyline class=\"steps\" vector-effect=\"non-scaling-stroke\" points=\"");
        for (at_us, step) in thin(line, t.end_us) {
            let y = l.steps_y + STEPS_H - 2.0 - step as f64 * (STEPS_H - 4.0) / t.steps_max as f64;
            let _ = write!(html, "{:.2},{y:.1} ", x(at_us, t.end_us));
        }
        html.push_str("\"/>");
    }
}

/// The points of a progress line worth drawing: one per 1/40,000 of the run, and always
/// the points either side of a longer gap, so a flat stretch keeps its exact ends.
fn thin(line: &[(u64, u64)], end_us: u64) -> Vec<(u64, u64)> {
    let res_us = end_us / 40_000;
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (i, &p) in line.iter().enumerate() {
        let gap_next = line.get(i + 1).map_or(u64::MAX, |n| n.0 - p.0);
        let since = out.last().map_or(u64::MAX, |k| p.0 - k.0);
        if since >= res_us || gap_next >= res_us * 20 || i + 1 == line.len() {
            out.push(p);
        }
    }
    out
}

/// Markers pinned at their moment: kills, faults, restarts, failures and violations.
fn pins(html: &mut String, row: &Row, l: &Layout, end_us: u64) {
    for m in &row.marks {
        let x = x(m.at_us, end_us);
        let id =
            m.id.as_deref()
                .map(|id| format!(" id=\"{id}\""))
                .unwrap_or_default();
        let head = if m.class == "violation" {
            "<path d=\"M-6,0 L6,0 L0,8 Z\"/><line class=\"hit\" y1=\"0\" y2=\"".to_owned()
                + &format!("{:.1}\"/>", l.lanes_bottom)
        } else {
            String::new()
        };
        let _ = write!(
            html,
            "<g{id} class=\"pin mark {0}-mark\"{1} data-x=\"{x:.2}\" data-at=\"{2}\" transform=\"translate({x:.2},0)\">{head}\
             <line class=\"{0}\" y1=\"0\" y2=\"{3:.1}\"/><title>{4}: {5}</title></g>",
            m.class,
            m.attrs,
            m.at_us,
            l.lanes_bottom,
            secs(m.at_us),
            esc(&m.title)
        );
    }
}

fn note_w(note: &Note) -> f64 {
    note.text.chars().count().min(NOTE_CHARS_MAX) as f64 * CHAR_W
}

/// Whether a note at `x` is written leftwards, ending at its moment: when it would run off
/// the plot's right edge otherwise and fits on its left.
fn ends_at(note: &Note, x: f64) -> bool {
    let w = note_w(note);
    x + w > PLOT_W && x >= w
}

/// Each note with the line of text it goes on: notes are placed left to right, each on the
/// first line where it overlaps nothing at the unzoomed scale (zooming in only spreads them).
fn note_lines(row: &Row, end_us: u64) -> Vec<(usize, &Note)> {
    let mut notes: Vec<(f64, f64, &Note)> = row
        .notes
        .iter()
        .map(|n| {
            let x = x(n.at_us, end_us);
            let w = note_w(n);
            if ends_at(n, x) {
                (x - w, x, n)
            } else {
                (x, x + w, n)
            }
        })
        .collect();
    notes.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.2.at_us.cmp(&b.2.at_us)));
    let mut ends: Vec<f64> = Vec::new();
    let mut out = Vec::new();
    for (start, end, note) in notes {
        let line = match ends.iter().position(|&e| e + 8.0 <= start) {
            Some(i) => i,
            None => {
                ends.push(f64::MIN);
                ends.len() - 1
            }
        };
        ends[line] = end;
        out.push((line, note));
    }
    out
}
