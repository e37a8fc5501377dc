//! Feeds random and mutated text to the scenario parser: it must never panic, every error
//! must point at a line and column (≥ 1), and whatever parses must round-trip through
//! `to_toml`. `TRAINSIM_PARSER_FUZZ_CASES` sets the number of cases per property.

use proptest::prelude::*;
use proptest::test_runner::Config;
use trainsim::scenario::{parse, to_toml};

/// A valid scenario using every section and most fault kinds, as the seed for mutations.
const SEED_SCENARIO: &str = r#"name = "fuzz seed"
description = "every section"
seed = 7
time_limit = "1h"

[cluster]
nodes = 3
spare_nodes = 1
gpus_per_node = 4
gpu = "a100"
store = "node-0"
clock_skew = { node-2 = "-3s" }

[network]
latency = ["1ms", "5ms"]
loss = 0.01
bandwidth = "800Mbps"

[rendezvous]
min_nodes = 2
max_nodes = 4
join_timeout = "600s"
last_call_timeout = "30s"
close_timeout = "30s"
heartbeat_timeout = "5s"
keep_alive_interval = "5s"
keep_alive_max_attempt = 3
fixes = []

[agent]
nproc_per_node = 4
max_restarts = 3
monitor_interval = "0.1s"
exit_barrier_timeout = "300s"

[job]
steps = 100
step_time = "200ms"
model_size = "512MiB"
checkpoint_every = 10

[job.dataset]
len = 1000
complexity = { dist = "lognormal", median = 10.0, sigma = 0.5 }

[job.sampler]
kind = "load_balancing"
shuffle = true
seed = 3
drop_last = true
random_level = 0.5
batch_size = 16

[reader]
workers = 2
files = 4
records_per_file = 10
batch_size = 12
broken_files = [1]
corrupt_records = [[2, 3]]

[[faults]]
at = "45s"
kind = "kill"
node = "node-2"

[[faults]]
at = "50s"
kind = "start"
node = "node-3"

[[faults]]
at = "60s"
kind = "partition"
groups = [["node-0", "node-1"], ["node-3"]]

[[faults]]
at = "70s"
kind = "latency"
latency = ["10ms", "20ms"]
duration = "10s"

[[faults]]
at = "80s"
kind = "gpu_slow"
node = "node-1"
gpu = 2
factor = 3.0
duration = "1m"

[[faults]]
at = "90s"
kind = "worker_crash"
node = "node-0"
local_rank = 1
exit_code = 1

[expect]
outcome = "succeeded"
rounds = { min = 1, max = 4 }
restarts = { node-2 = 1 }
final_world_size = 3
violations = ["rendezvous.liveness"]
"#;

