//! The page's goodput: the job's fate in one sentence and one bar of its wall time, the
//! kept steps first, then each cause of badput, in the report's order.

use super::{esc, secs};
use crate::report::Report;
use std::fmt::Write;

/// Each piece's colour, in the order bars stack them (this page's and the compare page's):
/// kept training green, the causes from waiting (grey) to loss (red).
pub(crate) const COLOURS: [(&str, &str); 8] = [
    ("productive", "#3c9a5f"),
    ("waiting_for_nodes", "#9a9aa6"),
    ("detection", "#c0392b"),
    ("rendezvous_restart", "#7e6bc4"),
    ("worker_start_restore", "#5b8fd4"),
    ("wasted_progress", "#e08a00"),
    ("checkpoint_save", "#c9a227"),
    ("lost_when_failed", "#7a1f1a"),
];

/// Writes the fate, the ETTR and the bar with its legend.
pub(super) fn section(html: &mut String, report: &Report) {
    let g = &report.goodput;
    let _ = write!(
        html,
        "<h2>Goodput</h2>\n<div id=\"fate\">{}</div>\n<div>ETTR <b id=\"ettr\">{:.1} %</b>: \
         {} of {} trained and kept</div>\n<div class=\"gbar\">",
        esc(&super::page_text(&g.fate)),
        g.ettr * 100.0,
        secs(g.productive_us),
        secs(g.wall_us)
    );
    let pieces = pieces(report);
    for (name, us, colour) in &pieces {
        let share = share_percent(*us, g.wall_us);
        let _ = write!(
            html,
            "<i style=\"width:{share:.3}%;background:{colour}\" title=\"{}: {} ({share:.1} %)\"></i>",
            label(name),
            secs(*us)
        );
    }
    html.push_str("</div>\n<div class=\"legend\">");
    // A piece under a millisecond is a rounding of the run's moments, not a cost.
    for (name, us, colour) in pieces.iter().filter(|p| p.1 >= 1_000) {
        let _ = write!(
            html,
            "<span><i style=\"background:{colour}\"></i>{} {} ({:.1} %)</span>",
            label(name),
            secs(*us),
            share_percent(*us, g.wall_us)
        );
    }
    html.push_str("</div>\n");
}

/// The pieces of the wall time that are not zero, with their colours.
fn pieces(report: &Report) -> Vec<(&'static str, u64, &'static str)> {
    let g = &report.goodput;
    COLOURS
        .iter()
        .map(|&(name, colour)| {
            let us = match name {
                "productive" => g.productive_us,
                cause => g.badput_us.get(cause).copied().unwrap_or(0),
            };
            (name, us, colour)
        })
        .filter(|(_, us, _)| *us > 0)
        .collect()
}

fn share_percent(us: u64, wall_us: u64) -> f64 {
    match wall_us {
        0 => 0.0,
        _ => us as f64 * 100.0 / wall_us as f64,
    }
}

fn label(name: &str) -> String {
    match name {
        "productive" => "kept training".to_owned(),
        cause => cause.replace('_', " "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::goodput::CAUSES;

    #[test]
    fn every_cause_has_a_colour() {
        for cause in CAUSES {
            let name: &str = cause.into();
            assert!(COLOURS.iter().any(|c| c.0 == name), "{name} has no colour");
        }
    }
}
