//! Every opt-in fix is documented and shown as its `FixInfo` declares: docs/scenario-format.md's
//! fix tables (and docs/fidelity.md's, for the sampler's fix no scenario names) hold exactly
//! the rows rendered from the fixes' metadata, the README's bug library and docs/fidelity.md
//! name each fix, and each fix's scenario pair exists with its `_fixed` twin switching the fix
//! on (or, for a fix no scenario switches on, its test exists and names it). A new fix that
//! misses one of these fails here, with the row or file to add, not in a reader's hands.

use std::path::Path;
use trainsim::fixes::{AgentFix, Fix, FixInfo, ReaderFix, RendezvousFix, ShownBy};
use trainsim::sampler::SamplerFix;
use trainsim::scenario::model::Scenario;

/// One fix of any table, as the docs and the scenarios name it.
struct Listed {
    /// The scenario key whose list switches it on (`agent.fixes`).
    key: &'static str,
    /// Its name as scenario files spell it.
    name: &'static str,
    info: FixInfo,
}

/// The header of docs/scenario-format.md's fix tables, one table per scenario key.
const FORMAT_TABLE_HEADER: &str = "| fix | upstream | what it changes |";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn listed<F: Fix>() -> Vec<Listed> {
    F::VARIANTS
        .iter()
        .map(|&fix| Listed {
            key: F::KEY,
            name: fix.into(),
            info: fix.info(),
        })
        .collect()
}

/// Every fix a scenario key switches on, table by table in the order docs/scenario-format.md
/// has its tables.
fn scenario_fixes() -> Vec<Vec<Listed>> {
    vec![
        listed::<RendezvousFix>(),
        listed::<AgentFix>(),
        listed::<ReaderFix>(),
    ]
}

/// Every fix only a command switches on, table by table in the order docs/fidelity.md has
/// its tables.
fn command_fixes() -> Vec<Vec<Listed>> {
    vec![listed::<SamplerFix>()]
}

/// Every fix.
fn every_fix() -> Vec<Listed> {
    scenario_fixes()
        .into_iter()
        .chain(command_fixes())
        .flatten()
        .collect()
}

/// The fix's row in docs/scenario-format.md's table for its key.
fn format_row(fix: &Listed) -> String {
    let FixInfo {
        upstream, summary, ..
    } = fix.info;
    format!("| `{}` | {upstream} | {summary} |", fix.name)
}

/// The body rows of every table in `doc` under `header`, table by table.
fn tables_under(doc: &str, header: &str) -> Vec<Vec<String>> {
    let mut tables = Vec::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        if line.trim() == header {
            let body = lines
                .by_ref()
                .skip(1) // the `| --- |` line
                .take_while(|l| l.trim_start().starts_with('|'))
                .map(|l| l.trim().to_owned())
                .collect();
            tables.push(body);
        }
    }
    tables
}

/// `path`'s fix tables hold exactly `fixes`' declared rows, one table per key, in order.
fn assert_tables_hold(path: &str, fixes: &[Vec<Listed>]) {
    let doc = read(path);
    let tables = tables_under(&doc, FORMAT_TABLE_HEADER);
    let keys: Vec<&str> = fixes
        .iter()
        .filter_map(|f| f.first())
        .map(|f| f.key)
        .collect();
    assert_eq!(
        tables.len(),
        fixes.len(),
        "{path} should have one `{FORMAT_TABLE_HEADER}` table for each of {keys:?}"
    );
    let mut problems = Vec::new();
    for (table, fixes) in tables.iter().zip(fixes) {
        let expected: Vec<String> = fixes.iter().map(format_row).collect();
        for (fix, row) in fixes.iter().zip(&expected) {
            if !table.contains(row) {
                problems.push(format!(
                    "the `{}` table has no row for `{}` as its `FixInfo` declares it; paste:\n{row}",
                    fix.key, fix.name
                ));
            }
        }
        for row in table.iter().filter(|r| !expected.contains(r)) {
            problems.push(format!(
                "this row matches no fix's `FixInfo`; correct it or remove it:\n{row}"
            ));
        }
    }
    assert!(problems.is_empty(), "{path}:\n{}", problems.join("\n"));
    for (table, fixes) in tables.iter().zip(fixes) {
        let expected: Vec<String> = fixes.iter().map(format_row).collect();
        assert_eq!(
            table, &expected,
            "{path} lists fixes in their declaration order (fuzz triage's order)"
        );
    }
}

