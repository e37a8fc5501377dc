//! The compare page's pictures as inline SVG: ETTR per variant (every seed a faint dot, the
//! mean with its 95 % interval), bars of where the wall time went and of the outcomes, and
//! the paired differences with their intervals. Pure functions of the numbers given.

use crate::report::html::esc;
use std::fmt::Write;

/// The most seeds drawn as dots per variant: past it every k-th seed is drawn, so a page of
/// a million seeds stays a few megabytes.
pub const DOTS_MAX: usize = 2_000;
/// Characters of a variant's label under the ETTR plot when the labels are slanted; the
/// whole name is its tooltip.
const LABEL_CHARS_MAX: usize = 28;
/// Width of the bar charts' label column and of their bars, in pixels.
const BAR_LABEL_W: f64 = 260.0;
const BAR_W: f64 = 720.0;

/// One variant as the ETTR plot draws it.
pub struct ArmPoints {
    /// What the axis shows under the variant (a swept value, a file's name).
    pub label: String,
    /// The variant's whole name, for the tooltip.
    pub name: String,
    /// Each seed's ETTR (0 to 1), in seed order.
    pub ettrs: Vec<f64>,
    /// Each seed's dot: its outcome (`succeeded`, `failed`, `timed_out`; a dot of each is
    /// drawn differently) and its tooltip (the seed, its ETTR and how to replay it).
    pub runs: Vec<(String, String)>,
    pub mean: f64,
    pub half_width_95: f64,
}

/// `text` cut to `max` characters, with an ellipsis when cut.
pub fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let kept: String = text.chars().take(max.saturating_sub(1)).collect();
    kept + "…"
}

/// ETTR (y, 0–100 %) against the variants (x, in the order given, evenly spaced): every
/// seed a faint dot, the mean a black bar with its 95 % interval. `connect` joins the means
/// with a line, for a sweep whose values are in order.
pub fn ettr_plot(arms: &[ArmPoints], x_title: &str, connect: bool) -> String {
    let band = (1100.0 / arms.len().max(1) as f64).clamp(24.0, 220.0);
    let rotate = band < 110.0;
    let (left, top, plot_h) = (64.0, 16.0, 300.0);
    let bottom = if rotate { 150.0 } else { 64.0 };
    let width = left + band * arms.len() as f64 + 24.0;
    let height = top + plot_h + bottom;
    let y = |ettr: f64| top + plot_h * (1.0 - ettr.clamp(0.0, 1.0));
    let x = |i: usize| left + band * (i as f64 + 0.5);
    let mut svg = format!(
        "<svg id=\"ettr-plot\" width=\"{width:.0}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\" aria-label=\"ETTR per variant\">\n"
    );
    for pct in (0..=100).step_by(20) {
        let yy = y(pct as f64 / 100.0);
        let _ = writeln!(
            svg,
            "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" class=\"grid\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{pct} %</text>",
            width - 24.0,
            left - 6.0,
            yy + 4.0
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"14\" y=\"{:.1}\" transform=\"rotate(-90 14 {:.1})\" text-anchor=\"middle\" \
         class=\"axis-title\">ETTR (share of wall time trained and kept)</text>",
        top + plot_h / 2.0,
        top + plot_h / 2.0
    );
    for (i, arm) in arms.iter().enumerate() {
        dots(&mut svg, arm, x(i), band, &y);
    }
    if connect && arms.len() > 1 {
        let points: Vec<String> = arms
            .iter()
            .enumerate()
            .map(|(i, a)| format!("{:.1},{:.1}", x(i), y(a.mean)))
            .collect();
        let _ = writeln!(
            svg,
            "<polyline class=\"mean-line\" points=\"{}\"/>",
            points.join(" ")
        );
    }
    for (i, arm) in arms.iter().enumerate() {
        mean_and_interval(&mut svg, arm, i, x(i), band, &y);
        axis_label(&mut svg, arm, x(i), top + plot_h, band);
    }
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"axis-title\">{}</text>\n</svg>",
        left + band * arms.len() as f64 / 2.0,
        height - 8.0,
        esc(x_title)
    );
    svg
}

