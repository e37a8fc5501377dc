//! A campaign's summary (`summary.json`): its signatures with counts, first cases, repro
//! files and triage, and its coverage table; merging the summaries of case ranges; the
//! text table printed at the end. Nothing in it depends on wall time or thread count.

use super::coverage::SITUATIONS;
use super::triage::Known;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The summary of one campaign (or of merged case ranges of one campaign).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub target: String,
    pub seed: u64,
    pub mutant: Option<String>,
    /// `report` or `skip`.
    pub known: String,
    /// Whether a corpus fed the campaign (then results depend on the corpus's contents).
    pub corpus: bool,
    /// The case indices run: `start..end`.
    pub cases_start: u64,
    pub cases_end: u64,
    /// Cases that violated an invariant that counts.
    pub failing_cases: u64,
    /// Cases drawn by mutating a corpus case.
    pub mutated_cases: u64,
    /// Failing cases whose signature is known and left out (`--known skip`).
    pub skipped_known_cases: u64,
    /// By signature key.
    pub signatures: Vec<SignatureEntry>,
    /// One entry per situation, in [`SITUATIONS`] order.
    pub coverage: Vec<CoverageEntry>,
    /// The Python whose torch every case ran on (`--torch`), as the repro files' `[torch]`
    /// tables name it; absent for the Rust model, so a model campaign's summary is as it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<String>,
    /// The torch checkout laid over that torch (`--torch-elastic-src`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch_elastic_src: Option<String>,
}

/// One signature's bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignatureEntry {
    /// `inv1:kind1+kind2,inv2:kind3 [fault@role, ...]`.
    pub signature: String,
    pub invariants: Vec<String>,
    pub faults: Vec<String>,
    pub count: u64,
    pub first_case: u64,
    /// The repro file, relative to the summary's directory.
    pub repro: Option<String>,
    /// `new` or `known`.
    pub status: String,
    pub known: Option<Known>,
    /// The kinds of violation, as `invariant:kind`, sorted. A summary that does not list
    /// them reads as listing none.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// The first cause in time of the first case (with only the faults it needs): the counted
    /// violation whose failure began first, and what the agent that failed first waited for
    /// ([`super::first_cause::first_cause`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_cause: Option<String>,
}

impl SignatureEntry {
    /// `new`, or the triage label.
    pub fn status_label(&self) -> String {
        match &self.known {
            Some(k) => k.label(),
            None => "new".to_owned(),
        }
    }
}

/// How many cases reached one situation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoverageEntry {
    pub situation: String,
    pub cases: u64,
}

impl Summary {
    /// Cases run.
    pub fn cases(&self) -> u64 {
        self.cases_end - self.cases_start
    }

    /// Signatures not known: any makes the exit code 1.
    pub fn new_signatures(&self) -> usize {
        self.signatures.iter().filter(|s| s.known.is_none()).count()
    }

    /// Situations at least one case reached.
    pub fn situations_reached(&self) -> usize {
        self.coverage.iter().filter(|c| c.cases > 0).count()
    }
}

/// Empty coverage counts, in [`SITUATIONS`] order.
pub fn empty_coverage() -> Vec<CoverageEntry> {
    SITUATIONS
        .iter()
        .map(|(name, _)| CoverageEntry {
            situation: (*name).to_owned(),
            cases: 0,
        })
        .collect()
}

/// Merges the summaries of case ranges of one campaign; they must share target, seed,
/// mutant, `--known` and torch, and their ranges must tile one range without overlap. Each
/// summary comes with the directory its repro paths are relative to; merged repro paths
/// keep the directory of the range holding the first case.
pub fn merge(parts: &[(String, Summary)]) -> Result<Summary, String> {
    let mut parts: Vec<&(String, Summary)> = parts.iter().collect();
    parts.sort_by_key(|(_, s)| s.cases_start);
    let (_, first) = parts.first().ok_or("nothing to merge")?;
    let mut out = first.clone();
    out.signatures.clear();
    out.coverage = empty_coverage();
    out.failing_cases = 0;
    out.mutated_cases = 0;
    out.skipped_known_cases = 0;
    let mut buckets: BTreeMap<String, SignatureEntry> = BTreeMap::new();
    for (i, (dir, s)) in parts.iter().enumerate() {
        let same = (&s.target, s.seed, &s.mutant, &s.known)
            == (&first.target, first.seed, &first.mutant, &first.known)
            && (&s.torch, &s.torch_elastic_src) == (&first.torch, &first.torch_elastic_src);
        if !same {
            return Err(format!(
                "{dir}: a different campaign (target, seed, mutant, --known, --torch and \
                 --torch-elastic-src must match)"
            ));
        }
        if i > 0 && s.cases_start != out.cases_end {
            return Err(format!(
                "{dir}: cases {}..{} do not continue {}..{} (ranges must tile without gaps or overlap)",
                s.cases_start, s.cases_end, out.cases_start, out.cases_end
            ));
        }
        out.cases_end = s.cases_end;
        out.corpus |= s.corpus;
        out.failing_cases += s.failing_cases;
        out.mutated_cases += s.mutated_cases;
        out.skipped_known_cases += s.skipped_known_cases;
        for (acc, c) in out.coverage.iter_mut().zip(&s.coverage) {
            acc.cases += c.cases;
        }
        for e in &s.signatures {
            let mut e = e.clone();
            e.repro = e.repro.map(|r| join(dir, &r));
            match buckets.get_mut(&e.signature) {
                Some(b) => b.count += e.count,
                None => {
                    buckets.insert(e.signature.clone(), e);
                }
            }
        }
    }
    out.signatures = buckets.into_values().collect();
    Ok(out)
}

