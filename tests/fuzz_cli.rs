//! `trainsim fuzz` end to end: canaries (planted bugs) are found and their minimal repros
//! replay with exit 1; every canary's signature is one its target's plain campaign never
//! shows; the summary is the same for any `--jobs`; merged case ranges equal one campaign;
//! `--as-known-bug` repros pass; bad arguments exit 2.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Output;
mod common;
use common::{text, trainsim};

/// A fresh scratch directory for one test, under the target directory.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz_cli-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn summary(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("summary.json")).expect("summary.json written");
    serde_json::from_str(&text).expect("summary.json is JSON")
}

/// Runs a campaign into `dir`; returns its output.
fn campaign(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["fuzz", "--out", dir.to_str().expect("utf-8 path")];
    args.extend_from_slice(extra);
    trainsim(&args)
}

/// A canary campaign: exit 1, a new signature naming `invariant`, whose repro replays with
/// exit 1 and names the violation. Returns the repro's text.
fn finds_canary(target: &str, mutant: &str, cases: &str, invariant: &str) -> String {
    let dir = scratch(mutant);
    let out = campaign(
        &dir,
        &[
            "--target", target, "--cases", cases, "--seed", "1", "--mutant", mutant,
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let s = summary(&dir);
    let entry = s["signatures"]
        .as_array()
        .expect("signatures")
        .iter()
        .find(|e| e["status"] == "new" && e["signature"].as_str().unwrap_or("").contains(invariant))
        .unwrap_or_else(|| panic!("no new {invariant} signature:\n{stdout}"));
    let repro = dir.join(entry["repro"].as_str().expect("a repro file"));
    let contents = std::fs::read_to_string(&repro).expect("the repro was written");
    assert!(
        contents.starts_with("# Found by: trainsim fuzz"),
        "{contents}"
    );
    assert!(
        contents.contains(&format!("--mutant {mutant}")),
        "{contents}"
    );
    let replay = trainsim(&["run", repro.to_str().expect("utf-8"), "--mutant", mutant]);
    let report = text(&replay.stdout);
    assert_eq!(replay.status.code(), Some(1), "{report}");
    assert!(report.contains(invariant), "{report}");
    contents
}

#[test]
fn finds_the_rank_collision_canary_and_its_repro_replays_with_exit_1() {
    let contents = finds_canary("rendezvous", "rank-collision", "40", "rendezvous.agreement");
    // Minimal: defaults are left out.
    assert!(!contents.contains("keep_alive_interval"), "{contents}");
}

#[test]
fn finds_the_sampler_canary() {
    finds_canary("job", "sampler-off-by-one", "20", "sampler.coverage");
}

#[test]
fn finds_the_late_joiner_canary() {
    finds_canary(
        "rendezvous",
        "late-joiner-joins-complete-round",
        "5",
        "rendezvous.",
    );
}

#[test]
fn finds_the_no_heartbeat_expiry_canary() {
    // NCCL reports a killed participant's closed connections, so few cases leave survivors
    // waiting for its heartbeat to expire: the planted bug first shows at case 154, where a
    // partition and a restart end with healthy nodes refused by a closed rendezvous.
    finds_canary(
        "rendezvous",
        "no-heartbeat-expiry",
        "200",
        "rendezvous.liveness",
    );
}

#[test]
fn finds_the_reader_canary() {
    finds_canary(
        "reader",
        "reader-double-publish",
        "5",
        "reader.exactly_once",
    );
}

/// Every mutant, with its target and the invariant its planted bug breaks.
const CANARIES: &[(&str, &str, &str)] = &[
    (
        "rendezvous",
        "late-joiner-joins-complete-round",
        "rendezvous.",
    ),
    ("rendezvous", "rank-collision", "rendezvous.agreement"),
    ("rendezvous", "no-heartbeat-expiry", "rendezvous.liveness"),
    ("job", "sampler-off-by-one", "sampler.coverage"),
    ("reader", "reader-double-publish", "reader.exactly_once"),
];

/// Cases each campaign of [`every_canary_is_new_against_its_targets_plain_campaign`] runs.
const CANARY_CASES: &str = "300";

/// The signature keys of a campaign's summary, with each one's first case.
fn signatures(s: &serde_json::Value) -> BTreeMap<String, u64> {
    s["signatures"]
        .as_array()
        .expect("signatures")
        .iter()
        .map(|e| {
            let key = e["signature"].as_str().expect("a key").to_owned();
            (key, e["first_case"].as_u64().expect("a first case"))
        })
        .collect()
}

/// A canary is hidden when its findings land in a signature torch's own behaviour already
/// fills (HugeCTR's dropped last batch is a `reader.exactly_once` violation too): each
/// mutant's campaign must show a signature naming its invariant that the same cases without
/// the mutant never show.
#[test]
fn every_canary_is_new_against_its_targets_plain_campaign() {
    let listed: BTreeSet<&str> = CANARIES.iter().map(|(_, m, _)| *m).collect();
    let known: BTreeSet<&str> = trainsim::fuzz::mutants::known().into_iter().collect();
    assert_eq!(listed, known, "every mutant has a canary here");
    let mut plain: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (target, _, _) in CANARIES {
        if plain.contains_key(target) {
            continue;
        }
        let dir = scratch(&format!("plain-{target}"));
        let args = ["--target", target, "--cases", CANARY_CASES, "--seed", "1"];
        let out = campaign(&dir, &args);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{}",
            text(&out.stderr)
        );
        plain.insert(target, signatures(&summary(&dir)).into_keys().collect());
    }
    let mut found = Vec::new();
    for (target, mutant, invariant) in CANARIES {
        let dir = scratch(&format!("canary-{mutant}"));
        let args = [
            "--target",
            target,
            "--cases",
            CANARY_CASES,
            "--seed",
            "1",
            "--mutant",
            mutant,
        ];
        let out = campaign(&dir, &args);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
        let all = signatures(&summary(&dir));
        let new = all
            .iter()
            .filter(|(key, _)| key.contains(invariant) && !plain[target].contains(*key))
            .min_by_key(|(_, first)| **first);
        let Some((key, first)) = new else {
            panic!(
                "{mutant}'s canary hides among {target}'s plain signatures:\n{all:#?}\n{:#?}",
                plain[target]
            );
        };
        found.push(format!("{mutant}: case {first}, {key}"));
    }
    // For the record (`--nocapture`): where each canary first shows.
    eprintln!("{}", found.join("\n"));
}

#[test]
fn the_summary_is_the_same_for_one_and_two_jobs() {
    let one = scratch("jobs1");
    let two = scratch("jobs2");
    let args = ["--target", "rendezvous", "--cases", "30", "--seed", "3"];
    let a = campaign(&one, &[&args[..], &["--jobs", "1"]].concat());
    let b = campaign(&two, &[&args[..], &["--jobs", "2"]].concat());
    assert_eq!(a.status.code(), b.status.code());
    assert_eq!(summary(&one), summary(&two));
}

#[test]
fn a_corpus_campaign_is_the_same_for_one_and_two_jobs() {
    let (one, two) = (scratch("corpus-jobs1"), scratch("corpus-jobs2"));
    let run = |dir: &Path, jobs: &str| {
        let corpus = dir.join("corpus");
        let corpus = corpus.to_str().expect("utf-8");
        campaign(
            dir,
            &[
                "--target",
                "rendezvous",
                "--cases",
                "150",
                "--seed",
                "4",
                "--jobs",
                jobs,
                "--corpus",
                corpus,
            ],
        )
    };
    run(&one, "1");
    run(&two, "2");
    let (a, b) = (summary(&one), summary(&two));
    assert!(a["mutated_cases"].as_u64().expect("a count") > 0, "{a}");
    assert_eq!(a, b);
    let names = |d: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(d.join("corpus"))
            .expect("corpus written")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&one), names(&two));
}

