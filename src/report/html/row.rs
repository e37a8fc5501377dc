//! One node's row of the timeline as SVG: its lanes (agent states, rendezvous, worker
//! groups with their progress line, the store), fault shades and flat stretches, markers
//! pinned at their moment and the notes written under the lanes.

use super::draw::{LABEL_W, PLOT_W};
use super::timeline::{Row, Timeline, RDZV, STATE, STORE, WORKERS};
use super::{esc, notes, page_text, secs};
use std::fmt::Write;

const LANE_H: f64 = 7.0;
const STEPS_H: f64 = 28.0;
const STORE_H: f64 = 6.0;
const NOTE_H: f64 = 13.0;
/// How far (in pixels, up or down) a progress line may stray from the steps it draws: a
/// stray measured at one moment, so it stays this small at every zoom.
const LINE_TOLERANCE_PX: f64 = 0.3;

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

pub(super) fn draw_row(html: &mut String, node: &str, row: &Row, t: &Timeline) {
    let l = layout(row);
    let placed = notes::place(&row.notes, PLOT_W, |us| x(us, t.end_us));
    let line_count = placed
        .iter()
        .map(|p| p.first_line + p.lines.len())
        .max()
        .unwrap_or(0);
    let height = l.lanes_bottom + NOTE_H * line_count as f64 + 6.0;
    let _ = write!(
        html,
        "<svg class=\"row node\" id=\"row-{0}\" data-node=\"{0}\" width=\"{1}\" height=\"{height}\">\
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
    for p in placed {
        let x = x(p.note.at_us, t.end_us);
        let anchor = if p.ends_at { "end" } else { "start" };
        let _ = write!(
            html,
            "<g class=\"pin note {}\" data-x=\"{x:.2}\" data-at=\"{}\" data-top=\"{:.1}\" transform=\"translate({x:.2},0)\"><text x=\"0\" y=\"{:.1}\" text-anchor=\"{anchor}\">",
            p.note.class,
            p.note.at_us,
            l.lanes_bottom,
            l.lanes_bottom + NOTE_H * (p.first_line as f64 + 1.0),
        );
        for (i, line) in p.lines.iter().enumerate() {
            let dy = if i == 0 { 0.0 } else { NOTE_H };
            let _ = write!(html, "<tspan x=\"0\" dy=\"{dy}\">{}</tspan>", esc(line));
        }
        let _ = write!(
            html,
            "</text><title>{}: {}</title></g>",
            secs(p.note.at_us),
            esc(&p.note.text)
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
        let class = format!("shade {}", s.class);
        rect(html, x0, x1, 0.0, l.lanes_bottom, &class, "");
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
        let y_of = |step: u64| {
            l.steps_y + STEPS_H - 2.0 - step as f64 * (STEPS_H - 4.0) / t.steps_max as f64
        };
        let points: Vec<(u64, f64)> = line.iter().map(|&(at, step)| (at, y_of(step))).collect();
        for (at_us, y) in simplify(&points) {
            let _ = write!(html, "{:.2},{y:.1} ", x(at_us, t.end_us));
        }
        html.push_str("\"/>");
    }
}

/// The points of a progress line worth drawing: a point is left out when the straight
/// line between the points kept either side of it passes within `LINE_TOLERANCE_PX` of it
/// and of every point left out between them (a sleeve over time, so it holds at any zoom).
fn simplify(line: &[(u64, f64)]) -> Vec<(u64, f64)> {
    let Some(&first) = line.first() else {
        return Vec::new();
    };
    let mut out = vec![first];
    let mut anchor = first;
    // The slopes (pixels per microsecond) from the anchor that pass every point so far.
    let (mut low, mut high) = (f64::NEG_INFINITY, f64::INFINITY);
    let mut previous = first;
    // A pause longer than this keeps both its ends exactly: a stall's edges stay sharp.
    let gap_min = line.last().map_or(0, |last| (last.0 - first.0) / 200);
    for &p in &line[1..] {
        if p.0 - previous.0 > gap_min {
            if out.last() != Some(&previous) {
                out.push(previous);
            }
            out.push(p);
            anchor = p;
            previous = p;
            (low, high) = (f64::NEG_INFINITY, f64::INFINITY);
            continue;
        }
        let dt = (p.0 - anchor.0) as f64;
        if dt <= 0.0 {
            previous = p;
            continue;
        }
        let slope = (p.1 - anchor.1) / dt;
        if slope < low || slope > high {
            out.push(previous);
            anchor = previous;
            let dt = (p.0 - anchor.0) as f64;
            low = f64::NEG_INFINITY;
            high = f64::INFINITY;
            if dt <= 0.0 {
                previous = p;
                continue;
            }
        }
        let dt = (p.0 - anchor.0) as f64;
        low = low.max((p.1 - LINE_TOLERANCE_PX - anchor.1) / dt);
        high = high.min((p.1 + LINE_TOLERANCE_PX - anchor.1) / dt);
        previous = p;
    }
    if out.last() != Some(&previous) {
        out.push(previous);
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
            esc(&page_text(&m.title))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_line_keeps_its_ends_and_its_bends() {
        // 1 000 steps at one a second, a 60 s stall, then 1 000 more.
        let mut line: Vec<(u64, f64)> = (0..1_000u64)
            .map(|i| (i * 1_000_000, i as f64 * 0.01))
            .collect();
        line.extend((0..1_000u64).map(|i| ((1_060 + i) * 1_000_000, 10.0 + i as f64 * 0.01)));
        let kept = simplify(&line);
        assert!(kept.len() <= 6, "{kept:?}");
        assert_eq!(kept.first(), line.first());
        assert_eq!(kept.last(), line.last());
        assert!(
            kept.contains(&(999_000_000, 9.99)),
            "the stall's start is kept"
        );
        assert!(kept.contains(&(1_060_000_000, 10.0)), "and its end");
    }
}
