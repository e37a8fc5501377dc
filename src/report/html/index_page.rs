//! The index of `trainsim check --html`: a summary line, then every run, the ones that
//! were not as expected first, each with its verdict in the text report's words and why:
//! the unmet expectations, or how the job ended.

use super::{esc, page_text, STYLE};
use crate::report::{verdict_block, Report};
use std::fmt::Write;

/// One row of the index page.
pub struct IndexEntry {
    pub file: String,
    pub seed: u64,
    pub page: String,
    /// `finished`, `failed`, `timed out`.
    pub outcome: String,
    pub passed: bool,
    /// The verdict as the text report words it (`as expected (job failed, no violations)`).
    pub verdict: String,
    /// Why: each unmet expectation, else the job's fate.
    pub why: String,
    pub ettr: f64,
}

impl IndexEntry {
    /// The row of a run's page `page`.
    pub fn of(file: &str, seed: u64, page: String, report: &Report) -> IndexEntry {
        let block = verdict_block(report);
        let verdict = block.lines().next().unwrap_or("");
        let why = if report.expect.failures.is_empty() {
            report.goodput.fate.clone()
        } else {
            report.expect.failures.join("; ")
        };
        IndexEntry {
            file: file.to_owned(),
            seed,
            page,
            outcome: match report.outcome.as_str() {
                "succeeded" => "finished".to_owned(),
                other => other.replace('_', " "),
            },
            passed: report.passed(),
            verdict: verdict.trim_start_matches("verdict").trim().to_owned(),
            why: page_text(&why),
            ettr: report.goodput.ettr,
        }
    }
}

/// The index of a suite's pages.
pub fn index(entries: &[IndexEntry]) -> String {
    let unexpected = entries.iter().filter(|e| !e.passed).count();
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>trainsim check</title><style>{STYLE}</style></head><body>\n\
         <h1>trainsim check</h1>\n<p id=\"summary\" class=\"{}\">{} runs: {} as expected, {unexpected} \
         unexpected{}</p>\n<p class=\"hint\">A run is as expected when it did what its scenario's \
         [expect] says, even when that is a failed job; each name opens the run's page.</p>\n\
         <table id=\"runs\"><tr><th>scenario</th><th>seed</th><th>job</th><th>ETTR</th>\
         <th>result</th><th>why</th></tr>\n",
        if unexpected == 0 { "pass" } else { "fail" },
        entries.len(),
        entries.len() - unexpected,
        if unexpected > 0 { " (listed first)" } else { "" }
    );
    let order = entries
        .iter()
        .filter(|e| !e.passed)
        .chain(entries.iter().filter(|e| e.passed));
    for e in order {
        let (class, result) = if e.passed {
            ("pass", "pass")
        } else {
            ("fail", "FAIL")
        };
        let _ = writeln!(
            html,
            "<tr class=\"run {class}-row\"><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td>\
             <td class=\"num\">{:.1} %</td><td class=\"{class}\">{result}: {}</td><td>{}</td></tr>",
            esc(&e.page),
            esc(&e.file),
            e.seed,
            esc(&e.outcome),
            e.ettr * 100.0,
            esc(&e.verdict),
            esc(&e.why)
        );
    }
    html.push_str("</table></body></html>\n");
    html
}
