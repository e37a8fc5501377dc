//! Goodput over many seeds of one scenario: the spread of ETTR, how often the job failed for
//! good, and why, for `trainsim run FILE --seeds A..B`; and the row of one seed that such
//! summaries (and comparisons, and shards of either) are made from.

use super::goodput::AGENT_FAILED;
use super::Report;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;

/// What one seed's run gives a summary over seeds: few enough bytes that a million seeds fit
/// in memory and in a shard's part file, and enough for every summary and the compare page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedRow {
    pub seed: u64,
    /// `succeeded`, `failed` or `timed_out`.
    pub outcome: String,
    /// Whether the run held its invariants and expectations.
    pub passed: bool,
    pub ettr: f64,
    pub wall_us: u64,
    pub productive_us: u64,
    /// Every cause of the goodput report, zero or not.
    pub badput_us: BTreeMap<String, u64>,
    /// Why a failed run stopped, with its seed-specific numbers taken out; `None` unless
    /// the run failed.
    pub reason: Option<String>,
}

impl SeedRow {
    /// The row of one run.
    pub fn of(report: &Report) -> SeedRow {
        let g = &report.goodput;
        SeedRow {
            seed: report.seed,
            outcome: report.outcome.clone(),
            passed: report.passed(),
            ettr: g.ettr,
            wall_us: g.wall_us,
            productive_us: g.productive_us,
            badput_us: g
                .badput_us
                .iter()
                .map(|(cause, us)| ((*cause).to_owned(), *us))
                .collect(),
            reason: (report.outcome == "failed").then(|| reason_of(&g.fate)),
        }
    }
}

/// How many distinct reasons the summary lists; the rest are counted together.
const REASONS_SHOWN_MAX: usize = 5;
/// A reason is cut to this many characters: the summary names it, the reports say it all.
const REASON_CHARS_MAX: usize = 110;

/// The goodput of one scenario's runs over several seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct GoodputSummary {
    pub runs: usize,
    pub ettr_mean: f64,
    /// ETTR's 5th, 50th and 95th percentiles (nearest rank).
    pub ettr_p5_p50_p95: [f64; 3],
    pub succeeded: usize,
    pub failed: usize,
    pub timed_out: usize,
    /// Why the failed runs stopped, with how many runs each, most first.
    pub reasons: Vec<(String, usize)>,
}

/// A batch's runs as they come: only what the summary needs, so a million seeds cost a few
/// megabytes.
#[derive(Debug, Default)]
pub struct GoodputTally {
    ettrs: Vec<f64>,
    outcomes: BTreeMap<String, usize>,
    reasons: BTreeMap<String, usize>,
}

impl GoodputTally {
    /// Counts one run.
    pub fn add(&mut self, row: &SeedRow) {
        self.ettrs.push(row.ettr);
        *self.outcomes.entry(row.outcome.clone()).or_default() += 1;
        if let Some(reason) = &row.reason {
            *self.reasons.entry(reason.clone()).or_default() += 1;
        }
    }

    /// The summary of the runs counted; `None` for none.
    pub fn summary(mut self) -> Option<GoodputSummary> {
        if self.ettrs.is_empty() {
            return None;
        }
        self.ettrs.sort_by(f64::total_cmp);
        let ettrs = &self.ettrs;
        let percentile = |p: f64| {
            let rank = (p * ettrs.len() as f64).ceil() as usize;
            ettrs[rank.clamp(1, ettrs.len()) - 1]
        };
        let count = |outcome: &str| self.outcomes.get(outcome).copied().unwrap_or(0);
        let mut reasons: Vec<(String, usize)> = self.reasons.clone().into_iter().collect();
        reasons.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Some(GoodputSummary {
            runs: ettrs.len(),
            ettr_mean: ettrs.iter().sum::<f64>() / ettrs.len() as f64,
            ettr_p5_p50_p95: [percentile(0.05), percentile(0.5), percentile(0.95)],
            succeeded: count("succeeded"),
            failed: count("failed"),
            timed_out: count("timed_out"),
            reasons,
        })
    }
}

/// The reason in a failed run's fate, with the numbers and node names that differ from seed
/// to seed taken out, so that runs that failed the same way count together.
fn reason_of(fate: &str) -> String {
    let reason = fate.split_once(AGENT_FAILED).map_or(fate, |(_, r)| r);
    // A number that starts a word (`60000ms`, the 3 of `node-3`) varies; digits inside a
    // word (`C10d`) are part of it.
    let mut out = String::new();
    let mut in_word = false;
    let mut in_number = false;
    for c in reason.chars() {
        if c.is_ascii_digit() && (in_number || !in_word) {
            if !in_number {
                out.push('N');
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
        in_word = c.is_ascii_alphanumeric();
    }
    if out.chars().count() > REASON_CHARS_MAX {
        out = out.chars().take(REASON_CHARS_MAX).collect::<String>() + "…";
    }
    out
}

impl GoodputSummary {
    /// The summary for people, a few lines.
    pub fn to_text(&self, scenario: &str) -> String {
        let mut out = String::new();
        let [p5, p50, p95] = self.ettr_p5_p50_p95.map(|e| e * 100.0);
        let _ = writeln!(out, "goodput over {} seeds of {scenario}", self.runs);
        let _ = writeln!(
            out,
            "  ETTR     mean {:.1} %, p5 {p5:.1} %, median {p50:.1} %, p95 {p95:.1} %",
            self.ettr_mean * 100.0
        );
        let _ = writeln!(
            out,
            "  outcome  {} finished, {} failed for good, {} cut by the time limit",
            self.succeeded, self.failed, self.timed_out
        );
        for (reason, runs) in self.reasons.iter().take(REASONS_SHOWN_MAX) {
            let _ = writeln!(out, "  {runs:>6} × {reason}");
        }
        let others: usize = self
            .reasons
            .iter()
            .skip(REASONS_SHOWN_MAX)
            .map(|r| r.1)
            .sum();
        if others > 0 {
            let _ = writeln!(out, "  {others:>6} × other reasons");
        }
        out
    }

    /// The summary as one JSON object, for CI to gate on: the same figures as the text,
    /// with every reason and its count.
    pub fn to_json(&self, scenario: &str) -> String {
        let [p5, p50, p95] = self.ettr_p5_p50_p95;
        let reasons: Vec<serde_json::Value> = self
            .reasons
            .iter()
            .map(|(reason, runs)| serde_json::json!({"reason": reason, "runs": runs}))
            .collect();
        serde_json::json!({
            "file": scenario,
            "seeds": self.runs,
            "ettr_mean": self.ettr_mean,
            "ettr_p5": p5,
            "ettr_p50": p50,
            "ettr_p95": p95,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "timed_out": self.timed_out,
            "reasons": reasons,
        })
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_specific_numbers_leave_the_reason() {
        let a = reason_of("training stopped for good at 12.5 s after step 7 of 10: node-3's agent failed: wait timeout after 60000ms, keys: a/1");
        let b = reason_of("training stopped for good at 99 s after step 8 of 10: node-12's agent failed: wait timeout after 60000ms, keys: a/2");
        assert_eq!(a, b);
        assert_eq!(a, "wait timeout after Nms, keys: a/N");
        assert_eq!(
            reason_of("x: node-1's agent failed: the C10d store"),
            "the C10d store"
        );
    }
}
