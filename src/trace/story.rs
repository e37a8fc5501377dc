//! The run's story beside its trace: the steps the rendezvous handlers took (torch's
//! `_Action`s, by op) and the shared state's lists after each, for `--explain`, the Perfetto
//! trace and the page.
//!
//! The story is kept apart from the trace's events: it enters neither the trace's hash nor
//! its event count, and the checks never read it. Users pin trace hashes, and the story
//! only retells what the handlers did; it is recorded by the same runs from the same seed,
//! so it replays as the trace does. It has bounds of its own: past them it leaves steps (or
//! their lists) out and counts what it left out, and the run goes on.
//!
//! A step that changes the state is recorded only when its write landed (torch's `has_set`):
//! a lost write changed nothing, and the node decides again on the state it then reads. Its
//! moment is when the node decided it, just before the write left: every later write was
//! decided on a state that holds it, so the story's order is the store's order.

use crate::scenario::node::NodeIndex;
use crate::sim_time::SimInstant;
use std::collections::{BTreeMap, BTreeSet};

/// The most steps one run's story holds (about 30 MiB); later steps are counted, not kept.
pub const STORY_STEPS_MAX: usize = 200_000;
/// The most list entries (participants, wait list, redundancy list, summed over the steps)
/// one run's story holds: a join storm of `n` nodes lists about `n²/2` per round. Past it a
/// step keeps its list sizes without the lists. 4 million entries are 32 MiB.
pub const STORY_MEMBERS_MAX: usize = 4_000_000;

/// Which rendezvous operation a node is running (torch's `_RendezvousJoinOp`,
/// `_RendezvousExitOp`, `_RendezvousCloseOp`, `_RendezvousKeepAliveOp`); each has its own
/// decision table. Named as in the parity vectors.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, strum::IntoStaticStr, strum::EnumString,
)]
#[strum(serialize_all = "snake_case")]
pub enum RendezvousOp {
    /// Join the current or next round (`next_rendezvous`, after the exit op).
    Join,
    /// Leave the current round's participants (`next_rendezvous`, before the join op).
    Exit,
    /// Close the rendezvous (`set_closed`, `shutdown`).
    Close,
    /// Refresh this node's heartbeat (the periodic keep-alive timer).
    KeepAlive,
}

impl RendezvousOp {
    /// The op's name in the parity vectors (`join`, `exit`, `close`, `keep_alive`).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The op named as in the parity vectors.
    pub fn from_name(name: &str) -> Option<Self> {
        name.parse().ok()
    }
}

/// The next step an op asks for: torch's `_Action`, in torch's enum order, named (and
/// displayed) as torch names its members.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
    strum::Display,
)]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
pub enum RendezvousAction {
    /// Refresh this node's heartbeat.
    KeepAlive,
    /// Join the current round's participants.
    AddToParticipants,
    /// Wait for the next round (the current one is complete and not full).
    AddToWaitList,
    /// Park: the current round is complete and full.
    AddToRedundancyList,
    /// Leave the current round's participants.
    RemoveFromParticipants,
    /// Leave the wait list.
    RemoveFromWaitList,
    /// Leave the redundancy list (the round has room again).
    RemoveFromRedundancyList,
    /// Complete the round and assign ranks.
    MarkRendezvousComplete,
    /// Close the rendezvous.
    MarkRendezvousClosed,
    /// Nothing to write: wait (torch sleeps 1 s) and read the state again.
    Sync,
    /// Fail: the rendezvous is closed (`RendezvousClosedError`).
    ErrorClosed,
    /// Fail: the op's deadline has passed (`RendezvousTimeoutError`).
    ErrorTimeout,
    /// The op is done.
    Finish,
}

impl RendezvousAction {
    /// Every action, in torch's enum order.
    pub const ALL: &'static [RendezvousAction] =
        <RendezvousAction as strum::VariantArray>::VARIANTS;

    /// torch's member name, e.g. `"ADD_TO_PARTICIPANTS"`.
    pub fn torch_name(self) -> &'static str {
        self.into()
    }

    /// The action with torch's member name `name`.
    pub fn from_torch_name(name: &str) -> Option<Self> {
        name.parse().ok()
    }

    /// Whether the executor changes the state for this action (and then writes it back);
    /// SYNC, the errors and FINISH leave the state alone.
    pub fn mutates_state(self) -> bool {
        !matches!(
            self,
            RendezvousAction::Sync
                | RendezvousAction::ErrorClosed
                | RendezvousAction::ErrorTimeout
                | RendezvousAction::Finish
        )
    }

    /// Whether the step moves a node between the lists, completes the round or closes the
    /// rendezvous: what the story tells round by round (not the keep-alives, nor the end of
    /// an op).
    pub fn moves_lists(self) -> bool {
        self.mutates_state() && self != RendezvousAction::KeepAlive
    }
}

/// One entry of a list: a node and the agent process its handler ran in (a restarted
/// node's old process can linger in a list until its heartbeat expires).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Member {
    pub node: NodeIndex,
    pub pid: u32,
}

