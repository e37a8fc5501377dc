//! File output every command shares: writes that a reader never sees half done.

use std::io::{self, Write};
use std::path::Path;

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename,
/// so a CI job that reads the file never sees half of it.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // The pid and a count of this process's writes keep two concurrent writers of the same
    // path (two processes, or two threads of one) off each other's temp file.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temp = dir.join(format!(
        ".{}.{}.{write}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = std::fs::File::create(&temp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    let result = written.and_then(|()| std::fs::rename(&temp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_of_one_process_writing_the_same_path_all_succeed() {
        let dir = std::env::temp_dir().join(format!("trainsim-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        let path = dir.join("same.txt");
        let writers: Vec<_> = (0..8)
            .map(|i| {
                let path = path.clone();
                std::thread::spawn(move || {
                    (0..50).try_for_each(|_| write_atomically(&path, format!("{i}").as_bytes()))
                })
            })
            .collect();
        for writer in writers {
            writer.join().expect("no panic").expect("every write lands");
        }
        let text = std::fs::read_to_string(&path).expect("written");
        assert!(text.parse::<u32>().is_ok_and(|i| i < 8), "{text}");
        std::fs::remove_dir_all(&dir).expect("cleaned up");
    }
}
