//! Simulated time converts between units in one place, `src/sim_time.rs`. This test reads
//! every other file of `src/` (unit-test modules, test files and comments left out) and fails
//! on a multiplication or division by 1 000, 1 000 000 or 1 000 000 000: the signature of a
//! hand-written unit conversion. Files whose such products are not simulated time are listed
//! below with the reason.

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
        "the harness's own wall-clock measurements, which are not simulated time",
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
/// without digit separators, integer or float).
fn converts_units(line: &str) -> bool {
    let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    compact.match_indices(['*', '/']).any(|(at, _)| {
        let literal: String = compact[at + 1..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '_')
            .filter(|c| *c != '_')
            .collect();
        matches!(literal.as_str(), "1000" | "1000000" | "1000000000")
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

#[test]
fn the_trace_and_the_checks_hold_moments_as_sim_instants() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for dir in TYPED_MOMENTS {
        let mut files = Vec::new();
        rust_files(&src.join(dir), &mut files);
        files.sort();
        for file in &files {
            let name = file.file_name().unwrap().to_string_lossy();
            if name.ends_with("tests.rs") || name == "testkit.rs" {
                continue;
            }
            let text = std::fs::read_to_string(file).expect("a source file");
            let relative = file.strip_prefix(&src).expect("under src").display();
            for (line, code) in code_lines(&text) {
                if untyped_moment(&code) {
                    found.push(format!("src/{relative}:{line}: {}", code.trim()));
                }
            }
        }
    }
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
