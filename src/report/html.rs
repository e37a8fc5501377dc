//! The picture of one run: a self-contained HTML page (inline SVG, CSS and script; nothing
//! loaded from elsewhere) with the job's goodput, its faults, a timeline per node that zooms
//! on its time axis under a strip of where the wall time went, the rounds and agents, and
//! the invariant verdicts, each violation linked both ways with its moment on the
//! timeline, and the rendezvous's lists round by round from the run's story. A pure
//! function of the scenario, the report, the trace and the story, so the same seed writes
//! the same bytes.

mod draw;
mod fault_shades;
pub(crate) mod goodput_bar;
mod goodput_strip;
mod index_page;
mod notes;
mod rendezvous_lists;
mod row;
mod sections;
mod stretches;
mod timeline;

pub use index_page::{index, IndexEntry};

use super::Report;
use crate::check::Status;
use crate::scenario::model::Scenario;
use crate::trace::{Story, Trace};
use std::fmt::Write;

/// Escapes text for HTML element content and attribute values.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Seconds to the millisecond: the page's moments (the reports keep the microseconds).
pub(crate) fn secs(us: u64) -> String {
    crate::sim_time::secs_to_ms(us)
}

/// A sentence from the trace as the page writes it: a span in microseconds (`600000000
/// us`) in a unit people read, and store keys without the rendezvous prefix they all
/// share (`torch.rendezvous.trainsim.2/torchelastic/assigned_ranks/10` becomes
/// `…/torchelastic/assigned_ranks/10`), so the telling part of a key stays in view.
pub(crate) fn page_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, word) in text.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let mut word = word.to_owned();
        while let Some(at) = word.find("torch.rendezvous.") {
            match word[at..].find('/') {
                Some(slash) => word.replace_range(at..at + slash + 1, "…/"),
                None => break,
            }
        }
        out.push_str(&word);
    }
    // `N us` → the span in brief.
    let words: Vec<&str> = out.split(' ').collect();
    let mut done: Vec<String> = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        let unit = words
            .get(i + 1)
            .map(|w| w.trim_end_matches([',', ')', ';', ':', '.']));
        match (words[i].parse::<u64>(), unit) {
            (Ok(us), Some("us")) => {
                let tail = &words[i + 1][2..];
                let span = crate::sim_time::brief(crate::sim_time::SimDuration::from_us(us));
                done.push(format!("{span}{tail}"));
                i += 2;
            }
            // Seconds to the microsecond (`331.086779 s`) to the millisecond.
            (Err(_), Some("s")) if micro_decimals(words[i]) => {
                let secs: f64 = words[i].parse().unwrap_or_default();
                let text = format!("{secs:.3}");
                done.push(crate::sim_time::trim_decimals(&text));
                i += 1;
            }
            _ => {
                done.push(words[i].to_owned());
                i += 1;
            }
        }
    }
    fewer_keys(&done.join(" "))
}

/// Whether `word` is a number with more than three decimals (`331.086779`).
fn micro_decimals(word: &str) -> bool {
    match word.split_once('.') {
        Some((whole, frac)) => {
            !whole.is_empty()
                && whole.chars().all(|c| c.is_ascii_digit())
                && frac.len() > 3
                && frac.chars().all(|c| c.is_ascii_digit())
        }
        None => false,
    }
}

/// A store wait's list of keys, past two, as its first two and how many more.
fn fewer_keys(text: &str) -> String {
    const KEYS: &str = "keys: ";
    let Some(at) = text.find(KEYS) else {
        return text.to_owned();
    };
    let from = at + KEYS.len();
    let end = text[from..].find(')').map_or(text.len(), |e| from + e);
    let keys: Vec<&str> = text[from..end].split(", ").collect();
    if keys.len() <= 2 {
        return text.to_owned();
    }
    format!(
        "{}{}, {} and {} more{}",
        &text[..from],
        keys[0],
        keys[1],
        keys.len() - 2,
        &text[end..]
    )
}

