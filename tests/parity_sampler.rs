//! Runs every public parity vector of the sampler kinds (torch RNG, samplers, rank
//! assignment) against the models; all must pass.

use std::path::PathBuf;

use trainsim::parity::{run_files, ParityReport};

fn vector_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/parity")
        .join(name)
}

/// Runs one file and fails with every mismatch listed.
fn assert_all_pass(name: &str, min_cases: usize) {
    let report: ParityReport = run_files(&[vector_file(name)]).expect("vector file is valid");
    let listing: Vec<String> = report.mismatches.iter().map(ToString::to_string).collect();
    assert!(
        listing.is_empty(),
        "{}\n{}",
        listing.join("\n"),
        report.summary()
    );
    assert!(
        report.passed >= min_cases,
        "{}: only {}",
        name,
        report.summary()
    );
}

#[test]
fn randperm_vectors() {
    assert_all_pass("randperm.jsonl", 60);
}

#[test]
fn randperm_digest_vectors_on_the_64_bit_path() {
    assert_all_pass("randperm_digest.jsonl", 1);
}

#[test]
fn randint_vectors() {
    assert_all_pass("randint.jsonl", 60);
}

#[test]
fn distributed_sampler_vectors() {
    assert_all_pass("distributed_sampler.jsonl", 60);
}

#[test]
fn load_balancing_sampler_vectors() {
    assert_all_pass("load_balancing_sampler.jsonl", 60);
}

#[test]
fn assign_ranks_vectors() {
    assert_all_pass("assign_ranks.jsonl", 17);
}

#[test]
fn rendezvous_kinds_reach_their_own_checker() {
    // A rendezvous case missing its fields is refused for those fields, not for its kind.
    let case = serde_json::json!({"kind": "rdzv_sanitize"});
    let message = serde_json::from_value::<trainsim::parity::Case>(case)
        .expect_err("no settings, no state")
        .to_string();
    assert!(!message.contains("unknown variant"), "{message}");
    assert!(message.contains("missing field"), "{message}");
}
