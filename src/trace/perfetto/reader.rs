//! The reader pipeline's events in the Perfetto export: what the trainer waited for and
//! when the reader ended an epoch, lost a worker or hung.

use super::{instant, open, Export, WORKERS};
use crate::sim_time::{SimDuration, SimInstant};
use crate::trace::EventKind;
use serde_json::json;

impl Export {
    /// The reader on the workers' track: a span for each batch the trainer waited for
    /// (recorded when it asked, lasting the stall), instants for the rest.
    pub(super) fn reader_event(&mut self, pid: u64, at: SimInstant, kind: &EventKind) {
        let (name, args) = match kind {
            EventKind::ReaderBatch {
                epoch,
                size,
                trained,
                stall_us,
                ..
            } => {
                let name = format!("reader batch of {size} (epoch {epoch})");
                let args = json!({ "trained": trained, "stall_us": stall_us });
                if *stall_us > 0 {
                    let end = at.after(SimDuration::from_us(*stall_us));
                    return self.push_span(pid, WORKERS, open(at, name, args), end);
                }
                (name, args)
            }
            EventKind::ReaderEndOfData { epoch, .. } => {
                (format!("reader epoch {epoch} ends"), json!({}))
            }
            EventKind::ReaderWorkerFailed { worker, reason, .. } => (
                format!("reader worker {worker} died"),
                json!({ "reason": reason }),
            ),
            EventKind::ReaderHang { reason, .. } => {
                ("reader hangs".to_owned(), json!({ "reason": reason }))
            }
            _ => return,
        };
        self.out.push(instant(pid, WORKERS, at, name, args));
    }
}
