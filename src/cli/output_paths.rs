//! Output paths checked before any simulation starts: a report that cannot be written is a
//! usage error (exit 2) at once, not after an hour of runs.
//!
//! The check writes and removes a probe file beside the output, which is the only way to
//! know a directory takes new files (permissions, read-only mounts, quotas of zero).

use std::path::Path;

/// Checks that `path` can be written as a file: its directory exists and takes new files,
/// and `path` is not a directory. `flag` names the option in the message.
pub fn check_file(flag: &str, path: &Path) -> Result<(), String> {
    let shown = path.display();
    if path.is_dir() {
        return Err(format!("{flag} {shown}: is a directory, not a file"));
    }
    let Some(name) = path.file_name() else {
        return Err(format!("{flag} {shown}: not a file name"));
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(format!(
            "{flag} {shown}: the directory {} does not exist",
            dir.display()
        ));
    }
    let probe = dir.join(format!(
        ".{}.{}.probe",
        name.to_string_lossy(),
        std::process::id()
    ));
    probe_writes(flag, path, &probe)
}

/// Checks that `dir` can hold new files, creating it (and its parents) when it is missing,
/// as the command would anyway.
pub fn check_dir(flag: &str, dir: &Path) -> Result<(), String> {
    let shown = dir.display();
    if dir.exists() && !dir.is_dir() {
        return Err(format!("{flag} {shown}: is a file, not a directory"));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{flag} {shown}: cannot create it: {e}"))?;
    let probe = dir.join(format!(".trainsim.{}.probe", std::process::id()));
    probe_writes(flag, dir, &probe)
}

/// Creates and removes `probe`; an error names the option and the path it was given.
fn probe_writes(flag: &str, given: &Path, probe: &Path) -> Result<(), String> {
    std::fs::File::create(probe)
        .map_err(|e| format!("{flag} {}: cannot write there: {e}", given.display()))?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_directories_and_directories_as_files_are_refused() {
        let missing = Path::new("/nonexistent-trainsim-dir/x.html");
        let message = check_file("--html", missing).unwrap_err();
        assert!(message.starts_with("--html /nonexistent-trainsim-dir/x.html: "));
        assert!(message.contains("does not exist"), "{message}");
        let tmp = std::env::temp_dir();
        assert!(check_file("--trace", &tmp)
            .unwrap_err()
            .contains("is a directory"));
        let file = tmp.join(format!("trainsim-probe-{}.json", std::process::id()));
        assert_eq!(check_file("--trace", &file), Ok(()));
        assert!(!file.exists(), "the check leaves nothing behind");
    }

    #[test]
    fn an_output_directory_is_created_and_must_not_be_a_file() {
        let base = std::env::temp_dir().join(format!("trainsim-outdir-{}", std::process::id()));
        let dir = base.join("pages");
        assert_eq!(check_dir("--html", &dir), Ok(()));
        assert!(dir.is_dir());
        let file = base.join("plain");
        std::fs::write(&file, "x").expect("write");
        assert!(check_dir("--html", &file)
            .unwrap_err()
            .contains("is a file"));
        let _ = std::fs::remove_dir_all(&base);
    }
}