fn join(dir: &str, rel: &str) -> String {
    std::path::Path::new(dir)
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

/// The end-of-campaign table: the root causes, every signature, then the coverage table.
pub fn render(s: &Summary, repro_dir: &str) -> String {
    let mut out = super::root_causes::render_root_causes(s);
    let _ = writeln!(
        out,
        "signatures ({}, {} new):",
        s.signatures.len(),
        s.new_signatures()
    );
    for e in &s.signatures {
        let _ = writeln!(
            out,
            "  {:>6}x  first case {:<6}  {}\n           {}",
            e.count,
            e.first_case,
            e.signature,
            e.status_label()
        );
        if let Some(cause) = &e.first_cause {
            let _ = writeln!(out, "           first cause {cause}");
        }
        if let Some(r) = &e.repro {
            let _ = writeln!(out, "           repro: {}", join(repro_dir, r));
        }
    }
    if s.skipped_known_cases > 0 {
        let _ = writeln!(
            out,
            "  ({} failing cases of known signatures left out)",
            s.skipped_known_cases
        );
    }
    let _ = writeln!(
        out,
        "coverage ({} of {} situations reached; reached / cases):",
        s.situations_reached(),
        s.coverage.len()
    );
    for c in &s.coverage {
        let _ = writeln!(out, "  {:<28} {:>7} / {}", c.situation, c.cases, s.cases());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(start: u64, end: u64, sig: &str, count: u64, first: u64) -> Summary {
        let mut coverage = empty_coverage();
        coverage[0].cases = count;
        Summary {
            target: "rendezvous".into(),
            seed: 1,
            mutant: None,
            known: "report".into(),
            corpus: false,
            cases_start: start,
            cases_end: end,
            failing_cases: count,
            mutated_cases: 0,
            skipped_known_cases: 0,
            signatures: vec![SignatureEntry {
                signature: sig.into(),
                invariants: vec![],
                faults: vec![],
                count,
                first_case: first,
                repro: Some(format!("repro/c{first}.toml")),
                status: "new".into(),
                known: None,
                kinds: vec![],
                first_cause: None,
            }],
            coverage,
            torch: None,
            torch_elastic_src: None,
        }
    }

    #[test]
    fn merging_sums_counts_and_keeps_the_earliest_first_case() {
        let a = part(0, 10, "x", 2, 3);
        let b = part(10, 20, "x", 5, 12);
        let m = merge(&[("b".into(), b), ("a".into(), a)]).expect("tiles");
        assert_eq!((m.cases_start, m.cases_end), (0, 20));
        assert_eq!(m.signatures.len(), 1);
        assert_eq!(m.signatures[0].count, 7);
        assert_eq!(m.signatures[0].first_case, 3);
        assert_eq!(m.signatures[0].repro.as_deref(), Some("a/repro/c3.toml"));
        assert_eq!(m.coverage[0].cases, 7);
    }

    #[test]
    fn gaps_overlaps_and_other_campaigns_are_refused() {
        assert!(merge(&[
            ("a".into(), part(0, 10, "x", 1, 0)),
            ("b".into(), part(11, 20, "x", 1, 11))
        ])
        .is_err());
        assert!(merge(&[
            ("a".into(), part(0, 10, "x", 1, 0)),
            ("b".into(), part(5, 20, "x", 1, 11))
        ])
        .is_err());
        let mut other = part(10, 20, "x", 1, 11);
        other.seed = 2;
        assert!(merge(&[("a".into(), part(0, 10, "x", 1, 0)), ("b".into(), other)]).is_err());
        // A range run on torch's own code and one run on the model are two campaigns.
        let mut on_torch = part(10, 20, "x", 1, 11);
        on_torch.torch = Some("/venv/bin/python".into());
        let parts = [("a".into(), part(0, 10, "x", 1, 0)), ("b".into(), on_torch)];
        assert!(merge(&parts).is_err());
    }
}
