//! The rendezvous round by round, from the run's story, for `--explain` and the page: who
//! took part in each round, who waited, who was redundant, and the steps that moved a node
//! between the lists or completed or closed the rendezvous, in time order. Steps of one kind
//! in a row fold into one move, a busy round is told by kind of step, and a run of rounds
//! that went the same way folds into the first of them with a count, so a restart loop of
//! a hundred rounds reads in a few lines.

use crate::scenario::node::NodeIndex;
use crate::sim_time::SimInstant;
use crate::trace::story::{
    ListSizes, Member, RendezvousAction, RendezvousLists, RendezvousOp, RendezvousStep, Story,
};
use std::collections::{BTreeMap, BTreeSet};

/// The most moves a round tells in time order; a busier round is told by kind of step, on
/// each side of its completion.
pub const ROUND_MOVES_MAX: usize = 8;

/// Steps of one kind (op and action) taken one after another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move<'a> {
    pub first_at: SimInstant,
    pub last_at: SimInstant,
    pub op: RendezvousOp,
    pub action: RendezvousAction,
    /// Who took them, in order, one entry per step.
    pub takers: Vec<Member>,
    /// Whether one of them completed the round (a join at `max_nodes` does), or opened this
    /// round (the last participant of the one before left, or its heartbeat expired).
    pub completed: bool,
    pub opened: bool,
    /// Nodes whose heartbeat had expired, removed by the same writes.
    pub dropped: Vec<Member>,
    /// The list sizes after the last of them, and the lists when the story kept them.
    pub sizes_after: ListSizes,
    pub after: Option<&'a RendezvousLists>,
}

/// Later rounds that went as a told round did, folded into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Alike {
    /// How many rounds.
    pub rounds: u64,
    /// The last of them, and the moment of its last step.
    pub last_round: u64,
    pub last_at: SimInstant,
    /// Whether their participants, redundant or dropped nodes were others than the told
    /// round's (a restart loop that leaves a different node out each round).
    pub members_varied: bool,
}

/// One round of one store incarnation's rendezvous.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundTold<'a> {
    pub store_incarnation: u64,
    pub round: u64,
    pub first_at: SimInstant,
    pub last_at: SimInstant,
    pub completed_at: Option<SimInstant>,
    pub closed_at: Option<SimInstant>,
    /// The participants when the round completed (in rank order); for a round that never
    /// completed, every node that was a participant after one of its steps.
    pub participants: Vec<Member>,
    /// Everyone on the wait list, or on the redundancy list, after one of its steps that
    /// left the round complete (waiting for the next round: nodes still listed when the
    /// next one opens are on their way in), in the order they first appear.
    pub waited: Vec<Member>,
    pub redundant: Vec<Member>,
    /// Nodes removed for an expired heartbeat.
    pub dropped: Vec<Member>,
    pub moves: Vec<Move<'a>>,
    /// Whether some step's lists were left out (past the story's bound).
    pub lists_left_out: bool,
    /// Rounds right after it that went the same way.
    pub alike: Option<Alike>,
}

/// Whether the round-by-round story tells a step: a move between the lists, a completion or
/// a close, an expired node's removal (which a keep-alive may carry), or an op's error.
pub fn is_told(step: &RendezvousStep) -> bool {
    step.action.moves_lists()
        || !step.dropped.is_empty()
        || matches!(
            step.action,
            RendezvousAction::ErrorClosed | RendezvousAction::ErrorTimeout
        )
}

/// The story's rounds in time order, runs of rounds that went the same way folded.
pub fn rounds(story: &Story) -> Vec<RoundTold<'_>> {
    let mut told: Vec<RoundTold> = Vec::new();
    let mut current: Option<(RoundTold, Vec<&RendezvousStep>)> = None;
    for step in story.rendezvous.iter().filter(|s| is_told(s)) {
        let key = (step.store_incarnation, step.round);
        match &mut current {
            Some((round, steps)) if (round.store_incarnation, round.round) == key => {
                steps.push(step)
            }
            _ => {
                if let Some(done) = current.take() {
                    push_folded(&mut told, finish(done));
                }
                current = Some((open_round(step), vec![step]));
            }
        }
    }
    if let Some(done) = current.take() {
        push_folded(&mut told, finish(done));
    }
    told
}

