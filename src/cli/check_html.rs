//! `trainsim check --html DIR`: one page per run and an index, written after the suite ran.

use super::check::JobResult;
use crate::report::html::{index, IndexEntry};
use std::path::Path;

/// Writes each run's page (taking it out of its result) and `index.html` into `dir`.
/// `labels` are the runs' (file, seed), in the results' order.
pub(super) fn write_pages(
    dir: &Path,
    labels: &[(String, u64)],
    results: &mut [JobResult],
    several_seeds: bool,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut entries = Vec::new();
    for ((file, seed), result) in labels.iter().zip(results.iter_mut()) {
        let JobResult::Ran(report, page) = result else {
            continue;
        };
        let Some(page) = page.take() else { continue };
        let stem = Path::new(file)
            .file_stem()
            .map_or_else(|| "run".to_owned(), |s| s.to_string_lossy().into_owned());
        let name = if several_seeds {
            format!("{stem}.seed-{seed}.html")
        } else {
            format!("{stem}.html")
        };
        let path = dir.join(&name);
        super::write_atomically(&path, page.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        entries.push(IndexEntry::of(file, *seed, name, report));
    }
    let path = dir.join("index.html");
    super::write_atomically(&path, index(&entries).as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
