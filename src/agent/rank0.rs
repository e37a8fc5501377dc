//! Which node holds group rank 0 now: each agent notes the rounds it completes in a value the
//! run's processes share, and a fault aimed at `rank0` asks it when the fault fires (through
//! the resolver the runner hands the world), so the world never reads a rendezvous.

use crate::scenario::model::NodeRole;
use crate::world::{NodeEnv, SharedValues};
use std::sync::Mutex;

/// The key of the board in the run's shared values.
const RANK0_KEY: &str = "agent.rank0";

/// The latest completed round's rank 0, as the agents saw their rounds complete.
#[derive(Debug, Default)]
pub struct Rank0Board(Mutex<Option<RoundRank0>>);

/// Rank 0 of one round: a round is known by its store incarnation and its number (a
/// restarted store starts a new rendezvous whose rounds count from the start again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct RoundRank0 {
    store_incarnation: u64,
    round: u64,
    node: u32,
}

impl Rank0Board {
    /// An agent completed `round` of the store's `store_incarnation` with `node` at group
    /// rank 0. A round older than the one noted (an agent finishing it late) changes
    /// nothing: rank 0 is the latest round's.
    pub fn completed(&self, store_incarnation: u64, round: u64, node: u32) {
        let seen = RoundRank0 {
            store_incarnation,
            round,
            node,
        };
        let mut board = self.0.lock().expect("rank0 board lock");
        let newer = board.is_none_or(|noted| {
            (seen.store_incarnation, seen.round) >= (noted.store_incarnation, noted.round)
        });
        if newer {
            *board = Some(seen);
        }
    }

    /// The node at rank 0 of the latest completed round; `None` before any round completed.
    pub fn holder(&self) -> Option<u32> {
        self.0.lock().expect("rank0 board lock").map(|r| r.node)
    }
}

/// An agent on this node completed a round whose participants, in rank order, start with
/// `rank0_node`: the run's board notes it.
pub fn round_completed(env: &NodeEnv, store_incarnation: u64, round: u64, rank0_node: u32) {
    env.shared::<Rank0Board>(RANK0_KEY)
        .completed(store_incarnation, round, rank0_node);
}

/// The agents' side of resolving a fault's role: the node that holds it now, when the agents
/// give it out (rank 0); why not, for a role that is not theirs or that no node holds yet.
pub fn resolve_role(role: NodeRole, shared: &SharedValues) -> Result<u32, String> {
    match role {
        NodeRole::Rank0 => shared
            .get::<Rank0Board>(RANK0_KEY)
            .holder()
            .ok_or_else(|| "no rendezvous round has completed yet".to_owned()),
        NodeRole::StoreHost => Err("the agents do not place the store".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_round_names_rank0_and_a_late_old_round_does_not() {
        let board = Rank0Board::default();
        assert_eq!(board.holder(), None);
        board.completed(1, 0, 0);
        assert_eq!(board.holder(), Some(0));
        board.completed(1, 2, 3);
        assert_eq!(board.holder(), Some(3));
        board.completed(1, 1, 5);
        assert_eq!(board.holder(), Some(3), "round 1 finished after round 2");
        // A restarted store's rendezvous counts its rounds from 0 again.
        board.completed(2, 0, 4);
        assert_eq!(board.holder(), Some(4));
    }
}
