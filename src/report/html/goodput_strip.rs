//! The goodput bar laid out in time: a strip at the top of the timeline (it stays on screen
//! as the rows scroll) with every stretch of the job's wall time where it happened, in the
//! bar's colours, each stretch of lost time labelled with its cause and length inside its
//! own span; and a table of those stretches, each linked to its place on the timeline.
//! The stretches are the very pieces the goodput figures add up.

use super::goodput_bar::COLOURS;
use super::{esc, secs};
use crate::report::goodput::{measure_with_stretches, Cause, Stretch};
use crate::report::Report;
use crate::scenario::model::{Outcome, Scenario};
use crate::sim_time::{brief, SimDuration, SimInstant};
use crate::trace::{RunEnd, Trace};
use std::fmt::Write;

/// A piece under this is a rounding of the run's moments, not a cost (the bar's legend
/// leaves such pieces out too); the strip neither draws nor labels it.
const STRETCH_US_MIN: u64 = 1_000;
/// The strip's height: the band, then a line for the labels.
pub(super) const STRIP_H: f64 = 30.0;

/// The stretches of the run's wall time worth drawing, in time order.
pub(super) fn stretches(scenario: &Scenario, report: &Report, trace: &Trace) -> Vec<Stretch> {
    let outcome = [Outcome::Succeeded, Outcome::Failed, Outcome::TimedOut]
        .into_iter()
        .find(|o| o.as_str() == report.outcome)
        .unwrap_or(Outcome::Failed);
    let end = RunEnd {
        ended_at: SimInstant::from_us(report.sim_time_us),
        outcome,
    };
    let (goodput, stretches) = measure_with_stretches(scenario, trace, &end);
    debug_assert_eq!(
        goodput, report.goodput,
        "the page's goodput is the report's"
    );
    stretches
        .into_iter()
        .filter(|s| s.end.since(s.start).as_us() >= STRETCH_US_MIN)
        .collect()
}

fn cause_name(cause: Option<Cause>) -> &'static str {
    cause.map_or("productive", <&'static str>::from)
}

fn colour(cause: Option<Cause>) -> &'static str {
    let name = cause_name(cause);
    COLOURS.iter().find(|c| c.0 == name).map_or("#999", |c| c.1)
}

/// A cause in a word or two, for labels that have little room.
fn short_name(cause: Cause) -> &'static str {
    match cause {
        Cause::WaitingForNodes => "waiting",
        Cause::Detection => "detection",
        Cause::RendezvousRestart => "rendezvous",
        Cause::WorkerStartRestore => "start",
        Cause::WastedProgress => "redone",
        Cause::CheckpointSave => "checkpoint",
        Cause::LostWhenFailed => "lost",
    }
}

/// The strip: an SVG the page's script zooms with the rows. `plot_w` and `label_w` are
/// the rows' geometry; `end_us` the timeline's end.
pub(super) fn strip(stretches: &[Stretch], end_us: u64, label_w: f64, plot_w: f64) -> String {
    let x = |at: SimInstant| at.as_us().min(end_us) as f64 * plot_w / end_us as f64;
    let mut html = format!(
        "<svg id=\"goodput-strip\" class=\"row\" width=\"{}\" height=\"{STRIP_H}\">\
         <text x=\"4\" y=\"12\" font-weight=\"600\">the job</text>\
         <text class=\"lane-label\" x=\"4\" y=\"24\">goodput in time</text>\
         <svg class=\"plot\" x=\"{label_w}\" y=\"0\" width=\"{plot_w}\" height=\"{STRIP_H}\"><g class=\"zoom\">",
        label_w + plot_w + 10.0
    );
    for (i, s) in stretches.iter().enumerate() {
        let (x0, x1) = (x(s.start), x(s.end));
        let class = match s.cause {
            None => "gp-band gp-kept",
            Some(_) => "gp-band gp-lost",
        };
        let _ = write!(
            html,
            "<rect id=\"gpb-{i}\" class=\"{class}\" data-cause=\"{}\" data-start-us=\"{}\" data-end-us=\"{}\" \
             x=\"{x0:.2}\" y=\"2\" width=\"{:.2}\" height=\"12\" fill=\"{}\"><title>{}</title></rect>",
            cause_name(s.cause),
            s.start.as_us(),
            s.end.as_us(),
            (x1 - x0).max(0.5),
            colour(s.cause),
            esc(&title(s))
        );
    }
    html.push_str("</g>");
    for (i, s) in stretches.iter().enumerate() {
        let Some(cause) = s.cause else { continue };
        let length = brief(s.end.since(s.start));
        let full = format!("{} {length}", cause_name(Some(cause)).replace('_', " "));
        let short = format!("{} {length}", short_name(cause));
        // The script shows the longest form that fits inside the stretch at the current
        // zoom, and none when none fits; the server's guess is the unzoomed one.
        let _ = write!(
            html,
            "<g class=\"pin gp-label\" id=\"gp-{i}\" data-x=\"{:.2}\" data-x-end=\"{:.2}\" \
             data-forms=\"{}|{}|{}\"><text x=\"2\" y=\"26\">{}</text><title>{}</title></g>",
            x(s.start),
            x(s.end),
            esc(&full),
            esc(&short),
            esc(&length),
            esc(&full),
            esc(&title(s))
        );
    }
    html.push_str("</svg></svg>\n");
    html
}

fn title(s: &Stretch) -> String {
    let what = match s.cause {
        None => "kept training".to_owned(),
        Some(c) => <&'static str>::from(c).replace('_', " "),
    };
    format!(
        "{what}: {} ({} – {})",
        brief(s.end.since(s.start)),
        secs(s.start.as_us()),
        secs(s.end.as_us())
    )
}

/// The stretches of lost time as a table, longest first, each linked to its place.
pub(super) fn table(html: &mut String, stretches: &[Stretch]) {
    let mut lost: Vec<(usize, &Stretch)> = stretches
        .iter()
        .enumerate()
        .filter(|(_, s)| s.cause.is_some())
        .collect();
    if lost.is_empty() {
        return;
    }
    lost.sort_by_key(|(i, s)| (std::cmp::Reverse(s.end.since(s.start)), *i));
    let _ = write!(
        html,
        "<details id=\"lost-stretches\"{}><summary>where the time was lost: {} stretch{} \
         (on the timeline's top strip; a link shows one)</summary>\n<table><tr><th>cause</th>\
         <th>from</th><th>to</th><th>length</th></tr>\n",
        if lost.len() <= 12 { " open" } else { "" },
        lost.len(),
        if lost.len() == 1 { "" } else { "es" }
    );
    for (i, s) in lost {
        let pad = SimDuration::from_us(s.end.since(s.start).as_us() / 4);
        let (a, b) = (s.start.before(pad), s.end.after(pad));
        let _ = writeln!(
            html,
            "<tr><td><i class=\"swatch\" style=\"background:{}\"></i>{}</td><td><a href=\"#t={}-{}\" \
             data-stretch=\"gp-{i}\">{}</a></td><td>{}</td><td>{}</td></tr>",
            colour(s.cause),
            cause_name(s.cause).replace('_', " "),
            hash_secs(a),
            hash_secs(b),
            secs(s.start.as_us()),
            secs(s.end.as_us()),
            brief(s.end.since(s.start))
        );
    }
    html.push_str("</table></details>\n");
}

/// A moment for the page's `#t=A-B` address: seconds to the microsecond.
fn hash_secs(at: SimInstant) -> String {
    crate::check::secs(at.as_us())
        .trim_end_matches(" s")
        .to_owned()
}
