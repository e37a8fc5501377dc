//! A state write the holder has decided but not built: the written state is made only when
//! something needs it, and the write's length is counted from the action's edits.
//!
//! In a join storm nearly every compare-and-set loses, and a losing write's state is never
//! stored or read: the store and the wire cost it by its length, and the writer compares
//! what the store answers with it. The length comes from the edits (`Edits`) against the
//! state they change; the answer is first told apart by length and by what the action
//! promises about this node (`apply::keeps_promise`), and only a state that passes both is
//! compared with the built one. Whatever is built is what `apply` makes, checked as ever.

use crate::rendezvous::apply::{apply, assert_applicable_to, is_planned_alone, keeps_promise};
use crate::rendezvous::edits::{Edits, Membership};
use crate::rendezvous::ops::Action;
use crate::rendezvous::settings::RendezvousSettings;
use crate::rendezvous::state::{NodeDesc, RendezvousState};
use crate::store::{Deferred, Value};
use std::sync::{Arc, OnceLock};

/// `action`, taken by `node` at `now_utc_us`, on `base`: the state the holder will write.
pub(super) struct PlannedWrite {
    base: Arc<RendezvousState>,
    action: Action,
    node: NodeDesc,
    /// The length of `node`'s own encoding, which its holder counted once.
    node_bytes: i64,
    settings: Arc<RendezvousSettings>,
    now_utc_us: i64,
    /// What the action changes, when the edits say it all (they count its length).
    edits: Option<Edits>,
    built: OnceLock<Arc<RendezvousState>>,
}

impl PlannedWrite {
    /// A write of `action` on `base`, which the decision table must have chosen there: a
    /// wrong action fails here, when it is decided, as `apply` would fail on it.
    /// `membership` is `node`'s in `base`, as the decision looked it up, and `node_bytes`
    /// its encoding's length.
    pub(super) fn new(
        base: Arc<RendezvousState>,
        action: Action,
        (node, membership, node_bytes): (NodeDesc, Membership, i64),
        settings: Arc<RendezvousSettings>,
        now_utc_us: i64,
    ) -> Arc<Self> {
        assert!(action.mutates_state(), "{action} reached the write path");
        if cfg!(test) {
            assert_eq!(
                membership,
                Membership::of(&base, &node),
                "a stale membership"
            );
        }
        assert_applicable_to(action, &base, &membership, &node, &settings);
        let edits = is_planned_alone(action, &settings)
            .then(|| Edits::plan(action, &base, &membership, &settings, now_utc_us));
        Arc::new(PlannedWrite {
            base,
            action,
            node,
            node_bytes,
            settings,
            now_utc_us,
            edits,
            built: OnceLock::new(),
        })
    }

    /// The state before the write.
    pub(super) fn base(&self) -> &RendezvousState {
        &self.base
    }

    /// The state written: the base with the action applied, built the first time it is
    /// asked for.
    pub(super) fn state(&self) -> &Arc<RendezvousState> {
        self.built.get_or_init(|| {
            let mut state = RendezvousState::clone(&self.base);
            apply(
                self.action,
                &mut state,
                &self.node,
                &self.settings,
                self.now_utc_us,
            );
            if (state.round, state.complete) != (self.base.round, self.base.complete) {
                // A round completed or reopened: check the whole state, O(nodes).
                state.assert_well_formed(&self.settings);
            }
            Arc::new(state)
        })
    }

    /// The value to write in place of `token`, the value the base was read from (none
    /// before any state was written). Its length is counted from the token's by what
    /// differs: the edits when the action has them, else the built state's difference.
    pub(super) fn value(self: &Arc<Self>, token: Option<&Value>) -> Value {
        let counted = self.edits.as_ref();
        let Some(delta) =
            counted.and_then(|edits| edits.encoded_len_delta(&self.base, self.node_bytes))
        else {
            let state = Arc::clone(self.state());
            return match token {
                Some(token) => Value::lazy_from(state, token),
                None => Value::lazy(state),
            };
        };
        let base_len = i64::try_from(self.base_len(token)).expect("a state's length fits i64");
        let len = usize::try_from(base_len + delta)
            .unwrap_or_else(|_| panic!("{} counted to {base_len} + {delta} bytes", self.action));
        Value::deferred(len, Arc::clone(self))
    }