/// Cases per property: `TRAINSIM_PARSER_FUZZ_CASES`, else 34,000, so the three properties
/// feed the parser over 100,000 inputs per run, in seconds in release.
fn config() -> Config {
    let cases = std::env::var("TRAINSIM_PARSER_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(34_000);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Runs the parser on `text` and checks the properties.
fn check(text: &str) -> Result<(), TestCaseError> {
    match parse(text, "fuzz.toml") {
        Err(e) => {
            prop_assert!(e.line >= 1 && e.column >= 1, "unlocated error: {}", e);
            prop_assert!(e.to_string().starts_with("fuzz.toml:"), "{}", e);
            prop_assert!(!e.field.is_empty(), "{}", e);
        }
        Ok(s) => {
            let again = parse(&to_toml(&s), "again.toml");
            prop_assert_eq!(again, Ok(s), "round trip of:\n{}", text);
        }
    }
    Ok(())
}

/// One edit of the seed scenario's lines.
#[derive(Debug, Clone)]
enum Edit {
    Delete(usize),
    Duplicate(usize),
    Swap(usize, usize),
    Flip(usize, usize, char),
    Insert(usize, String),
    HugeNumber(usize, String),
}

fn edit() -> impl Strategy<Value = Edit> {
    let junk = prop_oneof![
        Just("[cluster]".to_string()),
        Just("[[faults]]".to_string()),
        Just("kind = \"heal\"".to_string()),
        Just("at = \"-1s\"".to_string()),
        Just("nodes = 0".to_string()),
        Just("x = { y = [[[[1]]]] }".to_string()),
        "[a-z_.]{1,12} = [0-9\"a-z]{0,8}",
        any::<String>(),
    ];
    let huge = prop_oneof![
        Just("9223372036854775807".to_string()),
        Just("18446744073709551616".to_string()),
        Just("1e308".to_string()),
        Just("nan".to_string()),
        Just("-inf".to_string()),
        Just("\"99999999999999h\"".to_string()),
        "[0-9]{10,25}",
    ];
    prop_oneof![
        (0usize..200).prop_map(Edit::Delete),
        (0usize..200).prop_map(Edit::Duplicate),
        (0usize..200, 0usize..200).prop_map(|(a, b)| Edit::Swap(a, b)),
        (0usize..200, 0usize..40, any::<char>()).prop_map(|(l, c, ch)| Edit::Flip(l, c, ch)),
        (0usize..200, junk).prop_map(|(l, s)| Edit::Insert(l, s)),
        (0usize..200, huge).prop_map(|(l, s)| Edit::HugeNumber(l, s)),
    ]
}

fn apply(lines: &mut Vec<String>, edit: &Edit) {
    let n = lines.len().max(1);
    match edit {
        Edit::Delete(l) if !lines.is_empty() => {
            lines.remove(l % n);
        }
        Edit::Duplicate(l) if !lines.is_empty() => {
            let line = lines[l % n].clone();
            lines.insert(l % n, line);
        }
        Edit::Swap(a, b) if !lines.is_empty() => lines.swap(a % n, b % n),
        Edit::Flip(l, c, ch) if !lines.is_empty() => {
            let mut chars: Vec<char> = lines[l % n].chars().collect();
            if !chars.is_empty() {
                let at = c % chars.len();
                chars[at] = *ch;
            }
            lines[l % n] = chars.into_iter().collect();
        }
        Edit::Insert(l, s) => lines.insert(l % (lines.len() + 1), s.clone()),
        Edit::HugeNumber(l, s) if !lines.is_empty() => {
            // Replace the value of a `key = value` line with a huge or odd number.
            if let Some((key, _)) = lines[l % n].split_once(" = ") {
                lines[l % n] = format!("{key} = {s}");
            }
        }
        _ => {}
    }
}

#[test]
fn the_seed_scenario_is_valid() {
    let s = parse(SEED_SCENARIO, "seed.toml").unwrap();
    assert_eq!(parse(&to_toml(&s), "again.toml"), Ok(s));
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        check(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn random_toml_like_text_never_panics(text in "([a-z_.\\[\\]\" =0-9{},\n-]|node-|faults|cluster|kind){0,80}") {
        check(&text)?;
    }

    #[test]
    fn mutated_scenarios_never_panic(edits in proptest::collection::vec(edit(), 1..6)) {
        let mut lines: Vec<String> = SEED_SCENARIO.lines().map(str::to_string).collect();
        for e in &edits {
            apply(&mut lines, e);
        }
        check(&lines.join("\n"))?;
    }
}

#[test]
fn deep_nesting_and_huge_values_are_errors_not_crashes() {
    let deep_arrays = format!(
        "name = \"x\"\nx = {}1{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let deep_tables = format!(
        "name = \"x\"\nx = {}1{}\n",
        "{ a = ".repeat(10_000),
        " }".repeat(10_000)
    );
    let deep_keys = format!("name = \"x\"\n{} = 1\n", vec!["a"; 100_000].join("."));
    let long_list = format!(
        "name = \"x\"\n[job.dataset]\nlen = 3\ncomplexity = {{ dist = \"list\", values = [{}] }}\n",
        "1, ".repeat(100_000)
    );
    for text in [deep_arrays, deep_tables, deep_keys, long_list] {
        let e = parse(&text, "deep.toml").expect_err("refused");
        assert!(e.line >= 1 && e.column >= 1, "{e}");
    }
}
