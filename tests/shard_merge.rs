//! `--shard k/n` and `trainsim merge`: a seed batch and a sweep split over three shards and
//! merged print the same bytes as one machine running every seed, and draw the same compare
//! page; parts that do not tile one run are errors naming the file, and an output path
//! that cannot be written fails before any run.

use std::path::{Path, PathBuf};
use std::process::Command;
mod common;
use common::trainsim;

const SCENARIO: &str = "scenarios/worker_crash_restart.toml";
const SWEEP: &str = "agent.max_restarts=0,1,3";

fn ok(args: &[&str]) -> String {
    let out = trainsim(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trainsim-shard-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

fn s(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// Writes the three parts of `args` + `--shard k/3 --out DIR/part-k.json`; returns them
/// in the order 3, 1, 2, so a merge cannot rely on the order given.
fn parts(dir: &Path, args: &[&str]) -> Vec<String> {
    let paths: Vec<String> = (1..=3)
        .map(|k| s(&dir.join(format!("part-{k}.json"))).to_owned())
        .collect();
    for (k, path) in paths.iter().enumerate() {
        let shard = format!("{}/3", k + 1);
        let mut all = args.to_vec();
        all.extend(["--shard", &shard, "--out", path]);
        ok(&all);
    }
    vec![paths[2].clone(), paths[0].clone(), paths[1].clone()]
}

fn merge(parts: &[String], extra: &[&str]) -> String {
    let mut args = vec!["merge"];
    args.extend(parts.iter().map(String::as_str));
    args.extend(extra);
    ok(&args)
}

#[test]
fn a_batch_merged_from_three_shards_prints_what_one_machine_prints() {
    let dir = scratch("batch");
    let whole = ok(&["run", SCENARIO, "--seeds", "3..10"]);
    let summary = &whole[whole.find("goodput over 7 seeds").expect("a summary")..];
    let parts = parts(&dir, &["run", SCENARIO, "--seeds", "3..10"]);
    assert_eq!(merge(&parts, &[]), summary);
    // JSON: the merge of the three shards against the part of one machine's whole batch.
    let one = dir.join("one.json");
    ok(&["run", SCENARIO, "--seeds", "3..10", "--out", s(&one)]);
    let json = merge(&parts, &["--format", "json"]);
    assert_eq!(json, merge(&[s(&one).to_owned()], &["--format", "json"]));
    let value: serde_json::Value = serde_json::from_str(&json).expect("one JSON object");
    assert_eq!(value["seeds"], 7);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_sweep_merged_from_three_shards_prints_and_draws_what_one_machine_does() {
    let dir = scratch("sweep");
    let compare = ["compare", SCENARIO, "--set", SWEEP, "--seeds", "0..5"];
    let page = dir.join("one.html");
    let mut with_page = compare.to_vec();
    with_page.extend(["--html", s(&page)]);
    let text = ok(&with_page);
    let mut json_args = compare.to_vec();
    json_args.extend(["--format", "json"]);
    let json = ok(&json_args);
    let parts = parts(&dir, &compare);
    assert_eq!(merge(&parts, &[]), text);
    let merged_page = dir.join("merged.html");
    assert_eq!(
        merge(&parts, &["--format", "json", "--html", s(&merged_page)]),
        json
    );
    assert_eq!(
        std::fs::read(&merged_page).expect("the merged page"),
        std::fs::read(&page).expect("the page")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The exit code and stderr of `trainsim merge` over `parts`.
fn merge_error(parts: &[&str]) -> (Option<i32>, String) {
    let mut args = vec!["merge"];
    args.extend(parts);
    let out = trainsim(&args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts that `trainsim merge` over `parts` exits with code 2 and says `wanted` on
/// stderr; returns the stderr for further checks.
fn merge_refuses(parts: &[&str], wanted: &str) -> String {
    let (code, err) = merge_error(parts);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(wanted), "{err}");
    err
}

#[test]
fn parts_that_do_not_tile_one_run_are_errors_naming_the_file() {
    let dir = scratch("errors");
    let compare = ["compare", SCENARIO, "--set", SWEEP, "--seeds", "0..4"];
    let p = parts(&dir, &compare);
    let (p3, p1, p2) = (p[0].as_str(), p[1].as_str(), p[2].as_str());

    let err = merge_refuses(&[p1, p2], "shard 3/3 is missing");
    assert!(err.contains("--shard 3/3 --out"), "{err}");

    merge_refuses(
        &[p1, p2, p3, p2],
        &format!("{p2} and {p2} are both shard 2/3"),
    );

    let other = dir.join("other.json");
    ok(&[
        "compare",
        SCENARIO,
        "--set",
        "agent.max_restarts=0,2",
        "--seeds",
        "0..4",
        "--shard",
        "3/3",
        "--out",
        s(&other),
    ]);
    let foreign = format!("{} is not a part of the same run as {p1}", s(&other));
    merge_refuses(&[p1, p2, s(&other)], &foreign);

    let batch = dir.join("batch.json");
    ok(&[
        "run",
        SCENARIO,
        "--seeds",
        "3..7",
        "--shard",
        "3/3",
        "--out",
        s(&batch),
    ]);
    let kinds = "it is a batch part, the other a compare";
    merge_refuses(&[p1, p2, s(&batch)], kinds);

    // A part whose rows were edited no longer holds the seeds its shard owns.
    let edited = dir.join("edited.json");
    let text = std::fs::read_to_string(p3).unwrap();
    std::fs::write(&edited, text.replacen("\"seed\":2", "\"seed\":1", 1)).unwrap();
    merge_refuses(&[p1, p2, s(&edited)], &format!("{}: ", s(&edited)));

    let junk = dir.join("junk.json");
    std::fs::write(&junk, "{\"format\": \"something else\"}").unwrap();
    merge_refuses(&[s(&junk)], &format!("{}: not a part file", s(&junk)));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unwritable_output_fails_before_any_run() {
    let missing = "/nonexistent-trainsim-dir/part.json";
    for args in [
        &["run", SCENARIO, "--seeds", "0..1000", "--out", missing][..],
        &[
            "compare", SCENARIO, "--set", SWEEP, "--seeds", "0..1000", "--html", missing,
        ],
        &[
            "compare", SCENARIO, "--set", SWEEP, "--seeds", "0..1000", "--shard", "1/2", "--out",
            missing,
        ],
    ] {
        let out = trainsim(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(missing), "{err}");
        assert!(out.stdout.is_empty(), "{args:?} ran before failing");
    }
    let out = trainsim(&["compare", SCENARIO, "--set", SWEEP, "--shard", "1/2"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_browser_shows_the_sweep_page() {
    let Some(browser) = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
    else {
        eprintln!("skipped: chromium is not installed (tests/html_page.rs installs it)");
        return;
    };
    let dir = scratch("browser");
    let page = dir.join("sweep.html");
    ok(&[
        "compare",
        SCENARIO,
        "--set",
        SWEEP,
        "--seeds",
        "0..3",
        "--html",
        s(&page),
    ]);
    let out = Command::new("timeout")
        .arg("120")
        .arg(&browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", s(&dir.join("profile"))))
        .arg(format!("file://{}", s(&page)))
        .output()
        .expect("chromium runs");
    let dom = String::from_utf8_lossy(&out.stdout);
    // Three swept values, each with its mean and interval, and three seeds' dots apiece.
    for variant in 0..3 {
        assert!(
            dom.contains(&format!("data-variant=\"{variant}\"")),
            "{dom}"
        );
    }
    // Each dot drawn by how its run ended, and its tooltip says how to replay it.
    assert_eq!(dom.matches("class=\"seed").count(), 9);
    assert_eq!(dom.matches("; replay: trainsim compare ").count(), 9);
    // Badput by cause and outcomes per variant, and the differences as the text says them.
    assert_eq!(dom.matches("data-piece=\"kept_training\"").count(), 3);
    assert!(dom.contains("data-piece=\"finished\""));
    assert!(dom.contains("agent.max_restarts=1 vs agent.max_restarts=0: +"));
    std::fs::remove_dir_all(&dir).unwrap();
}
