//! Root causes: a campaign's signatures grouped under the fix that removes them (or `new`),
//! and `trainsim fuzz diff`, which compares two campaigns group by group (a stock torch
//! against a patched one, the model against torch's own code, one release against another).

use super::summary::{SignatureEntry, Summary};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What the group of a finding nobody's fix removes is called, before the invariants it
/// breaks (`new: job.resumes_after_heal`).
pub const NEW: &str = "new";

/// One root cause of a campaign: the signatures one fix removes, or the new ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RootCause {
    /// `fix <name>` (`fixes <a> + <b>` when it takes two), or `new: <invariants>`: new findings
    /// are grouped by the invariants they break, so what no fix explains still falls into
    /// a few groups, each confirmed on its own.
    pub cause: String,
    /// The torch behaviour or issue the fix names; none for `new`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue: Option<String>,
    pub signatures: u64,
    pub cases: u64,
}

fn cause_of(entry: &SignatureEntry) -> (String, Option<String>) {
    match &entry.known {
        Some(k) if k.fix.contains(" + ") => (format!("fixes {}", k.fix), Some(k.issue.clone())),
        Some(k) => (format!("fix {}", k.fix), Some(k.issue.clone())),
        None => {
            let mut invariants = entry.invariants.clone();
            invariants.sort();
            invariants.dedup();
            (format!("{NEW}: {}", invariants.join(", ")), None)
        }
    }
}

/// The campaign's root causes, the most failing cases first (then by name).
pub fn root_causes(summary: &Summary) -> Vec<RootCause> {
    let mut by_cause: BTreeMap<String, RootCause> = BTreeMap::new();
    for entry in &summary.signatures {
        let (cause, issue) = cause_of(entry);
        let group = by_cause.entry(cause.clone()).or_insert(RootCause {
            cause,
            issue,
            signatures: 0,
            cases: 0,
        });
        group.signatures += 1;
        group.cases += entry.count;
    }
    let mut groups: Vec<RootCause> = by_cause.into_values().collect();
    groups.sort_by(|a, b| b.cases.cmp(&a.cases).then_with(|| a.cause.cmp(&b.cause)));
    groups
}

/// The signatures [`root_causes`] groups under `cause`, in the summary's order.
pub fn signatures_of<'a>(summary: &'a Summary, cause: &str) -> Vec<&'a SignatureEntry> {
    summary
        .signatures
        .iter()
        .filter(|e| cause_of(e).0 == cause)
        .collect()
}

/// A root cause's representative: its signature with the most cases (the earliest first
/// case among equals) that has a repro file.
pub fn representative<'a>(summary: &'a Summary, cause: &str) -> Option<&'a SignatureEntry> {
    signatures_of(summary, cause)
        .into_iter()
        .filter(|e| e.repro.is_some())
        .min_by_key(|e| (std::cmp::Reverse(e.count), e.first_case))
}

impl RootCause {
    /// Whether no known fix removes the cause's findings.
    pub fn is_new(&self) -> bool {
        self.issue.is_none()
    }
}

/// The root causes as the campaign's text shows them first.
pub fn render_root_causes(summary: &Summary) -> String {
    let groups = root_causes(summary);
    let mut out = String::new();
    let _ = writeln!(out, "root causes ({}):", groups.len());
    for g in &groups {
        let issue = g
            .issue
            .as_deref()
            .map(|i| format!("  ({i})"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:>6} {:<6} {:>4} {:<11} {}{issue}",
            g.cases,
            plural(g.cases, "case", "cases"),
            g.signatures,
            plural(g.signatures, "signature", "signatures"),
            g.cause
        );
    }
    out
}

fn plural(n: u64, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// How one root cause fares from campaign A to campaign B.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDiff {
    pub cause: String,
    pub cases: (u64, u64),
    /// Signatures only A shows, and only B shows.
    pub gone: Vec<String>,
    pub appeared: Vec<String>,
}

impl GroupDiff {
    fn status(&self) -> &'static str {
        match self.cases {
            (0, _) => "appeared",
            (_, 0) => "disappeared",
            (a, b) if a != b || !self.gone.is_empty() || !self.appeared.is_empty() => "changed",
            _ => "same",
        }
    }
}

/// Campaign A against campaign B, root cause by root cause.
pub fn diff(a: &Summary, b: &Summary) -> Vec<GroupDiff> {
    let signatures_by_cause = |s: &Summary| {
        let mut by: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for e in &s.signatures {
            by.entry(cause_of(e).0)
                .or_default()
                .insert(e.signature.clone(), e.count);
        }
        by
    };
    let (of_a, of_b) = (signatures_by_cause(a), signatures_by_cause(b));
    let empty = BTreeMap::new();
    let causes: std::collections::BTreeSet<&String> = of_a.keys().chain(of_b.keys()).collect();
    causes
        .into_iter()
        .map(|cause| {
            let (sa, sb) = (
                of_a.get(cause).unwrap_or(&empty),
                of_b.get(cause).unwrap_or(&empty),
            );
            let only = |x: &BTreeMap<String, u64>, y: &BTreeMap<String, u64>| {
                x.keys().filter(|k| !y.contains_key(*k)).cloned().collect()
            };
            GroupDiff {
                cause: cause.clone(),
                cases: (sa.values().sum(), sb.values().sum()),
                gone: only(sa, sb),
                appeared: only(sb, sa),
            }
        })
        .collect()
}