#[test]
fn merged_case_ranges_equal_one_campaign_and_stand_alone() {
    let whole = scratch("whole");
    let (a, b, merged) = (scratch("part-a"), scratch("part-b"), scratch("merged"));
    let common = ["--target", "rendezvous", "--seed", "2", "--jobs", "2"];
    campaign(&whole, &[&common[..], &["--cases", "24"]].concat());
    campaign(&a, &[&common[..], &["--cases", "0..10"]].concat());
    campaign(&b, &[&common[..], &["--cases", "10..=23"]].concat());
    let out = trainsim(&[
        "fuzz",
        "merge",
        a.to_str().expect("utf-8"),
        b.to_str().expect("utf-8"),
        "--out",
        merged.to_str().expect("utf-8"),
    ]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        text(&out.stderr)
    );
    // Repro paths included: the merged summary names its own copies, as one campaign does.
    let s = summary(&merged);
    assert_eq!(s, summary(&whole));
    // The part directories are CI artefacts that may be gone by the time anyone replays.
    std::fs::remove_dir_all(&a).expect("part a removed");
    std::fs::remove_dir_all(&b).expect("part b removed");
    let repros: Vec<&str> = s["signatures"]
        .as_array()
        .expect("signatures")
        .iter()
        .filter_map(|e| e["repro"].as_str())
        .collect();
    assert!(
        !repros.is_empty(),
        "seed 2's first 24 cases find something: {s}"
    );
    for rel in repros {
        let path = merged.join(rel);
        let contents = std::fs::read_to_string(&path).expect("the repro was copied");
        let replay = format!("# Replay: trainsim run {}", path.display());
        assert!(contents.contains(&replay), "{contents}");
        let run = trainsim(&["run", path.to_str().expect("utf-8")]);
        assert_eq!(run.status.code(), Some(1), "{}", text(&run.stdout));
    }
}

