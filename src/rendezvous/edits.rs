//! The common actions' state changes as a few edits of the acting node's entries, planned
//! from the state before: `apply` makes them, and a write's encoded length is counted from
//! them without copying the state.
//!
//! In a join storm nearly every compare-and-set loses, and the store, the wire and the
//! writer's pickling are costed by the length of the state it sends. Copying the state to
//! change it (a path copy of two persistent maps), counting the copy's length and dropping
//! it again was a third of a 4,096-node run. A plan of edits is the one statement of what
//! these actions change: `apply` carries it out, and `encoded_len_delta` reads it.

use super::encoded_len::{entry_bytes, value_bytes};
use super::ops::Action;
use super::settings::RendezvousSettings;
use super::state::{NodeDesc, RendezvousState};
use crate::sim_time::deadline_after;

/// The acting node's entries in a state, looked up once for the decision's check, the plan
/// and the count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Membership {
    /// Its rank among the participants, if it is one.
    pub rank: Option<u32>,
    pub waiting: bool,
    pub redundant: bool,
    /// Its last heartbeat, if it has one.
    pub heartbeat_utc_us: Option<i64>,
}

impl Membership {
    pub fn of(state: &RendezvousState, node: &NodeDesc) -> Self {
        Membership {
            rank: state.participants.get(node).copied(),
            waiting: state.wait_list.contains(node),
            redundant: state.redundancy_list.contains(node),
            heartbeat_utc_us: state.last_heartbeats.get(node).copied(),
        }
    }

    pub fn is_participant(&self) -> bool {
        self.rank.is_some()
    }
}

/// One change to the state, of the acting node's entries unless it says otherwise; each
/// carries the entry it replaces, so counting it looks nothing up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edit {
    /// The node becomes a participant with rank 0 (ranks mean something only once the round
    /// completes), or its rank (`old_rank`) becomes 0.
    JoinParticipants { old_rank: Option<u32> },
    /// The node leaves the wait list, on which it is.
    LeaveWaitList,
    /// The node joins the wait list, on which it is not.
    JoinWaitList,
    /// The node leaves the redundancy list, on which it is.
    LeaveRedundancyList,
    /// The node joins the redundancy list, on which it is not.
    JoinRedundancyList,
    /// The node's heartbeat (`old_utc_us`) becomes `now_utc_us` on the wall clock, added
    /// when it had none.
    Heartbeat {
        now_utc_us: i64,
        old_utc_us: Option<i64>,
    },
    /// The node's heartbeat, `old_utc_us`, goes.
    DropHeartbeat { old_utc_us: i64 },
    /// The round's last-call deadline becomes this.
    Deadline(Option<i64>),
    /// The rendezvous closes for good.
    Close,
    /// The round completes: every participant's rank changes (`apply::mark_complete`), so a
    /// plan with this edit has no counted length.
    Complete,
}

/// The most edits one action makes (a join with min == max: leave the wait list, join,
/// heartbeat, deadline, complete).
const EDITS_MAX: usize = 5;

/// An action's edits, in the order torch makes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edits {
    items: [Edit; EDITS_MAX],
    len: usize,
}

impl Edits {
    fn new() -> Self {
        Edits {
            items: [Edit::Close; EDITS_MAX],
            len: 0,
        }
    }

    fn push(&mut self, edit: Edit) {
        assert!(
            self.len < EDITS_MAX,
            "an action planned more than {EDITS_MAX} edits"
        );
        self.items[self.len] = edit;
        self.len += 1;
    }

    fn extend(&mut self, edit: Option<Edit>) {
        if let Some(edit) = edit {
            self.push(edit);
        }
    }

