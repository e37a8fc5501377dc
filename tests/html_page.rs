//! `trainsim run --html`: the page of a known scenario, rendered by a real browser (headless
//! Chromium), shows its nodes, its rounds and its violation linked to the timeline; the same
//! seed writes the same bytes.
//!
//! Chromium is Debian's `chromium` package. When it is missing, the test installs it with
//! apt-get; only where that is impossible (no root, no apt) is the browser check skipped,
//! with a message.

use std::path::{Path, PathBuf};
use std::process::Command;

const SCENARIO: &str = "scenarios/rank0_dies_stale_master.toml";

fn write_page(path: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_trainsim"))
        .args(["run", SCENARIO, "--html"])
        .arg(path)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("trainsim runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trainsim-html-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir.join(name)
}

/// The browser, installing Debian's package when it is missing.
fn chromium() -> Option<PathBuf> {
    let found = || {
        ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
    };
    if let Some(path) = found() {
        return Some(path);
    }
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success())
    };
    if !(apt(&["update", "-qq"]) && apt(&["install", "-y", "-qq", "chromium"])) {
        eprintln!("skipped: chromium is not installed and apt-get could not install it");
        return None;
    }
    found()
}

/// The DOM Chromium builds from the page (no script runs; the page has none).
fn rendered_dom(browser: &Path, page: &Path) -> String {
    let profile = scratch("chromium-profile");
    let out = Command::new("timeout")
        .arg("120")
        .arg(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_same_seed_writes_the_same_page() {
    let (a, b) = (scratch("a.html"), scratch("b.html"));
    write_page(&a);
    write_page(&b);
    let first = std::fs::read(&a).expect("page a");
    assert!(!first.is_empty());
    assert_eq!(first, std::fs::read(&b).expect("page b"));
    let text = String::from_utf8(first).expect("utf-8");
    assert!(!text.contains("<script"), "the page runs no script");
    assert!(
        !text.contains("src=") && !text.contains("href=\"http") && !text.contains("@import"),
        "the page loads nothing from elsewhere"
    );
}

#[test]
fn check_writes_a_page_per_scenario_and_an_index() {
    let dir = scratch("pages");
    let out = Command::new(env!("CARGO_BIN_EXE_trainsim"))
        .args([
            "check",
            "scenarios/all_nodes_at_max.toml",
            SCENARIO,
            "--html",
        ])
        .arg(&dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("trainsim runs");
    assert_eq!(out.status.code(), Some(0));
    let index = std::fs::read_to_string(dir.join("index.html")).expect("index.html");
    for page in ["all_nodes_at_max.html", "rank0_dies_stale_master.html"] {
        assert!(index.contains(&format!("href=\"{page}\"")), "{index}");
        assert!(dir.join(page).exists(), "{page}");
    }
}

#[test]
fn a_browser_shows_the_nodes_rounds_and_violations() {
    let page = scratch("page.html");
    write_page(&page);
    let Some(browser) = chromium() else {
        return;
    };
    let dom = rendered_dom(&browser, &page);
    for node in ["node-0", "node-1", "node-2"] {
        assert!(
            dom.contains(&format!("data-node=\"{node}\"")),
            "{node} missing"
        );
    }
    // Round 0 of three, then rounds 1–3 of the two survivors, as the report says.
    assert!(dom.contains("data-round=\"0\" data-rank=\"0\" data-world=\"3\""));
    for round in 1..=3 {
        assert!(
            dom.contains(&format!(
                "data-round=\"{round}\" data-rank=\"1\" data-world=\"2\""
            )),
            "round {round} missing"
        );
    }
    // Each agent.bootstrap violation has a marker on the timeline and a link to it.
    for v in 0..3 {
        assert!(
            dom.contains(&format!("id=\"v-{v}\"")),
            "marker v-{v} missing"
        );
        assert!(
            dom.contains(&format!("href=\"#v-{v}\"")),
            "link to v-{v} missing"
        );
    }
    assert!(dom.contains("data-invariant=\"agent.bootstrap\" data-status=\"violated\""));
    assert!(dom.contains("trainsim run scenarios/rank0_dies_stale_master.toml --seed 1"));
    // The goodput: the fate in words, the ETTR, and a bar of the wall time.
    assert!(dom.contains("<div id=\"fate\">training stopped for good at 330.339969 s"));
    assert!(dom.contains("<b id=\"ettr\">9.9 %</b>"));
    assert!(dom.contains("title=\"worker start restore: 180.490213 s"));
}
