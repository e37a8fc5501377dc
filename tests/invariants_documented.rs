//! Every invariant is named wherever the docs list them, and the count the docs give is the
//! count reports print: a new invariant that misses a list fails here.

use strum::VariantArray;
use trainsim::invariant::Invariant;

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn every_invariant_is_in_every_list_of_them() {
    for doc in ["docs/scenario-format.md", "docs/invariants.md"] {
        let text = read(doc);
        for invariant in Invariant::VARIANTS {
            let name = format!("`{}`", invariant.name());
            assert!(text.contains(&name), "{doc} does not list {name}");
        }
    }
}

/// Invariants the contract (SCENARIO.md, which does not change) lists; the rest are
/// additions, appended after them.
const CONTRACT_INVARIANTS: usize = 13;

#[test]
fn the_documented_count_is_the_count_reports_print() {
    let count = Invariant::VARIANTS.len();
    let format = read("docs/scenario-format.md");
    assert!(
        format.contains(&format!("all {count} in the order every report lists them")),
        "docs/scenario-format.md gives another count than {count}"
    );
    let reports = read("docs/reports.md");
    assert!(
        reports.contains(&format!(
            "all {count} invariants (the contract's {CONTRACT_INVARIANTS}, then"
        )),
        "docs/reports.md gives another count than {count}"
    );
}
