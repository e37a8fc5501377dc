//! Simulated time converts between units in one place, `src/sim_time.rs`. This test reads
//! every other file of `src/` (unit-test modules, test files and comments left out) and fails
//! on a multiplication or division by 1 000, 1 000 000 or 1 000 000 000, integer or float
//! (`1e6`, `1000.0`): the signature of a hand-written unit conversion. Files whose such
//! products are not simulated time are listed below with the reason. It also holds the
//! typed parts of the core to their types: no moment as plain microseconds in the trace and
//! the checks, no span or moment as a plain `*_us` integer in the rendezvous, the agent and
//! the store.

mod common;
use common::rust_files;

use std::path::Path;

/// Files that may multiply or divide by powers of 1 000, each with why.
const ALLOWED: &[(&str, &str)] = &[
    (
        "store/cost.rs",
        "CPU cost rates in picoseconds per byte, scaled to the nanoseconds a request costs",
    ),
    (
        "bench/mod.rs",
        "the harness's own wall-clock measurements, and rates per simulated second of the \
         report's `sim_time_us` (the bench output is an edge that keeps its own units)",
    ),
    (
        "bench/torch.rs",
        "the harness's own wall-clock measurements, which are not simulated time",
    ),
    (
        "bench/goodput.rs",
        "the harness's own wall-clock measurements, which are not simulated time",
    ),
    (
        "job/eval.rs",
        "rounds a loss bias to six decimals, a ratio and not a time",
    ),
    (
        "report/goodput.rs",
        "rounds the productive share of wall time to six decimals, a ratio and not a time",
    ),
    (
        "report/compare.rs",
        "spreads an ETTR ratio over a notional second of microseconds, a ratio and not a time",
    ),
    (
        "report/html/compare_page.rs",
        "shows a mean over runs in seconds: a float mean of many runs, not a span of one",
    ),
];

/// The file's code lines outside its unit-test module, each with its line number, comments
/// cut off.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut code = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let trimmed = line.trim_start();
        // The unit tests sit in one `#[cfg(test)] mod … {` block at the end of a file.
        let opens_test_block = lines.peek().is_some_and(|(_, n)| {
            n.trim_start().starts_with("mod ") && n.trim_end().ends_with('{')
        });
        if trimmed.starts_with("#[cfg(test)]") && opens_test_block {
            break;
        }
        let without_comment = line.split("//").next().unwrap_or("");
        code.push((i + 1, without_comment.to_owned()));
    }
    code
}

/// Whether `line` multiplies or divides by 1 000, 1 000 000 or 1 000 000 000 (with or
/// without digit separators, integer or float, written out or with an exponent).
fn converts_units(line: &str) -> bool {
    let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    compact.match_indices(['*', '/']).any(|(at, _)| {
        let literal: String = compact[at + 1..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || matches!(c, '_' | '.' | 'e' | 'E'))
            .filter(|c| *c != '_')
            .collect();
        // `1_000.max(x)` reads as `1000.`; an exponent's digits follow its `e`.
        let digits: String = literal.chars().take_while(char::is_ascii_digit).collect();
        [literal.trim_end_matches('.'), digits.as_str()]
            .iter()
            .any(|text| matches!(text.parse::<f64>(), Ok(v) if v == 1e3 || v == 1e6 || v == 1e9))
    })
}

