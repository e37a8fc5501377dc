//! Runs every rendezvous parity vector (cases made by torch itself) through the model.

use std::path::Path;

use trainsim::parity::Case;

fn run_file(name: &str) -> (usize, Vec<String>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/parity")
        .join(name);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut failures = Vec::new();
    let mut count = 0;
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let line_no = index + 1;
        let case: Case = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{name}:{line_no}: malformed case: {e}"));
        let kind = case.kind();
        assert!(kind.starts_with("rdzv_"), "{name}:{line_no}: {kind}");
        count += 1;
        match case.check() {
            Ok(None) => {}
            Ok(Some(diff)) => failures.push(format!("{name}:{line_no}: {kind}: {diff}")),
            Err(msg) => panic!("{name}:{line_no}: malformed case: {msg}"),
        }
    }
    (count, failures)
}

#[test]
fn rendezvous_and_sanitize_vectors_all_match() {
    let mut total = 0;
    let mut failures = Vec::new();
    for name in ["rendezvous.jsonl", "sanitize.jsonl"] {
        let (count, mut bad) = run_file(name);
        assert!(count > 0, "{name} has no cases");
        total += count;
        failures.append(&mut bad);
    }
    assert!(
        failures.is_empty(),
        "{} of {total} cases differ from torch:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
