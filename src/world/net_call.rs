//! One call of a client connection: its moments and deadline, its request's retransmission
//! timer, and how each send of it ends.

use super::{NetError, RTO_MAX, RTO_MIN};
use crate::sim_time::{SimDuration, SimInstant};
use crate::world::interrupts::Interrupts;
use crate::world::wire::ReplyCpu;
use std::sync::Arc;

/// What ends one send of a request, besides its reply, a reset or a drop.
#[derive(Debug, Clone, Copy)]
pub(super) enum Until {
    /// This moment, if the server has taken the request by then.
    Deadline(SimInstant),
    /// The server taking it: the call is already past its deadline.
    Taken,
    /// Nothing else.
    Reply,
}

/// One call's moments, and what its caller spends on the reply.
pub(super) struct Call {
    pub(super) id: u64,
    /// When its request first leaves (after the caller's CPU time on it, when folded).
    pub(super) departs_ns: u64,
    pub(super) reply_cpu: Option<ReplyCpu>,
    /// When the call began, as of its request leaving, to the whole microsecond.
    pub(super) started: SimInstant,
    /// How long a call that waits `ReplyWait::Within` waits for its reply.
    pub(super) timeout: Option<SimDuration>,
    /// The signals of the main thread that made the call, if a main thread did.
    pub(super) interrupts: Option<Arc<Interrupts>>,
    /// When the first connect stops being retried.
    pub(super) connect_deadline: SimInstant,
}

impl Call {
    /// When a call that waits `ReplyWait::Within` stops waiting: its timeout after it
    /// began, or after the last signal its main thread took while it waited.
    pub(super) fn deadline(&self) -> Option<SimInstant> {
        let timeout = self.timeout?;
        let deadline = self.started.after(timeout);
        Some(match &self.interrupts {
            Some(interrupts) => interrupts.deadline(self.started, deadline, timeout),
            None => deadline,
        })
    }

    pub(super) fn overdue(&self, now: SimInstant) -> bool {
        self.deadline().is_some_and(|deadline| now >= deadline)
    }
}

/// The retransmission timer of one call's request: its timeout, doubling from Linux's
/// minimum, and how many times the unacknowledged request was sent again.
pub(super) struct Resend {
    pub(super) rto: SimDuration,
    pub(super) retransmits: u32,
}

impl Resend {
    pub(super) fn new() -> Self {
        Resend {
            rto: RTO_MIN,
            retransmits: 0,
        }
    }

    /// The timer expired with the request still unacknowledged: TCP sends it again, or
    /// gives up once it has done so `tcp_retries2` times.
    pub(super) fn expired(
        &mut self,
        tcp_retries2: u32,
        gave_up: impl FnOnce() -> NetError,
    ) -> Result<(), NetError> {
        if self.retransmits >= tcp_retries2 {
            return Err(gave_up());
        }
        self.retransmits += 1;
        self.rto = self.rto.saturating_mul(2).min(RTO_MAX);
        Ok(())
    }
}

/// How one send of a request ended.
pub(super) enum Exchange<Resp> {
    /// The reply, and when it landed.
    Reply(Resp, SimInstant),
    Reset,
    /// The wire dropped the request or its reply.
    Dropped,
    TimedOut,
}
