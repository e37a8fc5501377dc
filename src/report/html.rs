//! The picture of one run: a self-contained HTML page (inline SVG, CSS and script; nothing
//! loaded from elsewhere) with the job's goodput, a timeline per node that zooms on its time
//! axis, and the invariant verdicts, each violation linked both ways with its moment on the
//! timeline. A pure function of the scenario, the report and the trace, so the same seed
//! writes the same bytes.

mod draw;
mod fault_shades;
pub(crate) mod goodput_bar;
mod stretches;
mod timeline;

use super::Report;
use crate::check::Status;
use crate::scenario::model::Scenario;
use crate::trace::Trace;
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

/// Seconds with up to three decimals, as the text report writes times.
pub(crate) fn secs(us: u64) -> String {
    crate::check::secs(us)
}

const STYLE: &str = "
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d1d1f;max-width:1400px}
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
.agent{fill:#d9e7f7}.state-HEALTHY{fill:#9cc5ec}.state-INIT{fill:#e3e3e8}
.state-STOPPED{fill:#f3d9a4}.state-FAILED{fill:#f1a7a0}.state-SUCCEEDED{fill:#a6dcb3}
.state-UNHEALTHY{fill:#f1a7a0}
.round{fill:#7e6bc4}.joining{fill:#cbc3ea}.rdzv-failed{fill:#e07a70}
.workers{fill:#e6f2ea}.store{fill:#c9a227}
.steps{fill:none;stroke:#2e7d4f;stroke-width:1.6}
.flat{fill:#f5a623;fill-opacity:.45}
.shade{fill-opacity:.16}.shade-partition{fill:#b3261e}.shade-paused{fill:#7e6bc4}
.shade-off{fill:#333;fill-opacity:.22}.shade-stopped{fill:#e08a00}
.mark line{stroke-width:2;vector-effect:non-scaling-stroke}
line.exit{stroke:#555}line.fault{stroke:#b3261e}line.fault-end{stroke:#0a7c2f}
line.restart{stroke:#e08a00}line.worker-failed{stroke:#7a1f1a}line.violation{stroke:#ff2d55}
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
pub fn page(scenario: &Scenario, report: &Report, trace: &Trace) -> String {
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
    legend(&mut html);
    html.push_str(&draw::section(&timeline::build(scenario, report, trace)));
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
        esc(&report.outcome),
        secs(report.sim_time_us),
        esc(scenario.description.trim()),
        esc(&report.repro)
    );
    for failure in &report.expect.failures {
        let _ = writeln!(html, "<div class=\"fail\">{}</div>", esc(failure));
    }
}

fn legend(html: &mut String) {
    html.push_str("<div class=\"legend\">");
    for (style, label) in [
        ("background:#9cc5ec", "agent: workers healthy"),
        ("background:#f3d9a4", "stopped"),
        ("background:#f1a7a0", "failed"),
        ("background:#a6dcb3", "succeeded"),
        ("background:#cbc3ea", "joining"),
        ("background:#7e6bc4", "round completed"),
        (
            "background:#e6f2ea;border-bottom:2px solid #2e7d4f",
            "workers running, steps done",
        ),
        ("background:#f5a623;opacity:.6", "no step (flat stretch)"),
        ("background:#b3261e;opacity:.3", "partitioned"),
        ("background:#7e6bc4;opacity:.3", "paused"),
        ("background:#333;opacity:.3", "powered off"),
        ("background:#e08a00;opacity:.3", "SIGTERM"),
        ("background:#b3261e;width:3px", "fault"),
        ("background:#e08a00;width:3px", "restart"),
        ("background:#7a1f1a;width:3px", "worker failed"),
        ("background:#ff2d55;width:3px", "violation"),
        ("background:#c9a227", "store server"),
    ] {
        let _ = write!(html, "<span><i style=\"{style}\"></i>{label}</span>");
    }
    html.push_str("</div>\n");
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
                    esc(&v.when_and_where()),
                    esc(&v.message)
                );
                index += 1;
            }
        }
        html.push_str("</td></tr>\n");
    }
    html.push_str("</table>\n");
}

/// One row of the index page.
pub struct IndexEntry {
    pub file: String,
    pub seed: u64,
    pub page: String,
    pub outcome: String,
    pub passed: bool,
}

/// The index of a suite's pages.
pub fn index(entries: &[IndexEntry]) -> String {
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>trainsim check</title><style>{STYLE}</style></head><body>\n\
         <h1>trainsim check</h1>\n<table id=\"runs\"><tr><th>scenario</th><th>seed</th>\
         <th>outcome</th><th>result</th></tr>\n"
    );
    for e in entries {
        let (class, result) = if e.passed {
            ("pass", "pass")
        } else {
            ("fail", "FAIL")
        };
        let _ = writeln!(
            html,
            "<tr><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td><td class=\"{class}\">{result}</td></tr>",
            esc(&e.page),
            esc(&e.file),
            e.seed,
            esc(&e.outcome)
        );
    }
    html.push_str("</table></body></html>\n");
    html
}
