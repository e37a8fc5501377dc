//! Every `scenarios/*.toml` is its own test: it must pass its own `expect`, and its report
//! must match the insta snapshot in `snapshots/` (the report with the trace hashed without
//! its prose, and the prose listed: see `common/snapshot.rs`). CI never accepts a new or
//! changed snapshot (`CI=true` / `INSTA_UPDATE=no`); the diff is what a reviewer reads.

#[path = "common/snapshot.rs"]
mod snapshot;

use libtest_mimic::{Arguments, Failed, Trial};
use std::path::{Path, PathBuf};

fn main() {
    let args = Arguments::from_args();
    let mut files: Vec<PathBuf> = std::fs::read_dir("scenarios")
        .expect("the scenarios/ directory exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut trials: Vec<Trial> = files
        .into_iter()
        .map(|path| {
            let name = path
                .file_stem()
                .expect("a file name")
                .to_string_lossy()
                .into_owned();
            Trial::test(name, move || run_scenario(&path))
        })
        .collect();
    trials.push(Trial::test("snapshot_hash_leaves_prose_out", || {
        snapshot::self_test().map_err(Failed::from)
    }));
    libtest_mimic::run(&args, trials).exit();
}

fn run_scenario(path: &Path) -> Result<(), Failed> {
    let file = path.display().to_string();
    let scenario = trainsim::scenario::load(path).map_err(|e| Failed::from(e.to_string()))?;
    let (report, trace) = trainsim::runner::Run::of(&scenario, &file)
        .traced()
        .map_err(|e| Failed::from(e.to_string()))?;
    if !report.passed() {
        return Err(report.to_text().into());
    }
    let name = path
        .file_stem()
        .expect("a file name")
        .to_string_lossy()
        .into_owned();
    let snapshot = snapshot::snapshot_of(&report, &trace);
    std::panic::catch_unwind(|| {
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path("../snapshots");
        settings.set_prepend_module_to_snapshot(false);
        settings.set_input_file(path);
        settings.bind(|| insta::assert_snapshot!(name, snapshot));
    })
    .map_err(|payload| {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Failed::from(format!(
            "the snapshot of {file} changed:\n{message}\n{}",
            report.repro
        ))
    })
}
