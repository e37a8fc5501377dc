//! The documented sample outputs cannot drift from the binary: every ```console block after
//! a `<!-- runnable … -->` comment in README.md and docs/ is run, each `$ trainsim …` line
//! against the built binary, and the lines shown must be in its output.
//!
//! Shown lines follow each other in the output as they do in the block, except across a
//! line that is `…` alone (any number of lines left out). A `…` inside a line stands for
//! text left out there. The first shown line may come anywhere in the output.

mod common;
use common::trainsim_command;

/// The files whose runnable blocks are checked.
const DOCUMENTS: [&str; 3] = ["README.md", "docs/reports.md", "docs/ci.md"];
const MARKER: &str = "<!-- runnable";
const ELLIPSIS: &str = "…";

/// One `$ trainsim …` line and the output lines shown under it.
#[derive(Debug)]
struct Example {
    document: &'static str,
    command: String,
    shown: Vec<String>,
}

/// Every example in the runnable blocks of `document`.
fn examples(document: &'static str) -> Vec<Example> {
    let text = std::fs::read_to_string(document).expect("the document exists");
    let mut examples = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if !line.starts_with(MARKER) {
            continue;
        }
        assert_eq!(
            lines.next(),
            Some("```console"),
            "{document}: a runnable marker is followed by a ```console block"
        );
        for line in lines.by_ref().take_while(|l| *l != "```") {
            match line.strip_prefix("$ ") {
                Some(command) => examples.push(Example {
                    document,
                    command: command.to_owned(),
                    shown: Vec::new(),
                }),
                None => examples
                    .last_mut()
                    .unwrap_or_else(|| panic!("{document}: a runnable block starts with `$ `"))
                    .shown
                    .push(line.to_owned()),
            }
        }
    }
    examples
}

/// Whether `actual` is what `shown` shows: equal, or equal but for the text each `…`
/// stands for.
fn matches(shown: &str, actual: &str) -> bool {
    if shown == actual {
        return true;
    }
    let pieces: Vec<&str> = shown.split(ELLIPSIS).collect();
    if pieces.len() < 2 {
        return false;
    }
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if !actual.starts_with(first) || !actual[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &actual[first.len()..actual.len() - last.len()];
    for piece in &pieces[1..pieces.len() - 1] {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    true
}

/// The first shown line that is not where the block says it is, if any.
fn first_mismatch(shown: &[String], output: &[&str]) -> Option<String> {
    let mut cursor = 0;
    let mut gap = true;
    for line in shown {
        if line.trim() == ELLIPSIS {
            gap = true;
            continue;
        }
        let found = match gap {
            true => (cursor..output.len()).find(|&i| matches(line, output[i])),
            false => (cursor < output.len() && matches(line, output[cursor])).then_some(cursor),
        };
        match found {
            Some(i) => cursor = i + 1,
            None => return Some(line.clone()),
        }
        gap = false;
    }
    None
}

fn run(example: &Example) -> String {
    assert!(
        !example.command.contains(['\'', '"', '|', '>', '<', '*']),
        "{}: a runnable command is plain words: {}",
        example.document,
        example.command
    );
    // A file the block writes under /tmp goes to this test process's own directory, so
    // two suites running at once on one machine never share a part file.
    let private = std::env::temp_dir().join(format!("trainsim-readme-{}", std::process::id()));
    std::fs::create_dir_all(&private).expect("a private temporary directory");
    let private = format!("{}/", private.display());
    let mut words = example.command.split_whitespace();
    assert_eq!(words.next(), Some("trainsim"), "{}", example.command);
    let words: Vec<String> = words.map(|w| w.replace("/tmp/", &private)).collect();
    let out = trainsim_command()
        .args(words)
        .output()
        .expect("the binary runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn every_runnable_example_shows_what_the_binary_prints() {
    let all: Vec<Example> = DOCUMENTS.into_iter().flat_map(examples).collect();
    assert!(
        all.iter().any(|e| e.document == "README.md"),
        "README.md has a runnable example"
    );
    for example in &all {
        let output = run(example);
        let lines: Vec<&str> = output.lines().collect();
        if let Some(line) = first_mismatch(&example.shown, &lines) {
            panic!(
                "{}: `$ {}` no longer prints, where the block shows it:\n{line}\n\nIt prints:\n{output}",
                example.document, example.command
            );
        }
    }
}

#[test]
fn the_matcher_keeps_order_and_adjacency() {
    let output = ["a", "b 1 c", "d", "e"];
    let shown = |lines: &[&str]| lines.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    assert_eq!(first_mismatch(&shown(&["a", "b … c", "d"]), &output), None);
    assert_eq!(first_mismatch(&shown(&["b 1 c", "…", "e"]), &output), None);
    // Adjacent in the block means adjacent in the output.
    assert_eq!(
        first_mismatch(&shown(&["a", "d"]), &output),
        Some("d".to_owned())
    );
    assert_eq!(
        first_mismatch(&shown(&["d", "…", "a"]), &output),
        Some("a".to_owned())
    );
    assert!(!matches("b … x", "b 1 c"));
    assert!(matches("… c", "b 1 c"));
}