/// The nodes `members` lists with more than one process (a restarted node's old entry
/// lingers until its heartbeat expires): where a list is written out, these name their pids.
pub fn nodes_listed_twice(members: &[Member]) -> BTreeSet<NodeIndex> {
    let mut pids: BTreeMap<NodeIndex, u32> = BTreeMap::new();
    let mut twice = BTreeSet::new();
    for m in members {
        if *pids.entry(m.node).or_insert(m.pid) != m.pid {
            twice.insert(m.node);
        }
    }
    twice
}

/// The first `shown_max` entries of `members` by node name, a node listed with two processes
/// written by `with_pid` instead, and how many entries that leaves out: every list the story
/// writes out (the event log, the page, the Perfetto args) shows its entries so.
pub fn names_shown(
    members: &[Member],
    shown_max: usize,
    with_pid: impl Fn(&Member) -> String,
) -> (Vec<String>, usize) {
    let twice = nodes_listed_twice(members);
    let shown = members
        .iter()
        .take(shown_max)
        .map(|m| match twice.contains(&m.node) {
            true => with_pid(m),
            false => m.node.to_string(),
        })
        .collect();
    (shown, members.len().saturating_sub(shown_max))
}

/// Each entry of `members` once, in the order first listed.
pub fn distinct(members: &[Member]) -> Vec<Member> {
    let mut seen = BTreeSet::new();
    members
        .iter()
        .filter(|m| seen.insert(**m))
        .copied()
        .collect()
}

/// How long each list was after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListSizes {
    pub participants: u32,
    pub wait_list: u32,
    pub redundancy_list: u32,
}

impl ListSizes {
    /// Entries over the three lists.
    pub fn total(self) -> usize {
        self.participants as usize + self.wait_list as usize + self.redundancy_list as usize
    }
}

/// The shared state's lists after a step, each in torch's order: sorted by node descriptor
/// (address, then pid), which for participants is their rank order once the round completes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RendezvousLists {
    pub participants: Vec<Member>,
    pub wait_list: Vec<Member>,
    pub redundancy_list: Vec<Member>,
}

impl RendezvousLists {
    pub fn sizes(&self) -> ListSizes {
        let len = |list: &Vec<Member>| u32::try_from(list.len()).unwrap_or(u32::MAX);
        ListSizes {
            participants: len(&self.participants),
            wait_list: len(&self.wait_list),
            redundancy_list: len(&self.redundancy_list),
        }
    }
}

/// One step of one node's rendezvous op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RendezvousStep {
    /// When the node decided the step (see the module's documentation).
    pub at: SimInstant,
    pub node: NodeIndex,
    pub pid: u32,
    pub op: RendezvousOp,
    pub action: RendezvousAction,
    /// The store's incarnation the handler's client reached (1 for its first process; 0
    /// when it was not known yet): a restarted store starts a new rendezvous.
    pub store_incarnation: u64,
    /// The state after the step: its round, whether the round is complete and whether the
    /// rendezvous is closed.
    pub round: u64,
    pub complete: bool,
    pub closed: bool,
    /// Nodes whose heartbeat had expired, removed from the state by the same write (torch's
    /// sanitize on the node's last read; torch logs them once the write lands).
    pub dropped: Vec<Member>,
    pub sizes: ListSizes,
    /// The lists after the step: only for steps that changed the state, and within
    /// [`STORY_MEMBERS_MAX`].
    pub lists: Option<RendezvousLists>,
}

/// Everything the story holds of one run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Story {
    /// The steps in time order (steps of one moment in the order they were recorded).
    pub rendezvous: Vec<RendezvousStep>,
    /// Steps left out past [`STORY_STEPS_MAX`].
    pub steps_left_out: u64,
    /// Steps kept without their lists past [`STORY_MEMBERS_MAX`].
    pub lists_left_out: u64,
    /// List entries held so far.
    members: usize,
}

/// What room a story has for one more step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Room {
    /// For the step and its lists.
    WithLists,
    /// For the step, not its lists.
    StepOnly,
    /// For nothing more.
    Full,
}

/// The room a story of `steps` steps holding `members` list entries has for a step of
/// `more` entries.
fn room(steps: usize, members: usize, more: usize) -> Room {
    if steps >= STORY_STEPS_MAX {
        Room::Full
    } else if members.saturating_add(more) <= STORY_MEMBERS_MAX {
        Room::WithLists
    } else {
        Room::StepOnly
    }
}

impl Story {
    /// A story of these steps, as recorded (tests and readers of saved steps).
    pub fn of_steps(steps: Vec<RendezvousStep>) -> Self {
        let members = steps
            .iter()
            .filter(|s| s.lists.is_some())
            .map(|s| s.sizes.total())
            .sum();
        Story {
            rendezvous: steps,
            members,
            ..Story::default()
        }
    }

