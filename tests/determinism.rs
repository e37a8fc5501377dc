//! Every scenario file replays bit for bit (equal trace hashes) from each of 10 seeds, its
//! own and nine others, and the seeds do not all give the same trace.

use std::path::{Path, PathBuf};

/// Seeds besides the file's own; each must replay, and at least one must change the trace.
const OTHER_SEEDS: [u64; 9] = [
    1_000_003, 2_000_029, 3_000_017, 4_000_037, 5_000_011, 6_000_047, 7_000_003, 8_000_009,
    9_000_011,
];

fn scenario_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the scenarios directory exists")
        .map(|e| e.expect("a readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    // The biggest clusters first, so the queue ends with short runs on both workers.
    files.sort_by_key(|p| {
        let nodes = trainsim::scenario::load(p).map_or(0, |s| s.cluster.total_nodes());
        (std::cmp::Reverse(nodes), p.clone())
    });
    assert!(!files.is_empty(), "no scenario files in {}", dir.display());
    files
}

fn trace_hash(scenario: &trainsim::scenario::Scenario, file: &str, seed: u64) -> String {
    let report = trainsim::runner::Run::of(scenario, file)
        .seed(seed)
        .report()
        .unwrap_or_else(|e| panic!("{e}"));
    // Read the hash the way consumers do: from the report's serialized form.
    let json = serde_json::to_value(&report).expect("a report serializes");
    let hash = json["trace_hash"]
        .as_str()
        .expect("the report has a trace_hash")
        .to_owned();
    assert_eq!(hash, report.trace_hash);
    assert_eq!(hash.len(), 64, "a SHA-256 in hex: {hash}");
    hash
}

/// Runs `seed` twice; the hash when both runs agree.
fn replayed_hash(
    scenario: &trainsim::scenario::Scenario,
    file: &str,
    seed: u64,
) -> Result<String, String> {
    let first = trace_hash(scenario, file, seed);
    let again = trace_hash(scenario, file, seed);
    if first != again {
        return Err(format!("{file}: seed {seed} gave {first} then {again}"));
    }
    Ok(first)
}

/// One file: every seed replays, and the other seeds are not all the file seed's trace.
fn check_file(path: &Path) -> Result<(), String> {
    let file = path.display().to_string();
    let scenario = trainsim::scenario::load(path).map_err(|e| e.to_string())?;
    let first = replayed_hash(&scenario, &file, scenario.seed)?;
    let others: Vec<String> = OTHER_SEEDS
        .iter()
        .map(|&seed| replayed_hash(&scenario, &file, seed))
        .collect::<Result<_, _>>()?;
    if others.iter().all(|h| *h == first) {
        return Err(format!(
            "{file}: seeds {OTHER_SEEDS:?} all gave the trace of seed {} ({first})",
            scenario.seed
        ));
    }
    Ok(())
}

#[test]
fn every_scenario_replays_from_its_seed_and_depends_on_it() {
    let files = scenario_files();
    // Two workers take files from one queue, so a slow scenario does not leave the other
    // worker idle; each run has its own thread and runtime anyway.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    let mut failed = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(path) = files.get(i) else {
                            return failed;
                        };
                        failed.extend(check_file(path).err());
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a worker finishes"))
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} of {} scenario files:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}
