//! `trainsim fuzz diff A B`: two campaigns compared root cause by root cause, exit 0 when
//! they agree, 1 when they differ, 2 when they cannot be compared; and the root causes a
//! campaign's summary.json and text lead with.

use std::path::{Path, PathBuf};
mod common;
use common::{text, trainsim};

fn campaign(name: &str, extra: &[&str]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz_diff-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    let mut args = vec!["fuzz", "--out", dir.to_str().expect("utf-8 path")];
    args.extend_from_slice(extra);
    let out = trainsim(&args);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        text(&out.stderr)
    );
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("root causes ("), "{stdout}");
    dir
}

fn diff(a: &Path, b: &Path) -> (Option<i32>, String) {
    let out = trainsim(&["fuzz", "diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    (out.status.code(), text(&out.stdout) + &text(&out.stderr))
}

#[test]
fn a_planted_bug_shows_as_causes_that_appear_and_a_campaign_equals_itself() {
    let rendezvous = ["--target", "rendezvous", "--cases", "300", "--seed", "1"];
    let stock = campaign("stock", &rendezvous);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(stock.join("summary.json")).unwrap())
            .unwrap();
    let causes = summary["root_causes"]
        .as_array()
        .expect("root_causes listed");
    let cases: u64 = causes.iter().map(|c| c["cases"].as_u64().unwrap()).sum();
    assert_eq!(cases, summary["failing_cases"].as_u64().unwrap());
    assert!(causes
        .iter()
        .any(|c| c["cause"] == "fix world-at-completion"));

    let (code, out) = diff(&stock, &stock);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("fuzz diff: the same root causes"), "{out}");

    let mut planted = rendezvous.to_vec();
    planted.extend(["--mutant", "rank-collision"]);
    let planted = campaign("planted", &planted);
    let (code, out) = diff(&stock, &planted);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("note: the campaigns ran different cases"),
        "{out}"
    );
    assert!(
        out.contains("+ rendezvous.agreement:rank-given-twice"),
        "the planted bug's signature appears:\n{out}"
    );
}

#[test]
fn campaigns_of_different_targets_or_a_missing_summary_are_refused() {
    let rendezvous = campaign("target-a", &["--target", "rendezvous", "--cases", "20"]);
    let job = campaign("target-b", &["--target", "job", "--cases", "20"]);
    let (code, out) = diff(&rendezvous, &job);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("do not compare"), "{out}");
    let (code, out) = diff(&rendezvous, Path::new("/nonexistent/campaign"));
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("/nonexistent/campaign/summary.json"), "{out}");
}
