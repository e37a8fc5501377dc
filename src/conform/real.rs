//! The real side: runs `conformance/driver.py` under the user's Python with torch and reads
//! back the signature it prints.
//!
//! Nothing here runs in `cargo test` against torch; the tests drive the same parser
//! (`conformance/signature.py`) on recorded logs instead.

use super::signature::Signature;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Why the real side could not run.
#[derive(Debug, thiserror::Error)]
pub enum RealError {
    /// No usable torch at the given interpreter (exit code 2).
    #[error("no torch at {python}: {message}")]
    NoTorch { python: String, message: String },
    /// The driver refused the file: a fault or setting the real machine cannot apply.
    #[error("{0}")]
    Refused(String),
    /// The driver could not be found or failed while running.
    #[error("the driver failed: {0}")]
    Driver(String),
}

/// The installed torch: its version and today's date, as the interpreter sees them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TorchInfo {
    pub version: String,
    pub date: String,
}

/// The driver script: `explicit`, else `conformance/driver.py` under the working
/// directory, else the one in this source tree.
pub fn driver_path(explicit: Option<&Path>) -> Result<PathBuf, RealError> {
    if let Some(path) = explicit {
        return if path.is_file() {
            Ok(path.to_path_buf())
        } else {
            Err(RealError::Driver(format!(
                "no driver at {}",
                path.display()
            )))
        };
    }
    let candidates = [
        PathBuf::from("conformance/driver.py"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/driver.py"),
    ];
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| RealError::Driver("conformance/driver.py not found: pass --driver".into()))
}

/// Asks `python` for torch's version; an interpreter without torch is [`RealError::NoTorch`].
pub fn torch_info(python: &Path) -> Result<TorchInfo, RealError> {
    let no_torch = |message: String| RealError::NoTorch {
        python: python.display().to_string(),
        message,
    };
    let output = Command::new(python)
        .args([
            "-c",
            "import datetime, torch, torch.distributed.run; \
             print(torch.__version__, datetime.date.today().isoformat())",
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| no_torch(e.to_string()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().last().unwrap_or("import failed").to_owned();
        return Err(no_torch(last));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut words = stdout.split_whitespace();
    match (words.next(), words.next()) {
        (Some(version), Some(date)) => Ok(TorchInfo {
            version: version.to_owned(),
            date: date.to_owned(),
        }),
        _ => Err(no_torch(format!("unexpected answer '{}'", stdout.trim()))),
    }
}

/// Whether the driver can run `file`: its refusal message otherwise.
pub fn check(python: &Path, driver: &Path, file: &Path) -> Result<(), RealError> {
    let output = Command::new(python)
        .arg(driver)
        .arg("check")
        .arg(file)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| RealError::Driver(e.to_string()))?;
    match output.status.code() {
        Some(0) => Ok(()),
        Some(2) => Err(RealError::Refused(
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        )),
        _ => Err(RealError::Driver(
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        )),
    }
}

/// What one real run gave: its signature, and the invariants its agents' join lines showed
/// violated (`observed` in `conformance/signature.py`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RealRun {
    pub signature: Signature,
    pub observed: Vec<String>,
}

/// Runs `file` once on real torch, keeping its logs in `out` (created; must not exist or be
/// empty), and returns what the run gave.
pub fn run(python: &Path, driver: &Path, file: &Path, out: &Path) -> Result<RealRun, RealError> {
    let output = Command::new(python)
        .arg(driver)
        .arg("run")
        .arg(file)
        .arg("--out")
        .arg(out)
        .arg("--python")
        .arg(python)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| RealError::Driver(e.to_string()))?;
    match output.status.code() {
        Some(0) => {}
        Some(2) => return Err(RealError::Refused(format!("{}: refused", file.display()))),
        code => {
            return Err(RealError::Driver(format!(
                "{} exited with {code:?} (logs in {})",
                file.display(),
                out.display()
            )))
        }
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    Ok(RealRun {
        signature: parse_signature(&stdout)?,
        observed: parse_observed(&stdout)?,
    })
}

/// The `observed` list of the signature the driver printed (empty when it has none).
pub fn parse_observed(stdout: &str) -> Result<Vec<String>, RealError> {
    #[derive(serde::Deserialize)]
    struct Observed {
        #[serde(default)]
        observed: Vec<String>,
    }
    let line = last_line(stdout)?;
    let o: Observed =
        serde_json::from_str(line).map_err(|e| RealError::Driver(format!("bad signature: {e}")))?;
    Ok(o.observed)
}

fn last_line(stdout: &str) -> Result<&str, RealError> {
    stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .ok_or_else(|| RealError::Driver("the driver printed no signature".into()))
}

/// Reads a signature the driver printed (its last non-empty line).
pub fn parse_signature(stdout: &str) -> Result<Signature, RealError> {
    let line = last_line(stdout)?;
    let mut signature: Signature =
        serde_json::from_str(line).map_err(|e| RealError::Driver(format!("bad signature: {e}")))?;
    // A signature saved before rounds were collapsed reads as one saved after.
    signature.rounds = super::signature::collapse_repeats(signature.rounds);
    Ok(signature)
}

/// Reads a signature saved by an earlier run (`signature.json` in its log directory).
pub fn saved_signature(out: &Path) -> Option<Signature> {
    let text = std::fs::read_to_string(out.join("signature.json")).ok()?;
    parse_signature(&text).ok()
}