/// Every seed's ETTR as a faint dot, spread sideways so equal values stay visible; past
/// [`DOTS_MAX`] seeds every k-th is drawn.
fn dots(svg: &mut String, arm: &ArmPoints, cx: f64, band: f64, y: &impl Fn(f64) -> f64) {
    let step = arm.ettrs.len().div_ceil(DOTS_MAX).max(1);
    for (i, ettr) in arm.ettrs.iter().enumerate().step_by(step) {
        // The golden ratio's fractional part spreads successive seeds evenly over the band.
        let spread = ((i as f64 * 0.618_034).fract() - 0.5) * band * 0.5;
        let (outcome, title) = arm
            .runs
            .get(i)
            .map_or(("succeeded", ""), |(o, t)| (o.as_str(), t.as_str()));
        let (cx, cy) = (cx + spread, y(*ettr));
        match outcome {
            // A run the time limit cut: a hollow ring, its ETTR of a job not done.
            "timed_out" => {
                let _ = write!(
                    svg,
                    "<circle class=\"seed seed-timed_out\" cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"3.5\"><title>{}</title></circle>",
                    crate::report::html::esc(title)
                );
            }
            // A run that failed for good: a cross.
            "failed" => {
                let _ = write!(
                    svg,
                    "<path class=\"seed seed-failed\" d=\"M{:.1},{:.1}l7,7m0,-7l-7,7\"><title>{}</title></path>",
                    cx - 3.5,
                    cy - 3.5,
                    crate::report::html::esc(title)
                );
            }
            _ => {
                let _ = write!(
                    svg,
                    "<circle class=\"seed\" cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"3.5\"><title>{}</title></circle>",
                    crate::report::html::esc(title)
                );
            }
        }
    }
    svg.push('\n');
}

fn mean_and_interval(
    svg: &mut String,
    arm: &ArmPoints,
    index: usize,
    cx: f64,
    band: f64,
    y: &impl Fn(f64) -> f64,
) {
    let (low, high) = (arm.mean - arm.half_width_95, arm.mean + arm.half_width_95);
    let half = (band * 0.3).min(26.0);
    let _ = writeln!(
        svg,
        "<g class=\"arm\" data-variant=\"{index}\" data-mean=\"{:.4}\" data-ci-low=\"{:.4}\" \
         data-ci-high=\"{:.4}\"><title>{}: mean ETTR {:.1} %, 95 % interval {:.1} – {:.1} %, \
         {} seeds</title>\
         <line class=\"ci\" x1=\"{cx:.1}\" x2=\"{cx:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>\
         <line class=\"ci\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>\
         <line class=\"ci\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>\
         <line class=\"mean\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>\
         <text class=\"mean-label\" x=\"{:.1}\" y=\"{:.1}\">{:.1} %</text></g>",
        arm.mean,
        low,
        high,
        esc(&arm.name),
        arm.mean * 100.0,
        low * 100.0,
        high * 100.0,
        arm.ettrs.len(),
        y(low),
        y(high),
        cx - half / 2.0,
        cx + half / 2.0,
        y(low),
        y(low),
        cx - half / 2.0,
        cx + half / 2.0,
        y(high),
        y(high),
        cx - half,
        cx + half,
        y(arm.mean),
        y(arm.mean),
        cx + half + 3.0,
        y(arm.mean) + 4.0,
        arm.mean * 100.0
    );
}

fn axis_label(svg: &mut String, arm: &ArmPoints, cx: f64, axis_y: f64, band: f64) {
    let rotate = band < 110.0;
    // 11 px type is about 6 px a character: an upright label keeps to its band.
    let fits = if rotate {
        LABEL_CHARS_MAX
    } else {
        (band / 6.0) as usize
    };
    let label = esc(&cut(&arm.label, fits));
    let name = esc(&arm.name);
    let ly = axis_y + 16.0;
    if rotate {
        let _ = writeln!(
            svg,
            "<text x=\"{cx:.1}\" y=\"{ly:.1}\" text-anchor=\"end\" \
             transform=\"rotate(-40 {cx:.1} {ly:.1})\"><title>{name}</title>{label}</text>"
        );
    } else {
        let _ = writeln!(
            svg,
            "<text x=\"{cx:.1}\" y=\"{ly:.1}\" text-anchor=\"middle\"><title>{name}</title>{label}</text>"
        );
    }
}

/// One piece of a stacked bar: its name, its amount, its colour.
pub struct Piece {
    pub name: String,
    pub amount: f64,
    pub colour: &'static str,
    /// The tooltip's words after the name.
    pub detail: String,
    /// What the bar writes in the piece when it is wide enough (a share, a count).
    pub shown: String,
}