#[test]
fn the_format_docs_fix_tables_hold_each_fixs_declared_row() {
    assert_tables_hold("docs/scenario-format.md", &scenario_fixes());
}

#[test]
fn the_fidelity_docs_fix_tables_hold_each_command_fixs_declared_row() {
    assert_tables_hold("docs/fidelity.md", &command_fixes());
}

#[test]
fn the_readmes_bug_library_pairs_each_fix_with_its_scenarios() {
    let readme = read("README.md");
    let missing: Vec<String> = every_fix()
        .iter()
        .filter_map(|fix| {
            // The bug library pairs scenarios; a fix no scenario switches on is not in it.
            let ShownBy::Scenarios(stem) = fix.info.shown_by else {
                return None;
            };
            let tail = format!("| `{stem}.toml` | `_fixed`: `{}` |", fix.name);
            let present = readme.lines().any(|l| l.trim_end().ends_with(&tail));
            (!present).then(|| format!("| <the behaviour, naming {}> {tail}", fix.info.upstream))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "README.md's bug library lacks a row for these fixes; add:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_fidelity_docs_name_every_fix() {
    let fidelity = read("docs/fidelity.md");
    let missing: Vec<String> = every_fix()
        .iter()
        .filter(|fix| !fidelity.contains(&format!("`{}`", fix.name)))
        .map(|fix| format!("{}: `{}` ({})", fix.key, fix.name, fix.info.upstream))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/fidelity.md does not say which behaviour these fixes remove: {missing:?}"
    );
}

/// The names of the fixes `scenario` switches on under `key`.
fn switched_on(scenario: &Scenario, key: &str) -> Vec<&'static str> {
    match key {
        RendezvousFix::KEY => scenario
            .rendezvous
            .fixes
            .iter()
            .map(|&f| f.into())
            .collect(),
        AgentFix::KEY => scenario.agent.fixes.iter().map(|&f| f.into()).collect(),
        ReaderFix::KEY => scenario
            .reader
            .iter()
            .flat_map(|r| r.fixes.iter().map(|&f| f.into()))
            .collect(),
        other => panic!("no scenario key {other}"),
    }
}

fn load(file: &str) -> Scenario {
    let path = root().join("scenarios").join(file);
    assert!(
        path.exists(),
        "scenarios/{file} is missing: each fix has a scenario pair (see FixInfo::shown_by)"
    );
    trainsim::scenario::load(&path).unwrap_or_else(|e| panic!("scenarios/{file}: {e}"))
}

#[test]
fn every_fix_has_its_scenario_pair_and_the_twin_switches_it_on() {
    for fix in every_fix() {
        let ShownBy::Scenarios(stem) = fix.info.shown_by else {
            continue;
        };
        let shows = load(&format!("{stem}.toml"));
        assert!(
            !switched_on(&shows, fix.key).contains(&fix.name),
            "scenarios/{stem}.toml shows the behaviour `{}` removes, so it must not switch it on",
            fix.name
        );
        let fixed = load(&format!("{stem}_fixed.toml"));
        assert!(
            switched_on(&fixed, fix.key).contains(&fix.name),
            "scenarios/{stem}_fixed.toml should switch on `{}` in `{}`",
            fix.name,
            fix.key
        );
    }
}

#[test]
fn every_fix_shown_by_a_test_has_that_test_and_it_names_the_fix() {
    for fix in every_fix() {
        let ShownBy::Test(stem) = fix.info.shown_by else {
            continue;
        };
        let path = format!("tests/{stem}.rs");
        assert!(
            root().join(&path).exists(),
            "{path} is missing: `{}` ({}) is shown by it (see FixInfo::shown_by)",
            fix.name,
            fix.key
        );
        assert!(
            read(&path).contains(&format!("`{}`", fix.name)),
            "{path} shows `{}` but never names it",
            fix.name
        );
    }
}

#[test]
fn every_fixed_scenario_has_its_unfixed_twin() {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(root().join("scenarios")).expect("scenarios/ is readable") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            names.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    for name in &names {
        if let Some(stem) = name.strip_suffix("_fixed.toml") {
            let twin = format!("{stem}.toml");
            assert!(names.contains(&twin), "{name} has no twin {twin}");
        }
    }
}
