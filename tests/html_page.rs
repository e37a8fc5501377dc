//! `trainsim run --html`: the page of a known scenario, rendered by a real browser (headless
//! Chromium, its script run), shows its nodes, its rounds, its flat stretches, faults and exit
//! reasons, zooms where the address asks, and links its violations with the timeline both
//! ways; every stretch of lost time is shaded on the timeline and labelled inside its own
//! span, labels never overlapping; a power-off is called one; a 128-node day leads with the
//! nodes its faults hit and stays small; the same seed writes the same bytes.
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
            "--window-size=1600,1000",
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
    // A summary first; a failed job that was expected to fail reads as expected, with why.
    assert!(
        index.contains(">2 runs: 2 as expected, 0 unexpected</p>"),
        "{index}"
    );
    assert!(index.contains(">pass: as expected (job failed, 2 expected violations)</td>"));
    assert!(index.contains("<td>training stopped for good at 333.971 s after step 114"));
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
    assert!(dom.contains("<div id=\"fate\">training stopped for good at 333.971 s"));
    assert!(dom.contains("<b id=\"ettr\">9.8 %</b>"));
    assert!(dom.contains("title=\"worker start restore: 184.476 s"));
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
                 failed: NCCL watchdog: the all-reduce of step 115 timed out after 10 min";
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
    assert!(dom.contains("powered off: the host vanished (40 s – 761.898 s)"));
    // The power-off is called one: in the list of faults, on the row and as the agent's end.
    assert!(dom.contains("<td>node-2</td><td>powered off: the host vanished</td>"));
    assert!(dom.contains(">agent pid 1002 lost with its host (powered off: the host vanished)"));
    assert!(dom.contains(">POWERED OFF</text>"));
    assert!(!dom.contains(">KILLED</text>"));
    // Each survivor's exit reason is text on its row, not only a tooltip.
    assert_eq!(
        dom.matches(">exited SUCCEEDED: every worker finished</tspan>")
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
    // node-2 is in round 1 from its completion, as the text report says, not still joining.
    let node2 = dom.find("data-node=\"node-2\"").expect("node-2");
    let node2_row = &dom[node2..node2 + dom[node2..].find("</svg></svg>").expect("row end")];
    assert!(
        node2_row.contains("class=\"round-pending\" data-round=\"1\""),
        "{node2_row}"
    );
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
        "0-425493151"
    );
    for control in ["zoom-in", "zoom-out", "zoom-reset", "pan-left", "pan-right"] {
        assert!(whole.contains(&format!("id=\"{control}\"")), "{control}");
    }
    // #t=100-150 shows 100 s to 150 s: the bars scale by 425.5 / 50, the ticks relabel.
    let zoomed = rendered_dom(&browser, &page, "#t=100-150");
    assert_eq!(
        attr_of(&zoomed, "id=\"timeline\"", "data-view"),
        "100000000-150000000"
    );
    assert!(zoomed.contains("<span id=\"zoom-view\">100 s – 150 s</span>"));
    assert!(zoomed.contains("scale(8.50986,1)"), "bars stretched");
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
        "0-425493151"
    );
    // The marker leads back to its row of the verdicts, which the link starts from.
    assert!(focused.contains("id=\"vr-1\"><a class=\"violation-link\" href=\"#v-1\""));
    // Still one flat stretch per failed process-group bootstrap, written on its node.
    assert!(focused.contains("no step for 61.2 s until worker 0 failed: init_process_group"));
}

/// Run in the page after its own script: at the whole run and at each stretch of lost time
/// (as its link in the page's table shows it), every label shown lies inside its stretch's
/// band (the part of it on screen) and overlaps no other label, and the stretch's own label
/// is shown. Writes `FAIL …` lines and one `checked CAUSE START_US END_US` per stretch.
const STRETCH_PROBE: &str = r#"<script>(function () {
  var out = [], T = window.trainsimTimeline;
  function box(el) { return el.getBoundingClientRect(); }
  function checkView(name) {
    var shown = [];
    document.querySelectorAll('.gp-label').forEach(function (g) {
      if (g.style.display === 'none') return;
      var band = document.getElementById('gpb-' + g.id.slice(3));
      var t = box(g.querySelector('text')), b = box(band), plot = box(band.ownerSVGElement);
      var left = Math.max(b.left, plot.left), right = Math.min(b.right, plot.right);
      if (t.left < left - 0.5 || t.right > right + 0.5 || t.width <= 0)
        out.push('FAIL ' + name + ': label ' + g.id + ' "' + g.textContent + '" at [' + t.left.toFixed(1) + ', ' + t.right.toFixed(1) + '] outside its stretch [' + left.toFixed(1) + ', ' + right.toFixed(1) + ']');
      shown.push([t.left, t.right, t.top, t.bottom, g.id]);
    });
    for (var i = 0; i < shown.length; i++) for (var j = i + 1; j < shown.length; j++) {
      var p = shown[i], q = shown[j];
      if (p[0] < q[1] && q[0] < p[1] && p[2] < q[3] && q[2] < p[3])
        out.push('FAIL ' + name + ': labels ' + p[4] + ' and ' + q[4] + ' overlap');
    }
  }
  checkView('the whole run');
  document.querySelectorAll('rect.gp-lost').forEach(function (band) {
    var i = band.id.slice(4), a = +band.dataset.startUs, b = +band.dataset.endUs, pad = (b - a) / 4;
    T.show(a - pad, b + pad);
    var g = document.getElementById('gp-' + i);
    if (!g || g.style.display === 'none')
      out.push('FAIL stretch ' + i + ' (' + band.dataset.cause + ') has no label in its own view');
    checkView('the view of stretch ' + i);
    out.push('checked ' + band.dataset.cause + ' ' + a + ' ' + b);
  });
  var pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = out.join('\n');
  document.body.appendChild(pre);
})();</script>"#;