    fn push_if(&mut self, condition: bool, edit: Edit) {
        if condition {
            self.push(edit);
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = Edit> + '_ {
        self.items[..self.len].iter().copied()
    }

    /// What `action`, taken at `now_utc_us` in `state` by the node whose entries are `node`,
    /// changes, when it changes only that node's entries and the scalars; `None` for the
    /// actions `apply` makes by other means (a participant's removal and its epilogue).
    /// Each edit names a change that does happen: what is already so is left out.
    pub fn plan(
        action: Action,
        state: &RendezvousState,
        node: &Membership,
        settings: &RendezvousSettings,
        now_utc_us: i64,
    ) -> Option<Edits> {
        let mut edits = Edits::new();
        let (waiting, redundant) = (node.waiting, node.redundant);
        let heartbeat = Edit::Heartbeat {
            now_utc_us,
            old_utc_us: node.heartbeat_utc_us,
        };
        let drop_heartbeat = node
            .heartbeat_utc_us
            .map(|old_utc_us| Edit::DropHeartbeat { old_utc_us });
        match action {
            Action::KeepAlive => edits.push(heartbeat),
            Action::AddToParticipants => {
                edits.push_if(waiting, Edit::LeaveWaitList);
                edits.push(Edit::JoinParticipants {
                    old_rank: node.rank,
                });
                edits.push(heartbeat);
                // Reaching exactly min_nodes opens the last call; reaching exactly max_nodes
                // completes the round (which clears a deadline just set when min == max).
                let count = state.participants.len() + usize::from(!node.is_participant());
                let last_call = deadline_after(now_utc_us, settings.last_call_timeout);
                edits.push_if(
                    count == settings.min_nodes as usize,
                    Edit::Deadline(Some(last_call)),
                );
                edits.push_if(count == settings.max_nodes as usize, Edit::Complete);
            }
            Action::AddToWaitList => {
                // Moving from the redundancy list to the wait list, never in both.
                edits.push_if(redundant, Edit::LeaveRedundancyList);
                edits.push_if(!waiting, Edit::JoinWaitList);
                edits.push(heartbeat);
            }
            Action::AddToRedundancyList => {
                edits.push_if(!redundant, Edit::JoinRedundancyList);
                edits.push(heartbeat);
            }
            Action::RemoveFromWaitList => {
                edits.push_if(waiting, Edit::LeaveWaitList);
                edits.extend(drop_heartbeat);
            }
            Action::RemoveFromRedundancyList => {
                edits.push_if(redundant, Edit::LeaveRedundancyList);
                edits.extend(drop_heartbeat);
            }
            Action::MarkRendezvousComplete => edits.push(Edit::Complete),
            Action::MarkRendezvousClosed => edits.push_if(!state.closed, Edit::Close),
            Action::RemoveFromParticipants => return None,
            Action::Sync | Action::ErrorClosed | Action::ErrorTimeout | Action::Finish => {}
        }
        Some(edits)
    }

    /// Makes the edits on `state`, which must be the state they were planned in.
    pub fn apply(
        &self,
        state: &mut RendezvousState,
        node: &NodeDesc,
        settings: &RendezvousSettings,
    ) {
        for edit in self.iter() {
            match edit {
                Edit::JoinParticipants { .. } => {
                    state.participants.insert(node.clone(), 0);
                }
                Edit::LeaveWaitList => {
                    state.wait_list.remove(node);
                }
                Edit::JoinWaitList => {
                    state.wait_list.insert(node.clone());
                }
                Edit::LeaveRedundancyList => {
                    state.redundancy_list.remove(node);
                }
                Edit::JoinRedundancyList => {
                    state.redundancy_list.insert(node.clone());
                }
                Edit::Heartbeat { now_utc_us, .. } => {
                    state.last_heartbeats.insert(node.clone(), now_utc_us);
                }
                Edit::DropHeartbeat { .. } => {
                    state.last_heartbeats.remove(node);
                }
                Edit::Deadline(deadline_utc_us) => state.deadline_utc_us = deadline_utc_us,
                Edit::Close => state.closed = true,
                Edit::Complete => super::apply::mark_complete(state, settings),
            }
        }
    }

    /// How many more bytes the state encodes to once the edits are made on `state` (the
    /// state they were planned in); `None` when they complete the round. Each edit touches
    /// its own entry of its own list, so the edits count one by one against `state`, and
    /// each carries the entry it replaces: only the lists' lengths are read. `node_bytes`
    /// is the acting node's own encoding's length (`encoded_len::node_bytes`), which its
    /// holder counts once.
    pub fn encoded_len_delta(&self, state: &RendezvousState, node_bytes: i64) -> Option<i64> {
        let mut delta = 0;
        for edit in self.iter() {
            delta += match edit {
                Edit::JoinParticipants { old_rank } => match old_rank {
                    // The node's bytes, the larger part, stay: only the rank's text changes.
                    Some(rank) => value_bytes(0u32) - value_bytes(rank),
                    None => {
                        entry_bytes(node_bytes, value_bytes(0u32))
                            + comma_added(state.participants.len())
                    }
                },
                Edit::LeaveWaitList => -node_bytes - comma_added(state.wait_list.len() - 1),
                Edit::JoinWaitList => node_bytes + comma_added(state.wait_list.len()),
                Edit::LeaveRedundancyList => {
                    -node_bytes - comma_added(state.redundancy_list.len() - 1)
                }
                Edit::JoinRedundancyList => node_bytes + comma_added(state.redundancy_list.len()),
                Edit::Heartbeat {
                    now_utc_us,
                    old_utc_us,
                } => match old_utc_us {
                    Some(old_utc_us) => value_bytes(now_utc_us) - value_bytes(old_utc_us),
                    None => {
                        entry_bytes(node_bytes, value_bytes(now_utc_us))
                            + comma_added(state.last_heartbeats.len())
                    }
                },
                Edit::DropHeartbeat { old_utc_us } => {
                    -entry_bytes(node_bytes, value_bytes(old_utc_us))
                        - comma_added(state.last_heartbeats.len() - 1)
                }
                Edit::Deadline(deadline_utc_us) => {
                    deadline_bytes(deadline_utc_us) - deadline_bytes(state.deadline_utc_us)
                }
                // `"closed":true` for `"closed":false`.
                Edit::Close => -1,
                Edit::Complete => return None,
            };
        }
        Some(delta)
    }
}

/// The comma an entry added to a list of `entries_before` entries brings (none to an empty
/// list).
fn comma_added(entries_before: usize) -> i64 {
    i64::from(entries_before > 0)
}

/// The deadline's bytes: the number, or `null`.
fn deadline_bytes(deadline_utc_us: Option<i64>) -> i64 {
    match deadline_utc_us {
        Some(deadline) => i64::try_from(itoa::Buffer::new().format(deadline).len())
            .expect("a number's digits fit i64"),
        None => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rendezvous::apply::{apply, is_applicable};
    use crate::rendezvous::encoded_len::node_bytes;
    use crate::store::Encode;
    use proptest::prelude::*;

    /// Node `i` of a small pool: addresses and numbers of varying widths.
    fn node(i: u8) -> NodeDesc {
        NodeDesc::new(format!("n{}", u32::from(i) * 97), u32::from(i % 3) * 900, 0)
    }

    /// A state of up to 12 nodes from membership bits: participant, waiting, redundant,
    /// beating.
    fn state_of(members: &[u8], round: u64, flags: u8, deadline: Option<i64>) -> RendezvousState {
        let mut state = RendezvousState {
            round,
            complete: flags & 1 != 0,
            closed: flags & 2 != 0,
            deadline_utc_us: deadline,
            ..RendezvousState::default()
        };
        for (i, &bits) in (0u8..).zip(members) {
            if bits & 1 != 0 {
                state.participants.insert(node(i), u32::from(bits) % 5);
            }
            if bits & 2 != 0 {
                state.wait_list.insert(node(i));
            }
            if bits & 4 != 0 {
                state.redundancy_list.insert(node(i));
            }
            if bits & 8 != 0 {
                state
                    .last_heartbeats
                    .insert(node(i), i64::from(bits) * 1_000_003);
            }
        }
        state
    }

    proptest! {
        /// Wherever the decision table could take an action, its edits count the length of
        /// the state `apply` leaves, to the byte.
        #[test]
        fn edits_count_the_applied_states_length(
            members in prop::collection::vec(0u8..16, 0..12),
            round in 0u64..3,
            flags in 0u8..4,
            deadline in prop::option::of(0i64..10_000_000_000),
            min_nodes in 1u32..5,
            extra in 0u32..4,
            action in prop::sample::select(Action::ALL),
            who in 0u8..13,
            now_utc_us in 0i64..100_000_000_000_000,
        ) {
            let state = state_of(&members, round, flags, deadline);
            let settings = RendezvousSettings::new("r", min_nodes, min_nodes + extra);
            let who = node(who);
            let membership = Membership::of(&state, &who);
            prop_assume!(is_applicable(action, &state, &membership, &settings));
            let mut applied = state.clone();
            apply(action, &mut applied, &who, &settings, now_utc_us);
            let Some(edits) = Edits::plan(action, &state, &membership, &settings, now_utc_us) else {
                prop_assert_eq!(action, Action::RemoveFromParticipants);
                return Ok(());
            };
            let mut edited = state.clone();
            edits.apply(&mut edited, &who, &settings);
            prop_assert_eq!(&edited, &applied);
            if let Some(delta) = edits.encoded_len_delta(&state, node_bytes(&who)) {
                let counted = i64::try_from(state.encoded_len()).unwrap() + delta;
                prop_assert_eq!(counted, i64::try_from(applied.encode().len()).unwrap());
            } else {
                prop_assert!(edits.iter().any(|edit| edit == Edit::Complete));
            }
        }
    }

    #[test]
    fn a_join_that_reaches_max_nodes_completes_and_is_not_counted() {
        let settings = RendezvousSettings::new("r", 2, 2);
        let mut state = state_of(&[9], 0, 0, None);
        state.wait_list.insert(node(1));
        let membership = Membership::of(&state, &node(1));
        let edits = Edits::plan(Action::AddToParticipants, &state, &membership, &settings, 7)
            .expect("a join has edits");
        let last_call = deadline_after(7, settings.last_call_timeout);
        assert_eq!(
            edits.iter().collect::<Vec<_>>(),
            [
                Edit::LeaveWaitList,
                Edit::JoinParticipants { old_rank: None },
                Edit::Heartbeat {
                    now_utc_us: 7,
                    old_utc_us: None
                },
                Edit::Deadline(Some(last_call)),
                Edit::Complete
            ]
        );
        assert_eq!(edits.encoded_len_delta(&state, node_bytes(&node(1))), None);
    }
}
