//! The host's Python sources, carried in the binary and written out once per content, so a
//! `trainsim` binary runs torch's control plane from anywhere, with no checkout beside it.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The package's files, by name, as the repository holds them in `python/trainsim_torchplane/`.
const FILES: &[(&str, &str)] = &[
    (
        "__init__.py",
        include_str!("../../python/trainsim_torchplane/__init__.py"),
    ),
    (
        "fibers.py",
        include_str!("../../python/trainsim_torchplane/fibers.py"),
    ),
    (
        "host.py",
        include_str!("../../python/trainsim_torchplane/host.py"),
    ),
    (
        "observe.py",
        include_str!("../../python/trainsim_torchplane/observe.py"),
    ),
    (
        "overlay.py",
        include_str!("../../python/trainsim_torchplane/overlay.py"),
    ),
    (
        "seam.py",
        include_str!("../../python/trainsim_torchplane/seam.py"),
    ),
    (
        "store.py",
        include_str!("../../python/trainsim_torchplane/store.py"),
    ),
    (
        "workers.py",
        include_str!("../../python/trainsim_torchplane/workers.py"),
    ),
];

/// The sources' content hash, hex: the name of the folder they are written to.
fn content_hash() -> String {
    let mut digest = Sha256::new();
    for (name, text) in FILES {
        digest.update(name.as_bytes());
        digest.update([0]);
        digest.update(text.as_bytes());
        digest.update([0]);
    }
    let bytes = digest.finalize();
    bytes.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Where the sources go: `$TRAINSIM_CACHE`, else `$XDG_CACHE_HOME/trainsim`, else
/// `~/.cache/trainsim`, else the system's temporary folder.
fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("TRAINSIM_CACHE") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Path::new(&dir).join("trainsim");
    }
    if let Some(home) = std::env::var_os("HOME") {
        return Path::new(&home).join(".cache").join("trainsim");
    }
    std::env::temp_dir().join("trainsim")
}

/// The host script's path, its package written out first if this build's is not there yet.
pub fn host_script() -> std::io::Result<PathBuf> {
    let package = cache_root()
        .join(format!("torchplane-{}", content_hash()))
        .join("trainsim_torchplane");
    let script = package.join("host.py");
    let complete = FILES.iter().all(|(name, text)| {
        std::fs::read_to_string(package.join(name)).is_ok_and(|on_disk| on_disk == *text)
    });
    if !complete {
        std::fs::create_dir_all(&package)?;
        for (name, text) in FILES {
            crate::files::write_atomically(&package.join(name), text.as_bytes())?;
        }
    }
    Ok(script)
}