/// One horizontal stacked bar per row, each filling the width (its pieces as shares of
/// their sum), labelled on the left, with each piece's `shown` written in it when it fits
/// and `note` on the right.
pub fn stacked_bars(id: &str, rows: &[(String, Vec<Piece>, String)]) -> String {
    let (row_h, gap) = (24.0, 8.0);
    let width = BAR_LABEL_W + BAR_W + 260.0;
    let height = rows.len() as f64 * (row_h + gap) + gap;
    let mut svg = format!(
        "<svg id=\"{id}\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\">\n"
    );
    for (r, (label, pieces, note)) in rows.iter().enumerate() {
        let top = gap + r as f64 * (row_h + gap);
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\"><title>{}</title>{}</text>",
            BAR_LABEL_W - 8.0,
            top + 16.0,
            esc(label),
            esc(&cut(label, 40))
        );
        let total: f64 = pieces.iter().map(|p| p.amount).sum();
        let mut x = BAR_LABEL_W;
        for piece in pieces.iter().filter(|p| p.amount > 0.0) {
            let share = piece.amount / total;
            let w = share * BAR_W;
            let _ = write!(
                svg,
                "<rect x=\"{x:.2}\" y=\"{top:.1}\" width=\"{w:.2}\" height=\"{row_h}\" \
                 fill=\"{}\" data-piece=\"{}\"><title>{}: {:.1} % ({})</title></rect>",
                piece.colour,
                esc(&piece.name),
                esc(&piece.name.replace('_', " ")),
                share * 100.0,
                esc(&piece.detail)
            );
            if w >= 38.0 {
                let _ = write!(
                    svg,
                    "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"in-bar\">{}</text>",
                    x + w / 2.0,
                    top + 16.0,
                    esc(&piece.shown)
                );
            }
            x += w;
        }
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            BAR_LABEL_W + BAR_W + 8.0,
            top + 16.0,
            esc(note)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// One paired difference as the forest plot draws it.
pub struct DifferenceRow {
    pub label: String,
    /// In points of ETTR (percent).
    pub mean: f64,
    pub low: f64,
    pub high: f64,
    /// `better`, `worse` or `no difference shown`.
    pub verdict: &'static str,
}

/// Each variant's paired difference from the first as a point with its 95 % interval,
/// around a line at zero: right of it the variant kept more of its wall time training.
pub fn forest_plot(rows: &[DifferenceRow]) -> String {
    let (row_h, top, axis_h) = (26.0, 10.0, 40.0);
    let (left, plot_w) = (BAR_LABEL_W + 60.0, 560.0);
    let reach = rows
        .iter()
        .flat_map(|r| [r.low.abs(), r.high.abs()])
        .fold(1.0_f64, f64::max)
        * 1.1;
    let x = |points: f64| left + plot_w * (points + reach) / (2.0 * reach);
    let width = left + plot_w + 260.0;
    let height = top + rows.len() as f64 * row_h + axis_h;
    let axis_y = top + rows.len() as f64 * row_h;
    let mut svg = format!(
        "<svg id=\"differences-plot\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\">\n\
         <line class=\"zero\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{top}\" y2=\"{axis_y:.1}\"/>\n",
        x(0.0),
        x(0.0)
    );
    for tick in [-reach, -reach / 2.0, reach / 2.0, reach].map(|t| t / 1.1) {
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{tick:+.1}</text>",
            x(tick),
            axis_y + 14.0
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">0</text>",
        x(0.0),
        axis_y + 14.0
    );
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"axis-title\">\
         difference in points of ETTR, seed by seed (right of 0: better than the first)</text>",
        x(0.0),
        axis_y + 32.0
    );
    for (i, row) in rows.iter().enumerate() {
        let cy = top + i as f64 * row_h + row_h / 2.0;
        let class = row.verdict.replace(' ', "-");
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\"><title>{}</title>{}</text>\
             <line class=\"diff {class}\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{cy:.1}\" y2=\"{cy:.1}\"/>\
             <circle class=\"diff {class}\" cx=\"{:.1}\" cy=\"{cy:.1}\" r=\"4.5\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{:+.1} [{:+.1}, {:+.1}] {}</text>",
            left - 12.0,
            cy + 4.0,
            esc(&row.label),
            esc(&cut(&row.label, 48)),
            x(row.low),
            x(row.high),
            x(row.mean),
            left + plot_w + 10.0,
            cy + 4.0,
            row.mean,
            row.low,
            row.high,
            row.verdict
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_million_seeds_draw_at_most_dots_max_dots() {
        let arm = ArmPoints {
            label: "a".into(),
            name: "a".into(),
            ettrs: vec![0.5; 1_000_000],
            runs: Vec::new(),
            mean: 0.5,
            half_width_95: 0.0,
        };
        let svg = ettr_plot(&[arm], "x", false);
        let dots = svg.matches("class=\"seed\"").count();
        assert!((DOTS_MAX / 2..=DOTS_MAX).contains(&dots), "{dots}");
    }

    #[test]
    fn labels_are_cut_with_an_ellipsis() {
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abc", 4), "abc");
    }
}