/// What the probe wrote, after the page of `scenario` was rendered with it.
fn probe_lines(browser: &Path, scenario: &str, name: &str) -> Vec<String> {
    let page = scratch(name);
    write_page_of(scenario, &page);
    let html = std::fs::read_to_string(&page).expect("the page");
    let probed = html.replace("</body>", &format!("{STRETCH_PROBE}</body>"));
    std::fs::write(&page, probed).expect("the probed page");
    let dom = rendered_dom(browser, &page, "");
    let from = dom.find("<pre id=\"probe\">").expect("the probe ran") + "<pre id=\"probe\">".len();
    let text = &dom[from..from + dom[from..].find("</pre>").expect("its end")];
    text.lines().map(str::to_owned).collect()
}

/// Each cause's badput in the report's JSON.
fn badput_of(scenario: &str) -> serde_json::Map<String, serde_json::Value> {
    let out = trainsim_command()
        .args(["run", scenario, "--format", "json"])
        .output()
        .expect("trainsim runs");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
    report["goodput"]["badput_us"]
        .as_object()
        .expect("badput_us")
        .clone()
}

/// Every stretch of lost time of `scenario` is shaded and labelled inside its span, labels
/// apart, and the stretches add up, cause by cause, to the report's badput.
fn every_stretch_is_shaded_and_named(browser: &Path, scenario: &str, name: &str) {
    let lines = probe_lines(browser, scenario, name);
    let failures: Vec<&String> = lines.iter().filter(|l| l.starts_with("FAIL")).collect();
    let repro = format!("trainsim run {scenario} --html {name}");
    assert!(failures.is_empty(), "{failures:#?}\n{repro}");
    let checked = lines.iter().filter(|l| l.starts_with("checked ")).count();
    assert!(checked > 0, "no stretch of lost time on the page\n{repro}");
    let mut drawn_us: std::collections::BTreeMap<String, u64> = Default::default();
    for line in lines.iter().filter_map(|l| l.strip_prefix("checked ")) {
        let parts: Vec<&str> = line.split(' ').collect();
        let (start, end): (u64, u64) = (parts[1].parse().unwrap(), parts[2].parse().unwrap());
        *drawn_us.entry(parts[0].to_owned()).or_default() += end - start;
    }
    for (cause, us) in badput_of(scenario) {
        let reported = us.as_u64().expect("microseconds");
        let drawn = drawn_us.get(&cause).copied().unwrap_or(0);
        // Pieces under a millisecond are not drawn: a rounding of the run's moments.
        assert!(
            reported.abs_diff(drawn) <= 5_000,
            "{cause}: the report has {reported} us, the timeline shades {drawn} us\n{repro}"
        );
    }
}

#[test]
fn every_stretch_of_lost_time_is_shaded_and_named_in_its_place() {
    let Some(browser) = chromium() else {
        return;
    };
    // A stall between worker groups: re-forming, worker start and checkpoint load, the
    // fatal wait for rank assignments; and a power-off's 600 s hang.
    every_stretch_is_shaded_and_named(
        &browser,
        "scenarios/spot_preemptions_replaced.toml",
        "spot-probe.html",
    );
    every_stretch_is_shaded_and_named(
        &browser,
        "scenarios/powered_off_after_round.toml",
        "powered-off-probe.html",
    );
}