    /// Keeps `step`, and for a step that changed the state the lists `lists` makes, when
    /// they fit [`STORY_MEMBERS_MAX`]; past [`STORY_STEPS_MAX`] only counts it.
    pub fn keep(&mut self, mut step: RendezvousStep, lists: impl FnOnce() -> RendezvousLists) {
        let listed = step.action.mutates_state();
        let more = if listed { step.sizes.total() } else { 0 };
        match room(self.rendezvous.len(), self.members, more) {
            Room::Full => {
                self.steps_left_out += 1;
                return;
            }
            Room::StepOnly => self.lists_left_out += u64::from(listed),
            Room::WithLists if listed => {
                let made = lists();
                // The sizes of what could be listed: an address that names no node is left
                // out of both.
                step.sizes = made.sizes();
                self.members += step.sizes.total();
                step.lists = Some(made);
            }
            Room::WithLists => {}
        }
        self.rendezvous.push(step);
    }

    /// Puts the steps in time order; steps of one moment keep their recorded order.
    pub fn sort(&mut self) {
        self.rendezvous.sort_by_key(|step| step.at);
    }

    /// Whether any step was left out or kept without its lists.
    pub fn cut(&self) -> bool {
        self.steps_left_out > 0 || self.lists_left_out > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(i: u32) -> Member {
        Member {
            node: NodeIndex(i),
            pid: 100 + i,
        }
    }

    fn step(at_us: u64, participants: u32) -> RendezvousStep {
        RendezvousStep {
            at: SimInstant::from_us(at_us),
            node: NodeIndex(0),
            pid: 100,
            op: RendezvousOp::Join,
            action: RendezvousAction::AddToParticipants,
            store_incarnation: 1,
            round: 0,
            complete: false,
            closed: false,
            dropped: Vec::new(),
            sizes: ListSizes {
                participants,
                ..ListSizes::default()
            },
            lists: None,
        }
    }

    fn lists(participants: u32) -> RendezvousLists {
        RendezvousLists {
            participants: (0..participants).map(member).collect(),
            ..RendezvousLists::default()
        }
    }

    #[test]
    fn lists_past_the_bound_are_left_out_and_counted() {
        let mut story = Story::default();
        let half = u32::try_from(STORY_MEMBERS_MAX / 2).unwrap();
        story.keep(step(1, half), || lists(half));
        story.keep(step(2, half), || lists(half));
        story.keep(step(3, 1), || panic!("built past the bound"));
        let mut finish = step(4, 1);
        finish.action = RendezvousAction::Finish;
        story.keep(finish, || panic!("a step that changed nothing listed"));
        assert_eq!(story.rendezvous.len(), 4);
        assert!(story.rendezvous[1].lists.is_some());
        assert_eq!(story.rendezvous[2].lists, None);
        assert_eq!(story.rendezvous[3].lists, None);
        assert_eq!(story.rendezvous[2].sizes.participants, 1);
        assert_eq!((story.lists_left_out, story.steps_left_out), (1, 0));
        assert!(story.cut());
    }

    #[test]
    fn steps_past_the_bound_are_counted_and_the_rest_sorted_in_time() {
        assert_eq!(room(STORY_STEPS_MAX - 1, 0, 1), Room::WithLists);
        assert_eq!(room(STORY_STEPS_MAX, 0, 0), Room::Full);
        assert_eq!(room(1, STORY_MEMBERS_MAX, 1), Room::StepOnly);
        assert_eq!(room(1, usize::MAX, 1), Room::StepOnly, "no overflow");
        let mut story = Story::of_steps(vec![step(5, 0)]);
        story.keep(step(3, 0), RendezvousLists::default);
        story.keep(step(3, 1), || lists(1));
        story.sort();
        let order: Vec<(u64, u32)> = story
            .rendezvous
            .iter()
            .map(|s| (s.at.as_us(), s.sizes.participants))
            .collect();
        assert_eq!(order, [(3, 0), (3, 1), (5, 0)]);
        assert!(!story.cut());
    }

    #[test]
    fn a_node_listed_with_two_processes_is_told_apart() {
        let old = Member {
            node: NodeIndex(2),
            pid: 7,
        };
        let list = [member(1), member(2), old, member(1)];
        assert_eq!(nodes_listed_twice(&list), BTreeSet::from([NodeIndex(2)]));
        assert_eq!(distinct(&list), [member(1), member(2), old]);
    }

    #[test]
    fn the_story_tells_the_steps_that_move_nodes_not_the_keep_alives() {
        let moving: Vec<&str> = RendezvousAction::ALL
            .iter()
            .filter(|a| a.moves_lists())
            .map(|a| a.torch_name())
            .collect();
        assert_eq!(
            moving,
            [
                "ADD_TO_PARTICIPANTS",
                "ADD_TO_WAIT_LIST",
                "ADD_TO_REDUNDANCY_LIST",
                "REMOVE_FROM_PARTICIPANTS",
                "REMOVE_FROM_WAIT_LIST",
                "REMOVE_FROM_REDUNDANCY_LIST",
                "MARK_RENDEZVOUS_COMPLETE",
                "MARK_RENDEZVOUS_CLOSED"
            ]
        );
    }
}
