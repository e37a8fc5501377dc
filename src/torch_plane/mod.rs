//! torch's own elastic Python as a node's control plane: the ground truth beside the Rust model.
//!
//! A run whose options name a Python environment (`--torch PYTHON`, or `[torch] python` in the
//! scenario) gives every node torch's real `torchrun` instead of the model's agent: torch's
//! `torch.distributed.run.main`, its `LocalElasticAgent` and `DynamicRendezvousHandler` with
//! the c10d backend, unmodified, in one Python process (the *host*) per run. The seam sits
//! below torch's code (see `python/trainsim_torchplane/`): time, locks, threads, the store
//! client, `start_processes`, identity and chance are the simulated world's. Exactly one
//! piece of Python runs at a time: each Python thread is a simulated task that the simulator
//! resumes, and the host answers each resumption with the thread's next call into the world
//! (`host.py` lists the messages). Everything downstream of the trace does not know which plane ran.
//!
//! - [`host`]: the host process, its pool and its watchdog.
//! - [`node`]: one node's torchrun process: its Python threads as tasks.
//! - `calls`: the calls the Python makes into the world, served.
//! - [`argv`]: the torchrun command line a node runs, from the scenario.
//! - [`workers`]: the worker processes torch's agent starts, as the simulated job.

pub mod argv;
mod calls;
pub mod host;
pub mod node;
mod sources;
pub mod workers;

use serde::Serialize;
use std::path::PathBuf;

/// Which torch a run's control plane is: a Python interpreter with torch installed, and
/// optionally a checkout whose `torch/distributed/elastic` Python files are laid over it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TorchPlane {
    /// The Python interpreter (a venv's `bin/python`, or any Python with torch).
    pub python: PathBuf,
    /// A torch checkout (the directory holding `torch/`) whose elastic Python replaces the
    /// installed one's (`--torch-elastic-src`).
    pub elastic_src: Option<PathBuf>,
}

/// What a host reported of itself: the torch it imported and the overlay it laid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct TorchInfo {
    /// `torch.__version__`.
    pub torch_version: String,
    /// The interpreter's `sys.version`, first word.
    pub python_version: String,
    /// SHA-256 of the overlay's Python files (path and content, in path order), hex; absent
    /// without an overlay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlay_hash: Option<String>,
}

/// Why a torch control plane cannot run: a missing Python, no torch in it, an unsupported
/// torch, or an overlay that does not import. Said before any run starts (exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ProbeError(pub String);

/// Starts a host for `plane` (or takes one from the pool), asks what it imported, and puts
/// it back: the check every command makes before its first run, and the report's record of
/// which torch ran. Cached per plane for the process's life.
pub fn probe(plane: &TorchPlane) -> Result<TorchInfo, ProbeError> {
    host::probe(plane)
}
