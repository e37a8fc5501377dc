//! The common actions' state changes as a few edits of the acting node's entries, planned
//! from the state before: `apply` makes them, and a write's encoded length is counted from
//! them without copying the state.
//!
//! In a join storm nearly every compare-and-set loses, and the store, the wire and the
//! writer's pickling are costed by the length of the state it sends. Copying the state to
//! change it (a path copy of two persistent maps), counting the copy's length and dropping
//! it again was a third of a 4,096-node run. A plan of edits is the one statement of what
//! these actions change: `apply` carries it out, and `encoded_len_delta` reads it.

use super::apply::{epilogue, reopen, Epilogue};
use super::encoded_len::{entry_bytes, value_bytes};
use super::ops::Action;
use super::settings::{RendezvousFix, RendezvousSettings};
use super::state::{NodeDesc, RendezvousState};
use crate::mutant::Mutant;
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
    /// The node, a participant of rank `rank`, leaves the participants.
    LeaveParticipants { rank: u32 },
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
    /// The round completes (`apply::mark_complete`): the participants take ranks 0..n−1 and
    /// the deadline goes. `counted`: whether that is all it changes, so its length counts
    /// from the ranks' digits; not when the fix `world-at-completion` also records the world,
    /// or the planted rank collision gives two participants one rank.
    Complete { counted: bool },
    /// The last participant of a complete round left: the next round opens, incomplete, with
    /// no world recorded. `counted`: whether no world was recorded (the fix
    /// `world-at-completion`'s list goes uncounted).
    Reopen { counted: bool },
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
    /// changes: that node's entries and the scalars. Each edit names a change that does
    /// happen: what is already so is left out.
    pub fn plan(
        action: Action,
        state: &RendezvousState,
        node: &Membership,
        settings: &RendezvousSettings,
        now_utc_us: i64,
    ) -> Edits {
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
                edits.push_if(count == settings.max_nodes as usize, complete(settings));
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
            Action::MarkRendezvousComplete => edits.push(complete(settings)),
            Action::MarkRendezvousClosed => edits.push_if(!state.closed, Edit::Close),
            Action::RemoveFromParticipants => {
                edits.plan_leaving(state, node, settings, drop_heartbeat);
            }
            Action::Sync | Action::ErrorClosed | Action::ErrorTimeout | Action::Finish => {}
        }
        edits
    }

    /// A participant's leaving: torch drops its heartbeat too but leaves any wait-list entry
    /// in place, then runs the participant epilogue (`apply::remove_participant_epilogue`).
    fn plan_leaving(
        &mut self,
        state: &RendezvousState,
        node: &Membership,
        settings: &RendezvousSettings,
        drop_heartbeat: Option<Edit>,
    ) {
        let rank = node
            .rank
            .expect("only a participant leaves the participants");
        self.push(Edit::LeaveParticipants { rank });
        self.extend(drop_heartbeat);
        let left = state.participants.len() - 1;
        match epilogue(state.complete, left, settings) {
            Epilogue::Reopen => self.push(Edit::Reopen {
                counted: state.completed_world.is_none(),
            }),
            Epilogue::ClearDeadline => {
                self.push_if(state.deadline_utc_us.is_some(), Edit::Deadline(None));
            }
            Epilogue::Nothing => {}
        }
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
                Edit::LeaveParticipants { .. } => {
                    state.participants.remove(node);
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
                Edit::Complete { .. } => super::apply::mark_complete(state, settings),
                Edit::Reopen { .. } => reopen(state),
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
        // What the edits before a completion left of what it changes.
        let mut deadline_utc_us = state.deadline_utc_us;
        let mut joined = None;
        for edit in self.iter() {
            delta += match edit {
                Edit::JoinParticipants { old_rank } => {
                    joined = Some(old_rank);
                    join_delta(state, old_rank, node_bytes)
                }
                Edit::LeaveParticipants { rank } => {
                    -entry_bytes(node_bytes, value_bytes(rank))
                        - comma_added(state.participants.len() - 1)
                }
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
                Edit::Deadline(deadline) => {
                    let before = std::mem::replace(&mut deadline_utc_us, deadline);
                    deadline_bytes(deadline) - deadline_bytes(before)
                }
                // `"closed":true` for `"closed":false`.
                Edit::Close => -1,
                Edit::Complete { counted: false } | Edit::Reopen { counted: false } => return None,
                // `"complete":false` for `"complete":true`, and the next round's number.
                Edit::Reopen { counted: true } => {
                    1 + value_bytes(state.round + 1) - value_bytes(state.round)
                }
                Edit::Complete { counted: true } => {
                    complete_delta(state, joined, deadline_utc_us.take())
                }
            };
        }
        Some(delta)
    }
}

/// The round's completion: counted unless the fix `world-at-completion` records the world
/// or the planted rank collision gives two participants one rank.
fn complete(settings: &RendezvousSettings) -> Edit {
    Edit::Complete {
        counted: !settings.has_fix(RendezvousFix::WorldAtCompletion)
            && !settings.has_mutant(Mutant::RankCollision),
    }
}

/// How many more bytes the node's joining the participants (at rank 0, from `old_rank`)
/// takes.
fn join_delta(state: &RendezvousState, old_rank: Option<u32>, node_bytes: i64) -> i64 {
    match old_rank {
        // The node's bytes, the larger part, stay: only the rank's text changes.
        Some(rank) => value_bytes(0u32) - value_bytes(rank),
        None => entry_bytes(node_bytes, value_bytes(0u32)) + comma_added(state.participants.len()),
    }
}

