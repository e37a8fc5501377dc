//! Runs the parity vectors made with generator seeds other than the public one
//! (`tests/data/parity-seed*/`, each with a `SOURCE` naming torch's version and the seed)
//! against the models; every case must match.
//!
//! `randperm_digest.jsonl` files are skipped by default: each holds a 214,748,364-element
//! permutation that takes several seconds to recompute (the public set's digest already runs
//! in `parity_sampler.rs`). Set `TRAINSIM_PARITY_DIGESTS=1` to include them.

use std::path::PathBuf;

use trainsim::parity::{run_files, ParityReport};

/// Vector files too slow for the default test run.
const SLOW_FILES: [&str; 1] = ["randperm_digest.jsonl"];

/// Every `.jsonl` under `tests/data/parity-seed*/`, sorted, and whether slow files are kept.
fn vector_files() -> Vec<PathBuf> {
    let include_slow = std::env::var_os("TRAINSIM_PARITY_DIGESTS").is_some_and(|v| v == "1");
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut files = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&data)
        .unwrap_or_else(|e| panic!("read {}: {e}", data.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("parity-seed"))
        })
        .collect();
    dirs.sort();
    for dir in dirs {
        assert!(
            dir.join("SOURCE").is_file(),
            "{} has no SOURCE file",
            dir.display()
        );
        let mut in_dir: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
            .map(|entry| entry.expect("directory entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .filter(|p| {
                include_slow
                    || !p
                        .file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| SLOW_FILES.contains(&n))
            })
            .collect();
        in_dir.sort();
        files.extend(in_dir);
    }
    files
}

#[test]
fn vectors_from_other_generator_seeds_all_match() {
    let files = vector_files();
    assert!(
        files.len() >= 2 * 7,
        "expected at least two seed directories of 7 vector files each, found {files:?}"
    );
    let report: ParityReport = run_files(&files).expect("vector files are valid");
    let listing: Vec<String> = report.mismatches.iter().map(ToString::to_string).collect();
    assert!(
        listing.is_empty(),
        "{}\n{}",
        listing.join("\n"),
        report.summary()
    );
    // Two seeds of `--cases 30`: about 510 cases each without the digests.
    assert!(report.passed >= 1000, "too few cases: {}", report.summary());
}
