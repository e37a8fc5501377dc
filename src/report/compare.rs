//! Comparing choices by goodput: each variant's ETTR over the same seeds, and its difference
//! from the first variant with a 95 % confidence interval. The seeds are shared, and a
//! seed draws the same failures in every variant whose failure process is the same, so the
//! difference is taken seed by seed (paired), which is far tighter than comparing means.

#[path = "html/compare_page.rs"]
pub mod page;
#[path = "html/compare_plots.rs"]
mod plots;

use super::goodput_summary::SeedRow;
use std::fmt::Write;

/// A variant's runs: its name and one row per seed, in seed order.
#[derive(Debug, Clone, PartialEq)]
pub struct VariantRuns {
    pub name: String,
    pub rows: Vec<SeedRow>,
}

impl VariantRuns {
    /// Each seed's ETTR, in seed order.
    pub fn ettrs(&self) -> Vec<f64> {
        self.rows.iter().map(|r| r.ettr).collect()
    }

    /// How many runs ended with `outcome` (`succeeded`, `failed`, `timed_out`).
    pub fn count(&self, outcome: &str) -> usize {
        self.rows.iter().filter(|r| r.outcome == outcome).count()
    }
}

/// A mean with the half-width of its 95 % confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub mean: f64,
    pub half_width_95: f64,
}

/// The normal quantile for a two-sided 95 % interval; with fewer than 30 seeds the interval
/// is an approximation (the report says how many seeds it rests on).
const Z_95: f64 = 1.959_964;

/// The mean of `xs` with its 95 % interval (normal approximation; 0 wide for one value).
pub fn estimate(xs: &[f64]) -> Estimate {
    let n = xs.len() as f64;
    if xs.is_empty() {
        return Estimate {
            mean: 0.0,
            half_width_95: 0.0,
        };
    }
    let mean = xs.iter().sum::<f64>() / n;
    let variance = match xs.len() {
        1 => 0.0,
        _ => xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0),
    };
    Estimate {
        mean,
        half_width_95: Z_95 * (variance / n).sqrt(),
    }
}

/// Each variant's ETTR against the first's, seed by seed.
pub fn paired_difference(base: &VariantRuns, other: &VariantRuns) -> Estimate {
    let diffs: Vec<f64> = other
        .rows
        .iter()
        .zip(&base.rows)
        .map(|(o, b)| o.ettr - b.ettr)
        .collect();
    estimate(&diffs)
}

/// The comparison as one JSON object: the seeds' count, each variant's mean ETTR with the
/// half-width of its 95 % interval and its outcomes, and each variant's paired difference
/// from the first.
pub fn to_json(variants: &[VariantRuns]) -> String {
    let Some(base) = variants.first() else {
        return "{}".to_owned();
    };
    let rows: Vec<serde_json::Value> = variants
        .iter()
        .map(|v| {
            let e = estimate(&v.ettrs());
            serde_json::json!({
                "name": v.name,
                "ettr_mean": e.mean,
                "ettr_ci95_half_width": e.half_width_95,
                "succeeded": v.count("succeeded"),
                "failed": v.count("failed"),
                "timed_out": v.count("timed_out"),
            })
        })
        .collect();
    let differences: Vec<serde_json::Value> = variants[1..]
        .iter()
        .map(|v| {
            let d = paired_difference(base, v);
            serde_json::json!({
                "variant": v.name,
                "base": base.name,
                "ettr_difference": d.mean,
                "ci95_low": d.mean - d.half_width_95,
                "ci95_high": d.mean + d.half_width_95,
            })
        })
        .collect();
    serde_json::json!({
        "seeds": base.rows.len(),
        "variants": rows,
        "differences": differences,
    })
    .to_string()
}

/// The comparison as text: one line per variant, then each one's difference from the first.
pub fn to_text(variants: &[VariantRuns]) -> String {
    let mut out = String::new();
    let Some(base) = variants.first() else {
        return out;
    };
    let seeds = base.rows.len();
    let width = variants
        .iter()
        .map(|v| v.name.chars().count())
        .max()
        .unwrap_or(0);
    let _ = writeln!(
        out,
        "goodput over {seeds} seeds (the same seeds for every variant)"
    );
    for v in variants {
        let e = estimate(&v.ettrs());
        let _ = writeln!(
            out,
            "  {:<width$}  ETTR {:5.1} % ± {:4.1}   {} finished, {} failed, {} timed out",
            v.name,
            e.mean * 100.0,
            e.half_width_95 * 100.0,
            v.count("succeeded"),
            v.count("failed"),
            v.count("timed_out"),
        );
    }
    for v in &variants[1..] {
        let _ = writeln!(out, "  {}", difference_line(base, v));
    }
    out
}

/// What a difference's interval says: `better`, `worse` or `no difference shown`.
pub fn verdict(d: Estimate) -> &'static str {
    if d.mean - d.half_width_95 > 0.0 {
        "better"
    } else if d.mean + d.half_width_95 < 0.0 {
        "worse"
    } else {
        "no difference shown"
    }
}

/// One variant's paired difference from the base as the text report words it.
pub fn difference_line(base: &VariantRuns, v: &VariantRuns) -> String {
    let d = paired_difference(base, v);
    let (low, high) = (d.mean - d.half_width_95, d.mean + d.half_width_95);
    format!(
        "{} vs {}: {:+.1} points of ETTR, 95 % interval [{:+.1}, {:+.1}]: {}",
        v.name,
        base.name,
        d.mean * 100.0,
        low * 100.0,
        high * 100.0,
        verdict(d)
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn runs(name: &str, ettrs: &[f64]) -> VariantRuns {
        let rows = ettrs.iter().enumerate().map(|(seed, &ettr)| SeedRow {
            seed: seed as u64,
            outcome: "succeeded".into(),
            passed: true,
            ettr,
            wall_us: 1_000_000,
            productive_us: (ettr * 1e6) as u64,
            badput_us: [("detection".to_owned(), 1_000_000 - (ettr * 1e6) as u64)].into(),
            reason: None,
        });
        VariantRuns {
            name: name.into(),
            rows: rows.collect(),
        }
    }

    #[test]
    fn an_estimate_has_the_sample_mean_and_its_interval() {
        let e = estimate(&[0.5, 0.7]);
        assert!((e.mean - 0.6).abs() < 1e-12);
        // sd 0.1414, n 2: 1.96 × 0.1414 / 1.414 = 0.196.
        assert!((e.half_width_95 - 0.196).abs() < 1e-3, "{e:?}");
        assert_eq!(estimate(&[0.3]).half_width_95, 0.0);
    }

    #[test]
    fn pairing_sees_a_steady_gain_that_means_alone_would_blur() {
        let base = runs("a", &[0.2, 0.5, 0.8, 0.4]);
        let better = runs("b", &[0.25, 0.55, 0.85, 0.45]);
        let d = paired_difference(&base, &better);
        assert!((d.mean - 0.05).abs() < 1e-12 && d.half_width_95 < 1e-9);
        let text = to_text(&[base, better]);
        assert!(text.contains("b vs a: +5.0 points of ETTR"), "{text}");
        assert!(text.contains(": better"), "{text}");
    }
}
