//! The host process: one Python interpreter with torch imported, leased to one run at a time.
use super::{ProbeError, TorchInfo, TorchPlane};

/// See [`super::probe`].
pub fn probe(plane: &TorchPlane) -> Result<TorchInfo, ProbeError> {
    Err(ProbeError(format!(
        "{}: the torch control plane is not built yet",
        plane.python.display()
    )))
}