#[test]
fn time_units_convert_only_in_sim_time() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in &files {
        let relative = file
            .strip_prefix(&src)
            .expect("under src")
            .to_string_lossy()
            .replace('\\', "/");
        let name = file.file_name().unwrap().to_string_lossy();
        let skipped = relative == "sim_time.rs"
            || name.ends_with("tests.rs")
            || name == "testkit.rs"
            || ALLOWED.iter().any(|(allowed, _)| *allowed == relative);
        if skipped {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("a source file");
        for (line, code) in code_lines(&text) {
            if converts_units(&code) {
                found.push(format!("src/{relative}:{line}: {}", code.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "unit conversions outside src/sim_time.rs (use SimInstant/SimDuration, or list the \
         file in ALLOWED with why it is not simulated time):\n{}\n\
         reproduce: cargo test --release --test time_units",
        found.join("\n")
    );
}

/// Directories of `src/` whose moments are [`SimInstant`]s: the trace and the checks read
/// every moment as one, and only serialization writes it as microseconds.
///
/// [`SimInstant`]: trainsim::sim_time::SimInstant
const TYPED_MOMENTS: &[&str] = &["trace", "check"];

/// Whether `line` declares a moment as plain microseconds (`at_us: u64`, `since_at_us: u64`).
fn untyped_moment(line: &str) -> bool {
    let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    compact.contains("at_us:u64")
}

/// Every code line of the non-test files under `src/<dir>` for each of `dirs`: the file
/// (relative to `src/`, with `/`), the line number and the code.
fn code_in(dirs: &[&str]) -> Vec<(String, usize, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut lines = Vec::new();
    for dir in dirs {
        let mut files = Vec::new();
        rust_files(&src.join(dir), &mut files);
        files.sort();
        for file in &files {
            let name = file.file_name().unwrap().to_string_lossy();
            if name.ends_with("tests.rs") || name == "testkit.rs" {
                continue;
            }
            let text = std::fs::read_to_string(file).expect("a source file");
            let relative = file
                .strip_prefix(&src)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            for (line, code) in code_lines(&text) {
                lines.push((relative.clone(), line, code));
            }
        }
    }
    lines
}

#[test]
fn the_trace_and_the_checks_hold_moments_as_sim_instants() {
    let found: Vec<String> = code_in(TYPED_MOMENTS)
        .into_iter()
        .filter(|(_, _, code)| untyped_moment(code))
        .map(|(file, line, code)| format!("src/{file}:{line}: {}", code.trim()))
        .collect();
    assert!(
        found.is_empty(),
        "moments as plain microseconds in the trace or the checks (hold a SimInstant; \
         serialize it with sim_time::whole_us):\n{}\n\
         reproduce: cargo test --release --test time_units",
        found.join("\n")
    );
}

#[test]
fn the_guard_sees_the_conversions_it_forbids() {
    assert!(untyped_moment("    pub at_us: u64,"));
    assert!(untyped_moment("fn f(killed_at_us : u64)"));
    assert!(!untyped_moment("    pub at: SimInstant,"));
    assert!(!untyped_moment("    pub stall_us: u64,"));
    assert!(converts_units("let ms = at_us / 1_000;"));
    assert!(converts_units("let us = s * 1_000_000;"));
    assert!(converts_units("x *1000"));
    assert!(converts_units("ns / 1_000_000_000"));
    assert!(converts_units("secs * 1000.0"));
    assert!(converts_units("(end_us - start_us) as f64 / 1e6"));
    assert!(converts_units("bits / bps as f64 * 1e9"));
    assert!(converts_units("x * 1.0e3"));
    assert!(converts_units("n * 1_000.max(k)"));
    assert!(!converts_units("let seed = -1e30;"));
    assert!(!converts_units("x * 1e30"));
    assert!(!converts_units("x / 1e5"));
    assert!(!converts_units("let n = 1_000 + k * 7;"));
    assert!(!converts_units("x / 10_000"));
    assert!(!converts_units("x * 100"));
    let lines = code_lines("a * 1_000 // b\n// c / 1_000\n#[cfg(test)]\nmod tests {\nd * 1_000\n");
    assert_eq!(
        lines,
        vec![(1, "a * 1_000 ".to_owned()), (2, String::new())]
    );
}

#[test]
fn every_allowed_file_exists_and_still_needs_its_place() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (file, reason) in ALLOWED {
        let text = std::fs::read_to_string(src.join(file))
            .unwrap_or_else(|e| panic!("src/{file} is allowed ({reason}) but unreadable: {e}"));
        assert!(
            code_lines(&text)
                .iter()
                .any(|(_, code)| converts_units(code)),
            "src/{file} is allowed ({reason}) but no longer converts: take it off ALLOWED"
        );
    }
}

/// Directories of `src/` whose spans and moments are [`SimDuration`]s and [`SimInstant`]s.
/// (`world/` and `reader/` still count some in plain microseconds.)
///
/// [`SimDuration`]: trainsim::sim_time::SimDuration
/// [`SimInstant`]: trainsim::sim_time::SimInstant
const TYPED_SPANS: &[&str] = &["rendezvous", "agent", "store", "job", "world", "reader"];

/// Plain microsecond integers the typed directories keep, each with why: the state's wire
/// format, written as torch writes it. A node's clock readings (`*_utc_us`, `*_mono_us`,
/// signed) are torch's own unit and need no entry.
const UNTYPED_ALLOWED: &[(&str, &str, &str)] = &[
    (
        "rendezvous/decoded_states.rs",
        "oldest_heartbeat_us",
        "the oldest heartbeat stamp of a decoded state, in the state's wire unit",
    ),
    (
        "world/quiet.rs",
        "wall_offset_us",
        "a writer's UTC clock minus simulated time: a signed offset of clock readings",
    ),
    (
        "world/state.rs",
        "offset_us",
        "a clock-skew fault's step, signed, in the unit of the readings it moves",
    ),
    (
        "world/time.rs",
        "duration_us",
        "the tests' shorthand sleep; no simulation code sleeps on it",
    ),
];

/// The `name_us` a line declares as a plain integer (`name_us: u64`, `Option<i64>`, …) in a
/// field or a parameter, unless it is a node's signed clock reading.
fn untyped_span(line: &str) -> Option<String> {
    let mut found = None;
    for (at, _) in line.match_indices("_us") {
        let Some(ty) = line[at + 3..].trim_start().strip_prefix(':') else {
            continue;
        };
        let ty: String = ty.chars().filter(|c| !c.is_whitespace()).collect();
        let stem: Vec<char> = line[..at]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let stem: String = stem.into_iter().rev().collect();
        let signed = ["i64", "Option<i64>"].iter().any(|t| ty.starts_with(t));
        let plain = signed || ["u64", "Option<u64>"].iter().any(|t| ty.starts_with(t));
        let clock_reading = signed && (stem.ends_with("_utc") || stem.ends_with("_mono"));
        if plain && !clock_reading && !stem.is_empty() {
            found = Some(format!("{stem}_us"));
        }
    }
    found
}

#[test]
fn the_core_holds_spans_and_moments_as_types() {
    let mut found = Vec::new();
    for (file, line, code) in code_in(TYPED_SPANS) {
        let Some(untyped) = untyped_span(&code) else {
            continue;
        };
        let allowed = UNTYPED_ALLOWED
            .iter()
            .any(|(f, n, _)| *f == file && *n == untyped);
        if !allowed {
            found.push(format!("src/{file}:{line}: {}", code.trim()));
        }
    }
    assert!(
        found.is_empty(),
        "spans or moments as plain microseconds (hold a SimDuration or SimInstant, or list \
         a wire field in UNTYPED_ALLOWED with why):\n{}\n\
         reproduce: cargo test --release --test time_units",
        found.join("\n")
    );
}

#[test]
fn the_span_guard_sees_plain_microseconds() {
    assert_eq!(
        untyped_span("    pub join_timeout_us: u64,"),
        Some("join_timeout_us".into())
    );
    assert_eq!(
        untyped_span("fn f(a: u32, interval_us : u64) {"),
        Some("interval_us".into())
    );
    assert_eq!(
        untyped_span("    last_seen_us: Option<i64>,"),
        Some("last_seen_us".into())
    );
    assert_eq!(untyped_span("    now_utc_us: i64,"), None);
    assert_eq!(untyped_span("    deadline_mono_us: Option<i64>,"), None);
    assert_eq!(
        untyped_span("    deadline_mono_us: u64,"),
        Some("deadline_mono_us".into()),
        "a clock reading is signed"
    );
    assert_eq!(untyped_span("    pub join_timeout: SimDuration,"), None);
}

#[test]
fn every_untyped_allowance_still_names_a_declaration() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (file, name, reason) in UNTYPED_ALLOWED {
        let text = std::fs::read_to_string(src.join(file))
            .unwrap_or_else(|e| panic!("src/{file} is allowed ({reason}) but unreadable: {e}"));
        assert!(
            code_lines(&text)
                .iter()
                .any(|(_, code)| untyped_span(code).as_deref() == Some(*name)),
            "src/{file}: {name} is allowed ({reason}) but no longer declared: take it off"
        );
    }
}
