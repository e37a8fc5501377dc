//! Scenario files: the TOML schema, validation, and errors located by file, line and column.
//!
//! `parse` runs in three steps: serde reads the text into `raw` types (syntax errors and
//! unknown keys carry the TOML span), `validate` fills defaults and checks every rule in one
//! place, and a failure's field path is looked up in a span-carrying parse of the same text
//! (`locate`) to name its line and column. `to_toml` writes a scenario back.

pub mod cluster;
pub mod emit;
pub mod failure_draw;
pub mod failures;
pub mod faults;
pub mod job;
pub mod limits;
pub mod locate;
pub mod model;
pub mod node;
pub mod raw;
pub mod schema;
pub mod torch_defaults;
pub mod units;
pub mod validate;
pub mod values;

pub use emit::to_toml;
pub use model::Scenario;

use locate::{FieldPath, Seg};
use std::io::Read;
use std::path::Path;
use toml_edit::ImDocument;

/// A scenario that cannot be read: it names the file, line, column and field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}:{column}: {field}: {message}")]
pub struct ScenarioError {
    pub file: String,
    /// 1-based; 0 only when the file itself cannot be read.
    pub line: usize,
    /// 1-based, in characters; 0 only when the file itself cannot be read.
    pub column: usize,
    /// The field path, like `rendezvous.min_nodes` or `faults[2].node`; `syntax` for TOML
    /// syntax errors and `(file)` when the file cannot be read.
    pub field: String,
    pub message: String,
}

/// Reads and validates a scenario file.
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    let file = path.display().to_string();
    let unreadable = |message: String| ScenarioError {
        file: file.clone(),
        line: 0,
        column: 0,
        field: "(file)".into(),
        message: format!("cannot read: {message}"),
    };
    let handle = std::fs::File::open(path).map_err(|e| unreadable(e.to_string()))?;
    let mut text = String::new();
    // Read one byte past the bound so an oversized file is refused without reading it all.
    handle
        .take(limits::FILE_BYTES_MAX + 1)
        .read_to_string(&mut text)
        .map_err(|e| unreadable(e.to_string()))?;
    if text.len() as u64 > limits::FILE_BYTES_MAX {
        return Err(unreadable(format!(
            "the file is larger than {} bytes",
            limits::FILE_BYTES_MAX
        )));
    }
    parse(&text, &file)
}

/// A scenario with every default and the given name: what a file holding only `name` gives.
pub fn default_scenario(name: &str) -> Scenario {
    let raw = raw::RawScenario {
        name: Some(name.to_string()),
        ..raw::RawScenario::default()
    };
    match validate::validate(&raw) {
        Ok(s) => s,
        // The defaults are valid for any name the bounds allow; a name outside them is the
        // caller's bug, so fall back to a fixed one rather than fail.
        Err(_) => default_scenario("scenario"),
    }
}

/// Parses and validates scenario text; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Scenario, ScenarioError> {
    let raw: raw::RawScenario = toml::from_str(text).map_err(|e| toml_error(text, file, &e))?;
    let issue = match validate::validate(&raw) {
        Ok(s) => return Ok(s),
        Err(issue) => issue,
    };
    let offset = match ImDocument::parse(text) {
        Ok(doc) => locate::locate(&doc, &issue.path, false),
        Err(_) => 0,
    };
    Err(located(text, file, offset, &issue.path, issue.message))
}

fn located(
    text: &str,
    file: &str,
    offset: usize,
    path: &FieldPath,
    message: String,
) -> ScenarioError {
    let (line, column) = locate::line_col(text, offset);
    let field = if path.0.is_empty() {
        "(top level)".to_string()
    } else {
        path.to_string()
    };
    ScenarioError {
        file: file.to_string(),
        line,
        column,
        field,
        message,
    }
}

/// A TOML syntax error (located by the parser) or a serde error (unknown key, wrong type),
/// whose span is mapped back to the field it falls in.
fn toml_error(text: &str, file: &str, e: &toml::de::Error) -> ScenarioError {
    let message = one_line(e.message());
    let offset = e.span().map_or(0, |s| s.start);
    let doc = match ImDocument::parse(text) {
        Ok(doc) => doc,
        Err(syntax) => {
            let offset = syntax.span().map_or(offset, |s| s.start);
            let (line, column) = locate::line_col(text, offset);
            let message = one_line(syntax.message());
            return ScenarioError {
                file: file.to_string(),
                line,
                column,
                field: "syntax".into(),
                message,
            };
        }
    };
    let mut path = locate::path_at(&doc, offset);
    let mut offset = offset;
    if let Some(key) = quoted_after(&message, "unknown field `") {
        if path.0.last() != Some(&Seg::Key(key.clone())) {
            path = path.key(&key);
            offset = locate::locate(&doc, &path, true);
        }
    }
    located(text, file, offset, &path, message)
}

/// A multi-line parser message on one line, so each error is one line of output.
fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The text between `prefix` and the next backquote, e.g. the field of "unknown field `x`".
fn quoted_after(message: &str, prefix: &str) -> Option<String> {
    let rest = &message[message.find(prefix)? + prefix.len()..];
    Some(rest[..rest.find('`')?].to_string())
}

#[cfg(test)]
mod tests;
