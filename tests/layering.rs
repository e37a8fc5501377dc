//! The crate's floors: each top-level module may use the modules on lower floors only, so
//! data flows one way (scenario → world → subsystems → trace → checks → report). This test
//! reads every `crate::…` path in `src/` (test modules and test files left out) and fails on
//! an import that climbs, unless it is one of the few listed below with its reason, and on a
//! scenario-free module (the reader) that names the scenario.

mod common;
use common::rust_files;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each top-level module and its floor, lowest first. A module may use any module on a
/// lower floor; two modules never share a floor, so no two can use each other.
const FLOORS: &[(&str, u32)] = &[
    // The ground floor: words every floor shares.
    ("fixes", 0),
    ("invariant", 0),
    ("mutant", 0),
    ("record_check", 0),
    ("files", 0),
    ("shared_list", 0),
    ("memo", 0),
    ("sim_time", 0),
    ("rng", 0),
    ("scenario", 1),
    ("trace", 2),
    ("world", 3),
    ("store", 4),
    ("sampler", 5),
    ("reader", 6),
    ("rendezvous", 7),
    ("job", 8),
    ("agent", 9),
    ("torch_plane", 10),
    ("check", 11),
    ("report", 12),
    ("runner", 13),
    ("parity", 14),
    ("conform", 14),
    ("fuzz", 14),
    ("bench", 15),
    ("cli", 16),
];

/// The imports that may climb, each with why: at most three, none today.
const UPWARD_ALLOWED: &[(&str, &str, &str)] = &[];

fn floor(module: &str) -> u32 {
    FLOORS
        .iter()
        .find(|(name, _)| *name == module)
        .map(|(_, floor)| *floor)
        .unwrap_or_else(|| panic!("src/{module} has no floor: add it to FLOORS in {}", file!()))
}

/// The top-level module a file under `src/` belongs to (`None` for lib.rs and main.rs).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).expect("under src");
    let first = relative.components().next()?.as_os_str().to_string_lossy();
    let name = first.trim_end_matches(".rs");
    (name != "lib" && name != "main").then(|| name.to_owned())
}

/// The file's code outside its unit-test module and its comments.
fn code_outside_tests(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        // The unit tests sit in one `#[cfg(test)] mod … {` block at the end of a file.
        let opens_test_block = |next: Option<&&str>| {
            next.is_some_and(|n| n.trim_start().starts_with("mod ") && n.trim_end().ends_with('{'))
        };
        if trimmed.starts_with("#[cfg(test)]") && opens_test_block(lines.peek()) {
            break;
        }
        if !trimmed.starts_with("//") {
            code.push_str(line);
            code.push('\n');
        }
    }
    code
}

/// Every top-level module each module names through `crate::`, with the files that do.
fn imports() -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with("tests.rs") || name == "testkit.rs" {
            continue;
        }
        let Some(from) = module_of(&src, &file) else {
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("a source file");
        let code = code_outside_tests(&text);
        for (at, _) in code.match_indices("crate::") {
            let rest = &code[at + "crate::".len()..];
            let to: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !to.is_empty() && to != from {
                let shown = file.strip_prefix(&src).unwrap().display().to_string();
                edges
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_default()
                    .insert(shown);
            }
        }
    }
    edges
}

#[test]
fn no_module_imports_from_a_higher_floor_unless_listed() {
    assert!(UPWARD_ALLOWED.len() <= 3, "at most three upward imports");
    let mut climbing = Vec::new();
    let mut used_allowances = BTreeSet::new();
    for (from, targets) in imports() {
        for (to, files) in targets {
            if floor(&to) < floor(&from) {
                continue;
            }
            if let Some(allowed) = UPWARD_ALLOWED
                .iter()
                .find(|(a, b, _)| *a == from && *b == to)
            {
                used_allowances.insert((allowed.0, allowed.1));
                continue;
            }
            climbing.push(format!("{from} -> {to} (in {files:?})"));
        }
    }
    assert!(
        climbing.is_empty(),
        "imports that climb a floor (move the shared piece down, or list it with its reason \
         in UPWARD_ALLOWED):\n{}",
        climbing.join("\n")
    );
    // An allowance nobody needs any more is taken off the list.
    for (from, to, _) in UPWARD_ALLOWED {
        assert!(
            used_allowances.contains(&(*from, *to)),
            "{from} -> {to} no longer climbs: remove it from UPWARD_ALLOWED"
        );
    }
}

#[test]
fn every_module_has_a_floor() {
    for (from, targets) in imports() {
        floor(&from);
        for to in targets.keys() {
            floor(to);
        }
    }
}

/// Modules that never name the scenario although their floor allows it: the caller hands
/// them plain values and they build their own settings. The reader model also runs without
/// any scenario, so it takes none.
const SCENARIO_FREE: &[&str] = &["reader"];

#[test]
fn scenario_free_modules_name_no_scenario() {
    let edges = imports();
    for module in SCENARIO_FREE {
        let files = edges
            .get(*module)
            .and_then(|targets| targets.get("scenario"));
        assert!(
            files.is_none(),
            "{module} names the scenario (in {files:?}): let its caller hand it plain values"
        );
    }
}