const STYLE: &str = "
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d1d1f;max-width:1400px}
#timeline{overflow-x:auto}td.num{white-space:nowrap}.swatch{display:inline-block;width:10px;height:10px;margin-right:6px}
details>summary{cursor:pointer}#faults,#rounds,#lost-stretches,#rendezvous-lists{margin:6px 0}
tr.rdzv-round td{background:#f4f7f8}tr.rdzv-alike td{color:#555;font-style:italic}
h1{font-size:20px;margin:0 0 4px}
.desc{white-space:pre-wrap;color:#444;margin:8px 0 12px}
.meta span{margin-right:18px}
code{background:#f2f2f4;padding:2px 6px;border-radius:4px}
.pass{color:#0a7c2f;font-weight:600}.fail{color:#b3261e;font-weight:600}
svg text{font:11px system-ui,sans-serif;fill:#333}
#timeline{border:1px solid #ddd;border-radius:6px;background:#fff;margin:8px 0;padding:0 0 6px}
.tl-head{position:sticky;top:0;background:#fff;z-index:2;border-bottom:1px solid #eee;padding:6px 0 0}
#zoom-controls{padding:0 8px}#zoom-controls button{margin-right:4px}
#zoom-view{margin:0 12px;font-weight:600}.hint{color:#888;font-size:12px}
#axis line{stroke:#999}
svg.row{display:block;border-bottom:1px solid #f0f0f0}
.plot{cursor:grab}
details.alike>summary{padding:4px 8px;color:#555;cursor:pointer;border-bottom:1px solid #f0f0f0}
.agent{fill:#e6eef0}.state-HEALTHY{fill:#8fcfc4}.state-INIT{fill:#e3e3e8}
.state-STOPPED{fill:#efe0b9}.state-FAILED{fill:#f4b6b0}.state-SUCCEEDED{fill:#c3e6c8}
.state-UNHEALTHY{fill:#f4b6b0}
.round{fill:#3f6f7a}.joining{fill:#c9d6db}.rdzv-failed{fill:#e07a70}
.round-pending{fill:#3f6f7a;fill-opacity:.45}
.workers{fill:#eef4ef}.store{fill:#a07850}
.steps{fill:none;stroke:#2e7d4f;stroke-width:1.6}
.flat{fill:#f7d560;fill-opacity:.6}
.shade{fill-opacity:.16}.shade-partition{fill:#b3261e}.shade-paused{fill:#6b6b2a}
.shade-off{fill:#333;fill-opacity:.25}.shade-stopped{fill:#8e6c3a;fill-opacity:.25}
.gp-kept{fill-opacity:.35}.gp-label text{font-size:10.5px;fill:#222}
.mark line{stroke-width:2;vector-effect:non-scaling-stroke}
line.exit{stroke:#555}line.fault{stroke:#b3261e}line.fault-end{stroke:#0a7c2f}
line.restart-counted{stroke:#b03a8c}line.restart-free{stroke:#b03a8c;stroke-dasharray:3 2}
line.worker-failed{stroke:#7a1f1a}line.violation{stroke:#ff2d55}
.fault-mark.focus line{stroke-width:5}
.violation-mark{cursor:pointer}.violation-mark path{fill:#ff2d55;stroke:#000;stroke-width:.5}
.violation-mark line.hit{stroke:transparent;stroke-width:10}
.violation-mark.focus line.violation{stroke-width:5}.violation-mark.focus path{fill:#000}
.note text{font-size:11px}.exit-note text{fill:#1d1d1f;font-weight:600}.kill-note text{fill:#b3261e;font-weight:600}
.flat-note text{fill:#9a5b00}.fault-note text{fill:#b3261e}
.lane-label{fill:#888;font-size:10px}
table{border-collapse:collapse;margin-top:8px}
td,th{border-bottom:1px solid #eee;padding:4px 10px;text-align:left;vertical-align:top}
.held{color:#0a7c2f}.violated{color:#b3261e;font-weight:600}.not_applicable{color:#888}
.vrow:target{background:#ffe8ec;outline:2px solid #ff2d55}
.legend span{display:inline-block;margin-right:14px}
.legend i{display:inline-block;width:12px;height:10px;margin-right:4px;vertical-align:-1px}
h2{font-size:16px;margin:16px 0 4px}
.gbar{display:flex;height:18px;border:1px solid #ddd;border-radius:4px;overflow:hidden;margin:6px 0}
.gbar i{display:block;height:100%}
";

/// The page of one run.
pub fn page(scenario: &Scenario, report: &Report, trace: &Trace, story: &Story) -> String {
    let mut html = String::new();
    let title = format!("{} — seed {}", report.scenario, report.seed);
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n",
        esc(&title)
    );
    header(&mut html, scenario, report);
    goodput_bar::section(&mut html, report);
    let stretches = goodput_strip::stretches(scenario, report, trace);
    goodput_strip::table(&mut html, &stretches);
    let timeline = timeline::build(scenario, report, trace);
    let strip = goodput_strip::strip(&stretches, timeline.end_us, draw::LABEL_W, draw::PLOT_W);
    let drawn = draw::section(&timeline, &strip);
    html.push_str("<h2>Timeline</h2>\n");
    sections::faults(&mut html, &timeline);
    sections::key(&mut html, &drawn);
    html.push_str(&drawn);
    sections::rounds_and_agents(&mut html, report);
    rendezvous_lists::section(&mut html, story);
    verdicts(&mut html, report);
    let _ = write!(
        html,
        "<script>{}</script>\n</body></html>\n",
        include_str!("html/zoom.js")
    );
    html
}

fn header(html: &mut String, scenario: &Scenario, report: &Report) {
    // The text report's verdict words, so nobody reads "passed" as "the job survived".
    let words = crate::report::verdict_block(report);
    let words = words.lines().next().unwrap_or("");
    let words = esc(words.trim_start_matches("verdict").trim());
    let verdict = if report.passed() {
        format!("<span class=\"pass\">verdict: {words}</span>")
    } else {
        format!("<span class=\"fail\">verdict: {words}</span>")
    };
    let _ = write!(
        html,
        "<h1>{}</h1>\n<div class=\"meta\"><span>{}</span><span>seed {}</span>\
         <span>job <b id=\"outcome\">{}</b>; the simulation ended at {}</span>\
         <span>{verdict}</span></div>\n\
         <div class=\"desc\">{}</div>\n<div>replay: <code id=\"repro\">{}</code></div>\n",
        esc(&report.scenario),
        esc(&report.file),
        report.seed,
        esc(&report.outcome.replace('_', " ")),
        secs(report.sim_time_us),
        esc(scenario.description.trim()),
        esc(&report.repro)
    );
    for failure in &report.expect.failures {
        let _ = writeln!(
            html,
            "<div class=\"fail\">{}</div>",
            esc(&page_text(failure))
        );
    }
}

fn verdicts(html: &mut String, report: &Report) {
    html.push_str("<h2>Invariants</h2>\n<table id=\"verdicts\"><tr><th>invariant</th><th>verdict</th><th>violations</th></tr>\n");
    let mut index = 0usize;
    for inv in &report.invariants {
        let status = inv.status.as_str();
        let _ = write!(
            html,
            "<tr class=\"invariant\" data-invariant=\"{}\" data-status=\"{status}\"><td>{}</td>\
             <td class=\"{status}\">{}</td><td>",
            esc(&inv.name),
            esc(&inv.name),
            status.replace('_', " ")
        );
        if inv.status == Status::Violated {
            for v in &inv.violations {
                let _ = write!(
                    html,
                    "<div class=\"vrow\" id=\"vr-{index}\"><a class=\"violation-link\" href=\"#v-{index}\">{}</a>: {}</div>",
                    esc(&page_text(&v.when_and_where())),
                    esc(&page_text(&v.message))
                );
                index += 1;
            }
        }
        html.push_str("</td></tr>\n");
    }
    html.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::page_text;

    #[test]
    fn page_text_writes_spans_and_keys_for_people() {
        assert_eq!(
            page_text("the all-reduce of step 113 timed out after 600000000 us"),
            "the all-reduce of step 113 timed out after 10 min"
        );
        assert_eq!(
            page_text("wait timeout after 60000ms, keys: torch.rendezvous.trainsim.2/torchelastic/assigned_ranks/10"),
            "wait timeout after 60000ms, keys: …/torchelastic/assigned_ranks/10"
        );
        assert_eq!(
            page_text("worker 0 failed (x, keys: a/0, a/1, a/2, a/3) and no restarts remain"),
            "worker 0 failed (x, keys: a/0, a/1 and 2 more) and no restarts remain"
        );
        assert_eq!(
            page_text("training stopped for good at 331.086779 s after step 113"),
            "training stopped for good at 331.087 s after step 113"
        );
    }
}