    /// The base's encoded length: the token's when the base is the token's state, as it is
    /// unless sanitize or skipped keep-alives changed it after the read.
    fn base_len(&self, token: Option<&Value>) -> usize {
        let token_state = token.and_then(|token| Some((token, token.source::<RendezvousState>()?)));
        match token_state {
            Some((token, state)) if Arc::ptr_eq(&state, &self.base) => token.len(),
            Some((token, state)) => self.base.encoded_len_from(&state, token.len()),
            None => crate::store::Encode::encoded_len(&*self.base),
        }
    }

    /// Whether `stored`, decoded as `stored_state`, is the bytes this write makes, which it
    /// is, as torch's `has_set` finds, when another write made the same state. `ours` is
    /// this write's value.
    pub(super) fn is_written_as(
        &self,
        ours: &Value,
        stored: &Value,
        stored_state: &RendezvousState,
    ) -> bool {
        // Bytes of different lengths differ, and a state that breaks what the action
        // promises about this node is not one it made: most lost writes stop here, unbuilt.
        stored.len() == ours.len()
            && keeps_promise(self.action, stored_state, &self.node, self.now_utc_us)
            && *stored_state == **self.state()
    }
}

impl Deferred for PlannedWrite {
    type Output = RendezvousState;

    fn make(&self) -> Arc<RendezvousState> {
        Arc::clone(self.state())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(i: u32) -> NodeDesc {
        NodeDesc::new(format!("node-{i}"), 100 + i, 0)
    }

    /// A round of `nodes` participants, each with a heartbeat.
    fn round_of(nodes: u32) -> Arc<RendezvousState> {
        let mut state = RendezvousState::default();
        for i in 0..nodes {
            state.participants.insert(node(i), 0);
            state.last_heartbeats.insert(node(i), 1_000 + i64::from(i));
        }
        Arc::new(state)
    }

    fn write(base: &Arc<RendezvousState>, action: Action, who: u32, now: i64) -> Arc<PlannedWrite> {
        let settings = Arc::new(RendezvousSettings::new("r", 1, 64));
        let member = Membership::of(base, &node(who));
        let node_bytes = crate::rendezvous::encoded_len::node_bytes(&node(who));
        let writer = (node(who), member, node_bytes);
        PlannedWrite::new(Arc::clone(base), action, writer, settings, now)
    }

    #[test]
    fn a_losing_join_is_counted_and_told_apart_without_being_built() {
        let base = round_of(8);
        let token = Value::lazy(Arc::clone(&base));
        let (ours, theirs) = (
            write(&base, Action::AddToParticipants, 20, 5_000),
            write(&base, Action::AddToParticipants, 30, 5_000),
        );
        let (our_value, their_value) = (ours.value(Some(&token)), theirs.value(Some(&token)));
        // Another join landed: same length, but this node is not in it.
        let stored = Value::lazy(Arc::clone(theirs.state()));
        assert_eq!(stored.len(), our_value.len());
        assert!(!ours.is_written_as(&our_value, &stored, theirs.state()));
        assert!(ours.built.get().is_none(), "a lost write was built");
        // The counted lengths are the encodings'.
        assert_eq!(our_value.len(), ours.state().encode().len());
        assert_eq!(their_value.bytes(), &theirs.state().encode()[..]);
    }

    #[test]
    fn another_writes_identical_state_counts_as_written() {
        let base = round_of(3);
        let token = Value::lazy(Arc::clone(&base));
        let (ours, theirs) = (
            write(&base, Action::MarkRendezvousClosed, 0, 9),
            write(&base, Action::MarkRendezvousClosed, 1, 9),
        );
        let our_value = ours.value(Some(&token));
        let stored = theirs.value(Some(&token));
        assert!(ours.is_written_as(&our_value, &stored, theirs.state()));
    }

    #[test]
    fn a_base_changed_after_the_read_is_counted_from_the_token() {
        let read = round_of(5);
        let token = Value::lazy(Arc::clone(&read));
        // Sanitize dropped a node after the read.
        let mut sanitized = RendezvousState::clone(&read);
        sanitized.participants.remove(&node(4));
        sanitized.last_heartbeats.remove(&node(4));
        let ours = write(&Arc::new(sanitized), Action::KeepAlive, 1, 77_777);
        let value = ours.value(Some(&token));
        assert_eq!(value.len(), ours.state().encode().len());
        let first = write(
            &Arc::new(RendezvousState::default()),
            Action::AddToParticipants,
            0,
            1,
        );
        assert_eq!(first.value(None).len(), first.state().encode().len());
    }
}