/// How many more bytes a completion takes than the state `state` was edited to before it:
/// the participants (`state`'s, and the acting node at rank 0 if it `joined` from the rank
/// it had) take ranks 0..n−1, `deadline_utc_us` goes, and `"complete":true` replaces
/// `"complete":false`. Only the ranks' digits change in the participants' list.
fn complete_delta(
    state: &RendezvousState,
    joined: Option<Option<u32>>,
    deadline_utc_us: Option<i64>,
) -> i64 {
    let mut participants = state.participants.len();
    let mut rank_digits: i64 = state.participants.values().map(|&r| value_bytes(r)).sum();
    match joined {
        Some(None) => {
            participants += 1;
            rank_digits += value_bytes(0u32);
        }
        Some(Some(old_rank)) => rank_digits += value_bytes(0u32) - value_bytes(old_rank),
        None => {}
    }
    let ranked_digits: i64 = (0..participants)
        .map(|rank| value_bytes(u32::try_from(rank).expect("ranks fit u32")))
        .sum();
    let complete_flag = if state.complete { 0 } else { -1 };
    ranked_digits - rank_digits + deadline_bytes(None) - deadline_bytes(deadline_utc_us)
        + complete_flag
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
            world_at_completion in any::<bool>(),
        ) {
            let state = state_of(&members, round, flags, deadline);
            let mut settings = RendezvousSettings::new("r", min_nodes, min_nodes + extra);
            if world_at_completion {
                settings.fixes.insert(RendezvousFix::WorldAtCompletion);
            }
            let who = node(who);
            let membership = Membership::of(&state, &who);
            prop_assume!(is_applicable(action, &state, &membership, &settings));
            let mut applied = state.clone();
            apply(action, &mut applied, &who, &settings, now_utc_us);
            let edits = Edits::plan(action, &state, &membership, &settings, now_utc_us);
            let mut edited = state.clone();
            edits.apply(&mut edited, &who, &settings);
            prop_assert_eq!(&edited, &applied);
            if let Some(delta) = edits.encoded_len_delta(&state, node_bytes(&who)) {
                let counted = i64::try_from(state.encoded_len()).unwrap() + delta;
                prop_assert_eq!(counted, i64::try_from(applied.encode().len()).unwrap());
            } else {
                prop_assert!(world_at_completion);
                let uncounted = Edit::Complete { counted: false };
                prop_assert!(edits.iter().any(|edit| edit == uncounted));
            }
        }
    }

    /// `state` with `action` applied by `who` at time 7, after checking that `edits` count
    /// its encoded length to the byte.
    fn applied_and_counted(
        action: Action,
        edits: &Edits,
        state: &RendezvousState,
        who: &NodeDesc,
        settings: &RendezvousSettings,
    ) -> RendezvousState {
        let mut applied = state.clone();
        apply(action, &mut applied, who, settings, 7);
        let delta = edits.encoded_len_delta(state, node_bytes(who));
        let counted = i64::try_from(state.encoded_len()).unwrap() + delta.expect("counted");
        assert_eq!(
            counted,
            i64::try_from(applied.encode().len()).unwrap(),
            "{action} in round {}",
            state.round
        );
        applied
    }

    #[test]
    fn a_join_that_reaches_max_nodes_completes_and_counts_its_ranks() {
        let mut settings = RendezvousSettings::new("r", 2, 2);
        let mut state = state_of(&[9], 0, 0, None);
        state.wait_list.insert(node(1));
        let membership = Membership::of(&state, &node(1));
        let plan = |settings: &RendezvousSettings| {
            Edits::plan(Action::AddToParticipants, &state, &membership, settings, 7)
        };
        let edits = plan(&settings);
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
                Edit::Complete { counted: true }
            ]
        );
        applied_and_counted(
            Action::AddToParticipants,
            &edits,
            &state,
            &node(1),
            &settings,
        );
        // Recording the completed world adds a list the edits do not count.
        settings.fixes.insert(RendezvousFix::WorldAtCompletion);
        assert_eq!(
            plan(&settings).encoded_len_delta(&state, node_bytes(&node(1))),
            None
        );
    }

    #[test]
    fn the_last_participant_leaving_a_complete_round_reopens_it_and_counts_its_number() {
        let settings = RendezvousSettings::new("r", 1, 2);
        for round in [0, 9, 99] {
            // node 0: a participant (rank 4) with a heartbeat; node 1 only waits.
            let state = state_of(&[9, 2], round, 1, None);
            let membership = Membership::of(&state, &node(0));
            let edits = Edits::plan(
                Action::RemoveFromParticipants,
                &state,
                &membership,
                &settings,
                7,
            );
            assert_eq!(
                edits.iter().collect::<Vec<_>>(),
                [
                    Edit::LeaveParticipants { rank: 4 },
                    Edit::DropHeartbeat {
                        old_utc_us: 9_000_027
                    },
                    Edit::Reopen { counted: true }
                ]
            );
            let action = Action::RemoveFromParticipants;
            let applied = applied_and_counted(action, &edits, &state, &node(0), &settings);
            assert_eq!((applied.round, applied.complete), (round + 1, false));
        }
        // A recorded world goes with the round, uncounted.
        let mut state = state_of(&[9], 0, 1, None);
        state.completed_world = Some(state.participants.clone());
        let membership = Membership::of(&state, &node(0));
        let edits = Edits::plan(
            Action::RemoveFromParticipants,
            &state,
            &membership,
            &settings,
            7,
        );
        assert_eq!(edits.encoded_len_delta(&state, node_bytes(&node(0))), None);
    }
}