#[test]
fn as_known_bug_repros_pass_on_replay() {
    let dir = scratch("known-bug");
    let out = campaign(
        &dir,
        &[
            "--target",
            "rendezvous",
            "--cases",
            "10",
            "--seed",
            "1",
            "--mutant",
            "rank-collision",
            "--as-known-bug",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let s = summary(&dir);
    let repro = s["signatures"][0]["repro"].as_str().expect("a repro");
    let path = dir.join(repro);
    let contents = std::fs::read_to_string(&path).expect("written");
    assert!(contents.contains("violations"), "{contents}");
    let replay = trainsim(&[
        "run",
        path.to_str().expect("utf-8"),
        "--mutant",
        "rank-collision",
    ]);
    assert_eq!(replay.status.code(), Some(0), "{}", text(&replay.stdout));
}

#[test]
fn bad_arguments_exit_2_with_a_message() {
    let dir = scratch("bad-args");
    let d = dir.to_str().expect("utf-8 path");
    let cases = |c: &str| trainsim(&["fuzz", "--target", "rendezvous", "--cases", c, "--out", d]);
    for bad in ["0", "5..5", "9..3", "x"] {
        let out = cases(bad);
        assert_eq!(out.status.code(), Some(2), "--cases {bad}");
        assert!(
            text(&out.stderr).contains("--cases"),
            "{}",
            text(&out.stderr)
        );
    }
    let mutant = trainsim(&[
        "fuzz",
        "--target",
        "rendezvous",
        "--cases",
        "5",
        "--mutant",
        "no-such-bug",
        "--out",
        d,
    ]);
    assert_eq!(mutant.status.code(), Some(2));
    assert!(text(&mutant.stderr).contains("is not a mutant"));
    assert_eq!(
        trainsim(&["fuzz", "--target", "sampler", "--out", d])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        trainsim(&["fuzz", "--cases", "5", "--out", d])
            .status
            .code(),
        Some(2)
    );
    let merge = trainsim(&["fuzz", "merge", "/nonexistent/trainsim-fuzz"]);
    assert_eq!(merge.status.code(), Some(2));
    assert!(text(&merge.stderr).contains("summary.json"));
}

#[test]
fn help_lists_the_mutants() {
    let help = text(&trainsim(&["fuzz", "--help"]).stdout);
    for m in [
        "late-joiner-joins-complete-round",
        "rank-collision",
        "no-heartbeat-expiry",
        "sampler-off-by-one",
        "reader-double-publish",
    ] {
        assert!(help.contains(m), "{help}");
    }
}
