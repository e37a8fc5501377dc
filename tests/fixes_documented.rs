//! Every opt-in fix is documented and shown: it has a row in docs/scenario-format.md's fix
//! tables and a scenario in `scenarios/` that switches it on, and every `*_fixed.toml` has
//! its unfixed twin. A new fix that misses one of these fails here, not in a reader's hands.

use std::path::Path;
use strum::VariantArray;
use trainsim::fixes::{AgentFix, ReaderFix, RendezvousFix};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every fix's name as scenario files spell it, with the table it belongs to.
fn every_fix() -> Vec<(&'static str, &'static str)> {
    let rendezvous = RendezvousFix::VARIANTS
        .iter()
        .map(|&f| ("rendezvous.fixes", f.into()));
    let agent = AgentFix::VARIANTS
        .iter()
        .map(|&f| ("agent.fixes", f.into()));
    let reader = ReaderFix::VARIANTS
        .iter()
        .map(|&f| ("reader.fixes", f.into()));
    rendezvous.chain(agent).chain(reader).collect()
}

fn scenario_texts() -> Vec<(String, String)> {
    let mut texts = Vec::new();
    for entry in std::fs::read_dir(root().join("scenarios")).expect("scenarios/ is readable") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            texts.push((name, std::fs::read_to_string(&path).expect("a scenario")));
        }
    }
    texts.sort();
    texts
}

#[test]
fn every_fix_has_a_row_in_the_format_docs() {
    let format = std::fs::read_to_string(root().join("docs/scenario-format.md")).unwrap();
    let missing: Vec<String> = every_fix()
        .into_iter()
        .filter(|(_, name)| !format.contains(&format!("| `{name}` |")))
        .map(|(table, name)| format!("{table}: {name}"))
        .collect();
    assert!(
        missing.is_empty(),
        "fixes without a row in docs/scenario-format.md: {missing:?}"
    );
}

#[test]
fn every_fix_is_switched_on_by_a_scenario() {
    let scenarios = scenario_texts();
    let missing: Vec<String> = every_fix()
        .into_iter()
        .filter(|(_, name)| {
            let quoted = format!("\"{name}\"");
            !scenarios.iter().any(|(_, text)| {
                text.lines()
                    .any(|l| l.starts_with("fixes") && l.contains(&quoted))
            })
        })
        .map(|(table, name)| format!("{table}: {name}"))
        .collect();
    assert!(
        missing.is_empty(),
        "fixes no scenario in scenarios/ switches on: {missing:?}"
    );
}

#[test]
fn every_fixed_scenario_has_its_unfixed_twin() {
    let scenarios = scenario_texts();
    let names: Vec<&str> = scenarios.iter().map(|(n, _)| n.as_str()).collect();
    for name in &names {
        if let Some(stem) = name.strip_suffix("_fixed.toml") {
            let twin = format!("{stem}.toml");
            assert!(names.contains(&twin.as_str()), "{name} has no twin {twin}");
        }
    }
}
