//! The house size limits, kept by a test: no function in `src/` or `tests/` over
//! `MAX_FUNCTION_LINES` lines (from its `fn` line to its closing brace) and no file over
//! `MAX_FILE_LINES`. The scan leans on rustfmt's layout: a body ends at the first line after
//! the `fn` line that starts with `}` at the `fn` line's own indentation.

mod common;
use common::rust_files;

use std::path::{Path, PathBuf};

const MAX_FUNCTION_LINES: usize = 70;
const MAX_FILE_LINES: usize = 600;

/// One function the scan found: its name, the 1-based line of its `fn`, and its length in
/// lines counting both the `fn` line and the closing brace's line.
#[derive(Debug, PartialEq)]
struct Function {
    name: String,
    line: usize,
    length_lines: usize,
}

/// The name a line declares when, past its visibility and qualifiers, it starts with `fn`.
fn declared_name(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    if let Some(after_pub) = rest.strip_prefix("pub") {
        rest = match after_pub.strip_prefix('(') {
            Some(scope) => scope.split_once(')')?.1,
            None => after_pub,
        }
        .trim_start();
    }
    loop {
        let before = rest;
        for qualifier in ["const ", "async ", "unsafe ", "default "] {
            rest = rest.strip_prefix(qualifier).unwrap_or(rest).trim_start();
        }
        if let Some(abi) = rest.strip_prefix("extern \"") {
            rest = abi.split_once('"')?.1.trim_start();
        }
        if rest == before {
            break;
        }
    }
    let rest = rest.strip_prefix("fn ")?;
    let name_end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    (name_end > 0).then(|| &rest[..name_end])
}

fn indentation(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Where the function whose `fn` is at `lines[start]` ends (an index into `lines`), or
/// `None` for a declaration without a body (a trait method's `fn …;`).
fn body_end(lines: &[&str], start: usize) -> Option<usize> {
    let signature_end = (start..lines.len()).find(|&i| {
        let code = lines[i].split("//").next().unwrap_or("").trim_end();
        code.contains('{') || code.ends_with(';')
    })?;
    let opening = lines[signature_end].split("//").next().unwrap_or("");
    if !opening.contains('{') {
        return None;
    }
    // A body opened and closed on one line: `fn zero() -> u32 { 0 }`.
    if opening.matches('{').count() == opening.matches('}').count() {
        return Some(signature_end);
    }
    let indent = indentation(lines[start]);
    (signature_end + 1..lines.len())
        .find(|&i| lines[i].trim_start().starts_with('}') && indentation(lines[i]) == indent)
}

/// Every function with a body in `text`, in the order they appear.
fn functions(text: &str) -> Vec<Function> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let Some(name) = declared_name(line) else {
            continue;
        };
        if let Some(end) = body_end(&lines, start) {
            found.push(Function {
                name: name.to_owned(),
                line: start + 1,
                length_lines: end - start + 1,
            });
        }
    }
    found
}

/// Every `.rs` file under `src/` and `tests/`, as (path under the package root, text).
fn sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("tests"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|file| {
            let shown = file.strip_prefix(root).unwrap().display().to_string();
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{shown}: {e}"));
            (shown, text)
        })
        .collect()
}

#[test]
fn no_function_is_over_the_limit() {
    let mut too_long = Vec::new();
    for (file, text) in sources() {
        for function in functions(&text) {
            if function.length_lines > MAX_FUNCTION_LINES {
                too_long.push(format!(
                    "{file}:{} {} ({} lines)",
                    function.line, function.name, function.length_lines
                ));
            }
        }
    }
    assert!(
        too_long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines (split each along a seam that explains \
         itself):\n{}\nreproduce: cargo test --release --test function_length",
        too_long.join("\n")
    );
}

#[test]
fn no_file_is_over_the_limit() {
    let too_long: Vec<String> = sources()
        .into_iter()
        .map(|(file, text)| (file, text.lines().count()))
        .filter(|(_, lines)| *lines > MAX_FILE_LINES)
        .map(|(file, lines)| format!("{file} ({lines} lines)"))
        .collect();
    assert!(
        too_long.is_empty(),
        "files over {MAX_FILE_LINES} lines (split each into modules):\n{}\n\
         reproduce: cargo test --release --test function_length",
        too_long.join("\n")
    );
}

/// A function of `body_lines` statements at `indent` spaces, declared by `declaration`.
fn synthetic(declaration: &str, indent: usize, body_lines: usize) -> String {
    let pad = " ".repeat(indent);
    let mut text = format!("{pad}{declaration} {{\n");
    for i in 0..body_lines {
        text.push_str(&format!("{pad}    let x{i} = \"{{\"; // }}\n"));
    }
    text.push_str(&format!("{pad}}}\n"));
    text
}

#[test]
fn the_scan_measures_synthetic_functions_exactly() {
    let mut text = String::from("//! sample\n");
    text.push_str(&synthetic("pub(crate) async fn long_one(a: u32)", 0, 73));
    text.push_str("trait Shape {\n    fn area(&self) -> u32;\n");
    text.push_str(&synthetic("fn sides(&self) -> u32", 4, 2));
    text.push_str("}\nimpl Shape for () {\n    fn area(&self) -> u32 { 0 }\n}\n");
    text.push_str("fn takes_pointer(f: fn(u32) -> u32) -> u32 {\n    f(1)\n}\n");
    let found = functions(&text);
    let expected = [
        ("long_one", 2, 75),
        ("sides", 79, 4),
        ("area", 85, 1),
        ("takes_pointer", 87, 3),
    ];
    let expected: Vec<Function> = expected
        .iter()
        .map(|(name, line, length_lines)| Function {
            name: (*name).to_owned(),
            line: *line,
            length_lines: *length_lines,
        })
        .collect();
    assert_eq!(found, expected);
}

#[test]
fn the_scan_finds_every_function_of_this_file() {
    let text = include_str!("function_length.rs");
    let names: Vec<String> = functions(text).into_iter().map(|f| f.name).collect();
    assert_eq!(
        names,
        [
            "declared_name",
            "indentation",
            "body_end",
            "functions",
            "sources",
            "no_function_is_over_the_limit",
            "no_file_is_over_the_limit",
            "synthetic",
            "the_scan_measures_synthetic_functions_exactly",
            "the_scan_finds_every_function_of_this_file",
        ]
    );
}
