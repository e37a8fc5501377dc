//! The errors of torch's rendezvous handler, and how a store failure becomes one.

use crate::store::service::StoreError;
use crate::trace::RendezvousErrorKind;

/// Why `next_rendezvous` (or another handler call) failed, as torch's exceptions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RendezvousError {
    #[error("the rendezvous '{0}' is closed")]
    Closed(String),
    #[error("the rendezvous '{0}' timed out")]
    Timeout(String),
    #[error("the rendezvous '{0}' is closed, terminating pending rendezvous")]
    GracefulExit(String),
    #[error("the connection to the C10d store has failed: {0}")]
    Connection(String),
    #[error("the rendezvous state is corrupt: {0}")]
    State(String),
}

impl RendezvousError {
    /// A short name for the trace.
    pub fn kind(&self) -> RendezvousErrorKind {
        match self {
            RendezvousError::Closed(_) => RendezvousErrorKind::Closed,
            RendezvousError::Timeout(_) => RendezvousErrorKind::Timeout,
            RendezvousError::GracefulExit(_) => RendezvousErrorKind::GracefulExit,
            RendezvousError::Connection(_) => RendezvousErrorKind::StoreUnreachable,
            RendezvousError::State(_) => RendezvousErrorKind::StateError,
        }
    }
}

impl From<StoreError> for RendezvousError {
    /// torch's `RendezvousConnectionError`, with the store's own words once: a lost
    /// connection's cause, or the whole refusal.
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Connection(cause) => RendezvousError::Connection(cause),
            other @ (StoreError::Refused(_) | StoreError::WaitTimeout { .. }) => {
                RendezvousError::Connection(other.to_string())
            }
        }
    }
}