/// A round begun by `step`.
fn open_round<'a>(step: &RendezvousStep) -> RoundTold<'a> {
    RoundTold {
        store_incarnation: step.store_incarnation,
        round: step.round,
        first_at: step.at,
        last_at: step.at,
        completed_at: None,
        closed_at: None,
        participants: Vec::new(),
        waited: Vec::new(),
        redundant: Vec::new(),
        dropped: Vec::new(),
        moves: Vec::new(),
        lists_left_out: false,
        alike: None,
    }
}

/// Entries in the order they were first seen, each once: O(log n) a look-up, since a
/// round of a large world lists every node at every step.
#[derive(Default)]
struct FirstSeen {
    list: Vec<Member>,
    seen: BTreeSet<Member>,
}

impl FirstSeen {
    fn add(&mut self, members: &[Member]) {
        for member in members {
            if self.seen.insert(*member) {
                self.list.push(*member);
            }
        }
    }
}

/// Adds each of `members` to `list` unless it is there (short lists: a move's expired
/// nodes).
fn add_new(list: &mut Vec<Member>, members: &[Member]) {
    for member in members {
        if !list.contains(member) {
            list.push(*member);
        }
    }
}

/// The round with its steps summed up: lists, moments and moves.
fn finish<'a>((mut round, steps): (RoundTold<'a>, Vec<&'a RendezvousStep>)) -> RoundTold<'a> {
    let mut was_complete = false;
    let [mut ever_participants, mut waited, mut redundant, mut dropped] =
        [(); 4].map(|()| FirstSeen::default());
    for (i, step) in steps.iter().enumerate() {
        round.last_at = step.at;
        dropped.add(&step.dropped);
        let completed = step.complete && !was_complete;
        was_complete = step.complete;
        if completed {
            round.completed_at = Some(step.at);
        }
        if step.closed && round.closed_at.is_none() {
            round.closed_at = Some(step.at);
        }
        match &step.lists {
            Some(lists) => {
                if completed {
                    round.participants = lists.participants.clone();
                }
                ever_participants.add(&lists.participants);
                if step.complete {
                    waited.add(&lists.wait_list);
                    redundant.add(&lists.redundancy_list);
                }
            }
            None => round.lists_left_out |= step.action.mutates_state(),
        }
        let opened = i == 0 && opens_round(step);
        push_move(&mut round.moves, step, completed, opened);
    }
    if round.completed_at.is_none() {
        round.participants = ever_participants.list;
    }
    (round.waited, round.redundant, round.dropped) = (waited.list, redundant.list, dropped.list);
    if round.moves.len() > ROUND_MOVES_MAX {
        // By kind on each side of the completion, so a group's moments stay together: the
        // joins that formed the round, then what came once it ran.
        let formed = round
            .moves
            .iter()
            .position(|m| m.completed)
            .map_or(round.moves.len(), |i| i + 1);
        let (before, after) = round.moves.split_at(formed);
        let mut moves = by_kind(before);
        moves.extend(by_kind(after));
        round.moves = moves;
    }
    round
}

/// Whether a round's first step is what opened it: the last participant of the round
/// before left, or its heartbeat expired.
fn opens_round(step: &RendezvousStep) -> bool {
    step.round > 0
        && !step.complete
        && (step.action == RendezvousAction::RemoveFromParticipants || !step.dropped.is_empty())
}