#[test]
fn a_preemption_and_its_replacement_are_called_what_they_are() {
    let page = scratch("spot.html");
    write_page_of("scenarios/spot_preemptions_replaced.toml", &page);
    let Some(browser) = chromium() else {
        return;
    };
    let dom = rendered_dom(&browser, &page, "");
    assert!(dom.contains("<td>node-3</td><td>preempted: SIGTERM, the host goes 30 s later</td>"));
    assert!(dom.contains("<td>node-3</td><td>host gone: the preemption's 30 s grace is over</td>"));
    assert!(dom.contains("<td>node-16</td><td>replacement node started</td>"));
    // node-16 is in round 2 from its completion, until its wait for the master fails.
    assert!(dom.contains("class=\"round-pending\" data-round=\"2\""));
    // The key names what this run drew, the start of a node too (and the job that stopped
    // on a healthy cluster, a violation), and nothing it did not.
    let key = &dom[dom.find("id=\"timeline-key\"").expect("a key")..];
    let key = &key[..key.find("</div>").expect("its end")];
    assert!(key.contains("node started or back") && key.contains("free restart"));
    assert!(key.contains("violation"), "{key}");
    assert!(!key.contains("partitioned"), "{key}");
    // The telling key of the fatal wait is in view, not cut off.
    assert!(dom.contains("keys: …/torchelastic/assigned_ranks/10"));
    // The list's link to the replacement's start centres its marker on node-16's row.
    let focused = rendered_dom(&browser, &page, "#f-2");
    let mark = attr_of(&focused, "id=\"f-2\"", "class");
    assert!(
        mark.contains("fault-end-mark") && mark.contains("focus"),
        "{mark}"
    );
    let view = attr_of(&focused, "id=\"timeline\"", "data-view");
    let (a, b) = view.split_once('-').expect("a view");
    let (a, b): (u64, u64) = (a.parse().unwrap(), b.parse().unwrap());
    assert!(
        a < 1_345_094_000 && 1_345_094_000 < b && b - a < 100_000_000,
        "{view}"
    );
}

#[test]
fn a_128_node_day_leads_with_the_nodes_its_faults_hit() {
    let page = scratch("128.html");
    write_page_of("scenarios/failure_process_128_nodes_one_day.toml", &page);
    let size = std::fs::metadata(&page).expect("the page").len();
    assert!(size < 2_000_000, "the page is {size} bytes");
    let Some(browser) = chromium() else {
        return;
    };
    let dom = rendered_dom(&browser, &page, "");
    // The faults' nodes, from the page's list of faults, in numeric order.
    let mut hit: Vec<u32> = dom
        .match_indices("<tr class=\"fault-row\">")
        .map(|(at, _)| {
            let cells = &dom[at..];
            let node = cells.split("<td>").nth(2).expect("a node cell");
            node[5..node.find('<').expect("cell end")]
                .parse()
                .expect("node-N")
        })
        .collect();
    hit.sort_unstable();
    hit.dedup();
    assert!(!hit.is_empty(), "the day has faults");
    let rows: Vec<&str> = dom
        .match_indices("<svg class=\"row node\" id=\"row-node-")
        .map(|(at, _)| {
            let from = at + "<svg class=\"row node\" id=\"row-".len();
            &dom[from..from + dom[from..].find('"').expect("id end")]
        })
        .collect();
    let first: Vec<String> = hit.iter().map(|n| format!("node-{n}")).collect();
    assert_eq!(
        rows[..first.len()],
        first,
        "the nodes the faults hit come first"
    );
    assert_eq!(rows.len(), 130, "every node still has its row");
    // The others fold into one line that says so, and the axis reads hours.
    assert!(dom.contains("126 nodes alike, untouched by any fault"));
    assert!(dom.contains(">24 h</text>"));
}

#[test]
fn the_rendezvous_lists_link_each_step_to_its_moment() {
    let page = scratch("rendezvous-lists.html");
    write_page_of("scenarios/spare_beyond_max_nodes.toml", &page);
    let Some(browser) = chromium() else {
        return;
    };
    let dom = rendered_dom(&browser, &page, "");
    let section = dom
        .split_once("<details id=\"rendezvous-lists\" open=\"\">")
        .map(|(_, s)| s.split_once("</details>").expect("the section ends").0)
        .unwrap_or_else(|| panic!("no rendezvous lists in the page"));
    assert_eq!(section.matches("class=\"rdzv-round\"").count(), 1);
    let parked = section
        .split_once("data-action=\"ADD_TO_REDUNDANCY_LIST\"")
        .map(|(_, row)| row.split_once("</tr>").expect("the row ends").0)
        .expect("the parked node's row");
    assert!(parked.contains("ADD_TO_REDUNDANCY_LIST (join)"), "{parked}");
    let href = attr_of(parked, "href=", "href");
    let (from, to) = href
        .strip_prefix("#t=")
        .and_then(|span| span.split_once('-'))
        .unwrap_or_else(|| panic!("not a timeline address: {href}"));
    let us = |secs: &str| (secs.parse::<f64>().expect("seconds") * 1e6).round() as u64;
    // Following the link shows the step's moment on the timeline.
    let zoomed = rendered_dom(&browser, &page, href);
    assert_eq!(
        attr_of(&zoomed, "id=\"timeline\"", "data-view"),
        format!("{}-{}", us(from), us(to))
    );
}