/// Whether two campaigns ran the same cases, so their counts compare case by case.
pub fn same_cases(a: &Summary, b: &Summary) -> bool {
    (a.seed, a.cases_start, a.cases_end, &a.mutant)
        == (b.seed, b.cases_start, b.cases_end, &b.mutant)
}

/// The diff as text: the groups that changed first, then a line for those that did not.
pub fn render_diff(groups: &[GroupDiff]) -> String {
    let mut out = String::new();
    let mut unchanged = Vec::new();
    for g in groups {
        if g.status() == "same" {
            unchanged.push(g.cause.as_str());
            continue;
        }
        let _ = writeln!(
            out,
            "  {:<12} {}: {} → {} cases",
            g.status(),
            g.cause,
            g.cases.0,
            g.cases.1
        );
        for s in &g.gone {
            let _ = writeln!(out, "      - {s}");
        }
        for s in &g.appeared {
            let _ = writeln!(out, "      + {s}");
        }
    }
    if !unchanged.is_empty() {
        let _ = writeln!(out, "  same         {}", unchanged.join(", "));
    }
    out
}

/// Whether campaign B differs from A in any root cause.
pub fn differs(groups: &[GroupDiff]) -> bool {
    groups.iter().any(|g| g.status() != "same")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzz::triage::Known;

    fn entry(signature: &str, count: u64, fix: Option<&str>) -> SignatureEntry {
        SignatureEntry {
            signature: signature.to_owned(),
            invariants: vec!["rendezvous.liveness".to_owned()],
            faults: vec![],
            count,
            first_case: 0,
            repro: None,
            status: if fix.is_some() { "known" } else { "new" }.to_owned(),
            known: fix.map(|f| Known {
                fix: f.to_owned(),
                issue: format!("issue of {f}"),
                restores_the_job: true,
            }),
            kinds: vec![],
            first_cause: None,
        }
    }

    fn campaign(signatures: Vec<SignatureEntry>) -> Summary {
        Summary {
            target: "rendezvous".to_owned(),
            seed: 1,
            mutant: None,
            known: "report".to_owned(),
            corpus: false,
            cases_start: 0,
            cases_end: 300,
            failing_cases: signatures.iter().map(|e| e.count).sum(),
            mutated_cases: 0,
            skipped_known_cases: 0,
            signatures,
            coverage: vec![],
            torch: None,
            torch_elastic_src: None,
        }
    }

    #[test]
    fn signatures_group_under_their_fix_most_cases_first() {
        let s = campaign(vec![
            entry("a", 1, Some("world-at-completion")),
            entry("b", 2, None),
            entry("c", 3, Some("world-at-completion")),
            entry("d", 1, Some("monotonic-heartbeats")),
        ]);
        let groups = root_causes(&s);
        let rows: Vec<(&str, u64, u64)> = groups
            .iter()
            .map(|g| (g.cause.as_str(), g.signatures, g.cases))
            .collect();
        assert_eq!(
            rows,
            vec![
                ("fix world-at-completion", 2, 4),
                ("new: rendezvous.liveness", 1, 2),
                ("fix monotonic-heartbeats", 1, 1)
            ]
        );
    }

    #[test]
    fn new_findings_group_by_the_invariants_they_break() {
        let mut stall = entry("s", 3, None);
        stall.invariants = vec!["job.resumes_after_heal".to_owned()];
        let mut both = entry("t", 1, None);
        both.invariants = vec![
            "rendezvous.liveness".to_owned(),
            "job.resumes_after_heal".to_owned(),
        ];
        let s = campaign(vec![stall, both, entry("u", 2, None)]);
        let causes: Vec<(String, u64)> = root_causes(&s)
            .into_iter()
            .map(|g| (g.cause, g.cases))
            .collect();
        assert_eq!(
            causes,
            vec![
                ("new: job.resumes_after_heal".to_owned(), 3),
                ("new: rendezvous.liveness".to_owned(), 2),
                (
                    "new: job.resumes_after_heal, rendezvous.liveness".to_owned(),
                    1
                ),
            ]
        );
    }

    #[test]
    fn a_patch_that_removes_a_cause_and_adds_one_shows_both() {
        let stock = campaign(vec![
            entry("a", 2, Some("dead-participant-rejoin")),
            entry("b", 1, Some("world-at-completion")),
        ]);
        let patched = campaign(vec![
            entry("b", 1, Some("world-at-completion")),
            entry("z", 4, None),
        ]);
        let groups = diff(&stock, &patched);
        let text = render_diff(&groups);
        assert!(differs(&groups));
        assert!(
            text.contains("disappeared  fix dead-participant-rejoin: 2 → 0 cases\n      - a\n"),
            "{text}"
        );
        assert!(
            text.contains("appeared     new: rendezvous.liveness: 0 → 4 cases\n      + z\n"),
            "{text}"
        );
        assert!(
            text.contains("same         fix world-at-completion"),
            "{text}"
        );
        assert!(!differs(&diff(&stock, &stock)));
    }
}