/// Adds `step` to the last move when it is of the same kind, else starts a move.
fn push_move<'a>(
    moves: &mut Vec<Move<'a>>,
    step: &'a RendezvousStep,
    completed: bool,
    opened: bool,
) {
    let taker = Member {
        node: step.node,
        pid: step.pid,
    };
    if let Some(last) = moves.last_mut() {
        if (last.op, last.action) == (step.op, step.action) && !opened {
            last.last_at = step.at;
            last.takers.push(taker);
            last.completed |= completed;
            add_new(&mut last.dropped, &step.dropped);
            (last.sizes_after, last.after) = (step.sizes, step.lists.as_ref());
            return;
        }
    }
    moves.push(Move {
        first_at: step.at,
        last_at: step.at,
        op: step.op,
        action: step.action,
        takers: vec![taker],
        completed,
        opened,
        dropped: step.dropped.clone(),
        sizes_after: step.sizes,
        after: step.lists.as_ref(),
    });
}

/// A busy round's moves told by kind, in the order each kind first came.
fn by_kind<'a>(moves: &[Move<'a>]) -> Vec<Move<'a>> {
    let mut kinds: Vec<Move> = Vec::new();
    for m in moves {
        match kinds
            .iter_mut()
            .find(|k| (k.op, k.action) == (m.op, m.action))
        {
            Some(kind) => {
                if m.last_at >= kind.last_at {
                    (kind.sizes_after, kind.after) = (m.sizes_after, m.after);
                }
                kind.last_at = kind.last_at.max(m.last_at);
                kind.takers.extend_from_slice(&m.takers);
                kind.completed |= m.completed;
                kind.opened |= m.opened;
                add_new(&mut kind.dropped, &m.dropped);
            }
            None => kinds.push(m.clone()),
        }
    }
    kinds
}

/// What makes two rounds go the same way: the same participants, redundant nodes and
/// expired nodes, as many waiters, as many steps of each kind, and both completed (or
/// closed) or not; not when, nor in which order, nor which node took which step (in a
/// restart loop the node that fails first changes from round to round).
#[derive(Debug, PartialEq, Eq)]
struct Shape {
    store_incarnation: u64,
    completed: bool,
    closed: bool,
    participants: usize,
    redundant: usize,
    dropped: usize,
    waited: usize,
    steps: BTreeMap<(RendezvousOp, RendezvousAction), usize>,
    lists_left_out: bool,
}

fn nodes(members: &[Member]) -> BTreeSet<NodeIndex> {
    members.iter().map(|m| m.node).collect()
}

fn shape(round: &RoundTold<'_>) -> Shape {
    let mut steps: BTreeMap<_, usize> = BTreeMap::new();
    for m in &round.moves {
        *steps.entry((m.op, m.action)).or_default() += m.takers.len();
    }
    Shape {
        store_incarnation: round.store_incarnation,
        completed: round.completed_at.is_some(),
        closed: round.closed_at.is_some(),
        participants: round.participants.len(),
        redundant: round.redundant.len(),
        dropped: round.dropped.len(),
        waited: round.waited.len(),
        steps,
        lists_left_out: round.lists_left_out,
    }
}

/// The nodes a round's lists name, for telling whether folded rounds had other members.
fn members(round: &RoundTold<'_>) -> [BTreeSet<NodeIndex>; 3] {
    [
        nodes(&round.participants),
        nodes(&round.redundant),
        nodes(&round.dropped),
    ]
}

/// Adds `round`, folded into the round told last when it is that round's successor (or
/// the successor of the last round folded into it) and went the same way: as many nodes in
/// each list and the same steps, whichever nodes they were.
fn push_folded<'a>(told: &mut Vec<RoundTold<'a>>, round: RoundTold<'a>) {
    if let Some(last) = told.last_mut() {
        let next = last.alike.map_or(last.round, |a| a.last_round) + 1;
        if round.round == next && shape(last) == shape(&round) {
            let rounds = last.alike.map_or(0, |a| a.rounds) + 1;
            let varied =
                last.alike.is_some_and(|a| a.members_varied) || members(last) != members(&round);
            last.alike = Some(Alike {
                rounds,
                last_round: round.round,
                last_at: round.last_at,
                members_varied: varied,
            });
            return;
        }
    }
    told.push(round);
}
