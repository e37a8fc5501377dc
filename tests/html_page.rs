//! `trainsim run --html`: the page of a known scenario, rendered by a real browser (headless
//! Chromium, its script run), shows its nodes, its rounds, its flat stretches, faults and exit
//! reasons, zooms where the address asks, and links its violations with the timeline both
//! ways; the same seed writes the same bytes.
//!
//! Chromium is Debian's `chromium` package. When it is missing, the test installs it with
//! apt-get; only where that is impossible (no root, no apt) is the browser check skipped,
//! with a message.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
mod common;
use common::trainsim_command;

const SCENARIO: &str = "scenarios/rank0_dies_stale_master.toml";

fn write_page(path: &Path) {
    write_page_of(SCENARIO, path);
}

fn write_page_of(scenario: &str, path: &Path) {
    let out = trainsim_command()
        .args(["run", scenario, "--html"])
        .arg(path)
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

/// The DOM Chromium builds from the page after its script ran; `fragment` is the address's
/// `#...` part.
fn rendered_dom(browser: &Path, page: &Path, fragment: &str) -> String {
    // A profile per browser: tests run at once, and a profile admits one browser.
    static PROFILES: AtomicUsize = AtomicUsize::new(0);
    let profile = scratch(&format!(
        "chromium-profile-{}",
        PROFILES.fetch_add(1, Ordering::Relaxed)
    ));
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
        .arg(format!("file://{}{fragment}", page.display()))
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
    assert!(
        !text.contains("src=") && !text.contains("href=\"http") && !text.contains("@import"),
        "the page loads nothing from elsewhere"
    );
    assert!(
        !text.contains("fetch(") && !text.contains("XMLHttpRequest"),
        "its script asks nothing of the network"
    );
}

#[test]
fn check_writes_a_page_per_scenario_and_an_index() {
    let dir = scratch("pages");
    let out = trainsim_command()
        .args([
            "check",
            "scenarios/all_nodes_at_max.toml",
            SCENARIO,
            "--html",
        ])
        .arg(&dir)
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
    let dom = rendered_dom(&browser, &page, "");
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
    assert!(dom.contains("<div id=\"fate\">training stopped for good at 328.098854 s"));
    assert!(dom.contains("<b id=\"ettr\">10.0 %</b>"));
    assert!(dom.contains("title=\"worker start restore: 180.422538 s"));
}

/// The attribute value of `name` in the first element that has `marker` in its tag.
fn attr_of<'a>(dom: &'a str, marker: &str, name: &str) -> &'a str {
    let at = dom
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} missing"));
    let tag_start = dom[..at].rfind('<').expect("a tag");
    let tag = &dom[tag_start..tag_start + dom[tag_start..].find('>').expect("a tag's end")];
    let key = format!("{name}=\"");
    let from = tag
        .find(&key)
        .unwrap_or_else(|| panic!("{name} missing in {tag}"))
        + key.len();
    &tag[from..from + tag[from..].find('"').expect("a closing quote")]
}

#[test]
fn a_hang_a_fault_and_the_exits_are_written_on_the_nodes() {
    let page = scratch("powered-off.html");
    write_page_of("scenarios/powered_off_after_round.toml", &page);
    let Some(browser) = chromium() else {
        return;
    };
    let dom = rendered_dom(&browser, &page, "");
    // The survivors sit in the all-reduce for the 10-minute NCCL timeout: a flat stretch on
    // each, labelled with the power-off that began it and the watchdog that ended it.
    let label = "no step for 600.3 s — from the power_off of node-2 at 40 s until worker 0 \
                 failed: NCCL watchdog: the all-reduce of step 115 timed out";
    assert_eq!(
        dom.matches(label).count(),
        4,
        "a label and a tooltip per survivor"
    );
    assert!(dom.contains("class=\"flat\""));
    // node-2's host is shaded from its power-off to the end, and its kill is written.
    let off = dom
        .find("class=\"shade shade-off\"")
        .expect("node-2 shaded");
    let row = dom[..off].rfind("data-node=\"").expect("in a row");
    assert!(dom[row..].starts_with("data-node=\"node-2\""));
    assert!(dom.contains("powered off (40 s – 760.684192 s)"));
    assert!(dom.contains(">agent pid 1002 killed</text>"));
    // Each survivor's exit reason is text on its row, not only a tooltip.
    assert_eq!(
        dom.matches(">exited SUCCEEDED: every worker finished</text>")
            .count(),
        2
    );
    // No empty lane: node-1 hosts no store, so its row names none.
    let node1 = dom.find("data-node=\"node-1\"").expect("node-1");
    let node1_row = &dom[node1..node1 + dom[node1..].find("</svg></svg>").expect("row end")];
    assert!(!node1_row.contains("store server"));
}

#[test]
fn a_partition_shades_the_cut_node_until_it_heals() {
    let page = scratch("partition.html");
    write_page_of("scenarios/partition_then_heal.toml", &page);
    let Some(browser) = chromium() else {
        return;
    };
    let dom = rendered_dom(&browser, &page, "");
    assert_eq!(dom.matches("class=\"shade shade-partition\"").count(), 1);
    let shade = dom.find("class=\"shade shade-partition\"").expect("shade");
    let row = dom[..shade].rfind("data-node=\"").expect("in a row");
    assert!(dom[row..].starts_with("data-node=\"node-2\""));
    assert!(dom.contains("partitioned from node-0, node-1 (0.001 s – 45 s)"));
}

#[test]
fn the_address_zooms_the_timeline_and_a_violation_link_finds_its_marker() {
    let page = scratch("zoom.html");
    write_page(&page);
    let Some(browser) = chromium() else {
        return;
    };
    let whole = rendered_dom(&browser, &page, "");
    assert_eq!(
        attr_of(&whole, "id=\"timeline\"", "data-view"),
        "0-343269639"
    );
    for control in ["zoom-in", "zoom-out", "zoom-reset", "pan-left", "pan-right"] {
        assert!(whole.contains(&format!("id=\"{control}\"")), "{control}");
    }
    // #t=100-150 shows 100 s to 150 s: the bars scale by 343.3 / 50, the ticks relabel.
    let zoomed = rendered_dom(&browser, &page, "#t=100-150");
    assert_eq!(
        attr_of(&zoomed, "id=\"timeline\"", "data-view"),
        "100000000-150000000"
    );
    assert!(zoomed.contains("<span id=\"zoom-view\">100 s – 150 s</span>"));
    assert!(zoomed.contains("scale(6.86539,1)"), "bars stretched");
    assert!(zoomed.contains(">120 s</text>"), "ticks relabelled");
    // Following a violation's link centres its moment and marks it.
    let focused = rendered_dom(&browser, &page, "#v-1");
    let mark = attr_of(&focused, "id=\"v-1\"", "class");
    assert!(
        mark.contains("violation-mark") && mark.contains("focus"),
        "{mark}"
    );
    assert_ne!(
        attr_of(&focused, "id=\"timeline\"", "data-view"),
        "0-343269639"
    );
    // The marker leads back to its row of the verdicts, which the link starts from.
    assert!(focused.contains("id=\"vr-1\"><a class=\"violation-link\" href=\"#v-1\""));
    // Still one flat stretch per failed process-group bootstrap, written on its node.
    assert!(focused.contains("no step for 60.1 s until worker 0 failed: init_process_group"));
}
