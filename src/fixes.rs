//! The opt-in named fixes of torch's, HugeCTR's and the agent's behaviour: words of the
//! scenario format (`rendezvous.fixes`, `agent.fixes`, `reader.fixes`), kept on the ground
//! floor so the scenario names them without reaching up into the subsystems that act on them.
//! Each fix declares here, once, what the docs, fuzz triage and the scenario suite say about
//! it ([`FixInfo`]); `tests/fixes_documented.rs` holds the docs and `scenarios/` to it. The
//! sampler's fix, which only `trainsim sample` switches on, declares its [`FixInfo`] through
//! the same [`Fix`] trait beside the sampler.

use serde::{Deserialize, Serialize};

/// What is said about one opt-in fix, declared on its variant so that adding a fix is the
/// variant, the code that acts on it, its scenario pair and the doc rows a test asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixInfo {
    /// The upstream issue or behaviour the fix removes, as fuzz triage labels a finding it
    /// removes: `pytorch#111646`, or the project and behaviour when no issue is filed.
    pub upstream: &'static str,
    /// What switching the fix on changes, in one line for users (the docs' fix tables).
    pub summary: &'static str,
    /// What shows the behaviour with the fix off and its absence with the fix on.
    pub shown_by: ShownBy,
}

/// What shows a fix at work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShownBy {
    /// A scenario pair: `scenarios/<stem>.toml` shows the behaviour and
    /// `scenarios/<stem>_fixed.toml` switches the fix on.
    Scenarios(&'static str),
    /// An integration test, `tests/<stem>.rs`, for a fix no scenario key switches on.
    Test(&'static str),
}

/// An enum of opt-in fixes switched on in one place, each variant with its [`FixInfo`].
pub trait Fix: Copy + Into<&'static str> + strum::VariantArray + 'static {
    /// Where a user switches these fixes on: a scenario key (`rendezvous.fixes`) or, for a
    /// fix no scenario names, a command's option (`trainsim sample --fix`).
    const KEY: &'static str;

    /// What is said about this fix.
    fn info(self) -> FixInfo;
}

/// The opt-in agent fixes `agent.fixes` may switch on, named in kebab-case; the list order
/// is the order error messages name them in.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum AgentFix {
    /// Fix for pytorch#135712 / pytorch#108158: `TORCHELASTIC_RESTART_COUNT` is per agent, so
    /// after one node's failure the agents of the same new group hold different counts, and the
    /// group as a whole can restart after failures more often than `max_restarts`. With this
    /// fix every agent publishes its count through the round's store when it starts workers and
    /// adopts the group's highest, so the count and the budget left are the group's.
    SharedRestartCount,
    /// Fix for pytorch#147064: a node whose agent was killed and came back quickly lands on the
    /// wait list, and the survivors restart as a free membership change, so `max_restarts = 0`
    /// does not stop a crash loop. With this fix a membership restart counts against the budget
    /// when a waiting node has the address of a member of the running group (its process was
    /// replaced: a failure, not a scale-up).
    CountRejoinedFailures,
    /// Fix for one agent's failure closing the rendezvous for all: torch's `launch_agent`
    /// calls `shutdown()`, which closes the rendezvous, on every exit but a signal, so one
    /// agent that fails (its budget spent, or a rendezvous error of its own) ends every other
    /// agent at its next re-rendezvous. With this fix a FAILED agent leaves the rendezvous open,
    /// as torch already does for a signal and as forks do for an unhealthy node.
    KeepOpenOnFailure,
    /// Fix for `TORCHELASTIC_USE_AGENT_STORE` trusting a `MASTER_PORT` the training script
    /// set itself: torch's workers take the agent as their store's server whenever the
    /// address is their `MASTER_ADDR:MASTER_PORT` at the call, so a script that sets
    /// `MASTER_PORT` before `env://` makes every rank a client of a port nobody serves. With
    /// this fix the agent's own address is what they compare with, and the script's port gets
    /// a store its rank 0 hosts.
    AgentStoreAddressExported,
}

impl Fix for AgentFix {
    const KEY: &'static str = "agent.fixes";

    fn info(self) -> FixInfo {
        match self {
            AgentFix::SharedRestartCount => FixInfo {
                upstream: "pytorch#135712/#108158",
                summary: "each agent publishes its restart count in the round's store when it \
                    starts workers and adopts the group's highest, so \
                    `TORCHELASTIC_RESTART_COUNT` and the budget left are the group's, not the \
                    agent's",
                shown_by: ShownBy::Scenarios("restart_counts_diverge"),
            },
            AgentFix::CountRejoinedFailures => FixInfo {
                upstream: "pytorch#147064",
                summary: "a membership restart counts against `max_restarts` when a waiting node \
                    has the address of a member of the running group (its agent was killed and \
                    came back), so a fast kill-and-rejoin loop cannot restart forever",
                shown_by: ShownBy::Scenarios("fast_rejoin_bypasses_max_restarts"),
            },
            AgentFix::KeepOpenOnFailure => FixInfo {
                upstream: "torch: one agent's failure closes the rendezvous",
                summary: "`launch_agent` does not close the rendezvous when the agent exits \
                    FAILED (its budget spent or a rendezvous error of its own), so the other \
                    agents can re-rendezvous without it; torch closes it on every exit but a \
                    signal",
                shown_by: ShownBy::Scenarios("failed_agent_closes_rendezvous"),
            },
            AgentFix::AgentStoreAddressExported => FixInfo {
                upstream: "torch: the agent's store trusted at a script's own `MASTER_PORT`",
                summary: "workers take the agent as their store's server only at the address \
                    the agent serves, not at whatever `MASTER_PORT` holds when \
                    `init_process_group` runs, so a script that sets its own `MASTER_PORT` \
                    gets a store its rank 0 hosts instead of waiting for one nobody serves",
                shown_by: ShownBy::Scenarios("script_master_port_nobody_serves"),
            },
        }
    }
}

/// The opt-in deviations from torch `rendezvous.fixes` may switch on, named in kebab-case
/// (`dead-participant-rejoin`); the list order is the order error messages name them in.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum RendezvousFix {
    /// Fix for pytorch#111646: a participant that dies after its round completed is noticed.
    /// torch's `num_nodes_waiting()` counts only the wait list, so survivors of a dead
    /// participant keep training until the process group times out. With this fix,
    /// `num_nodes_waiting()` also counts members of this node's round that sanitize has since
    /// dropped for missing heartbeats, so the agent re-rendezvouses at its next monitor tick
    /// (a membership change, no restart spent).
    DeadParticipantRejoin,
    /// Fix for a restarted node's stale entry. torch names a node by (address, pid, local id),
    /// so an agent killed and restarted on the same host joins as a new node while its dead
    /// entry stays in the state until its heartbeat expires. In an open round the dead entry
    /// counts toward `max_nodes` and the round completes listing the host twice, with a rank
    /// nobody will ever fill. With this fix, a node entering the state first drops every entry
    /// with its address and local id but another pid (participant, wait list, redundancy list,
    /// heartbeat), running the participant epilogue as sanitize does.
    RestartedNodeReplacesEntry,
    /// Fix for wall-clock skew eating the heartbeat margin. torch stamps a heartbeat with the
    /// writer's wall clock and expires it against the reader's, so a writer whose clock runs
    /// more than `keep_alive_interval × (keep_alive_max_attempt − 1)` behind is dropped between
    /// its heartbeats while alive. With this fix each reader judges a heartbeat's age by its own
    /// monotonic clock since it saw the stamp change (`sanitize::HeartbeatReceipts`).
    MonotonicHeartbeats,
    /// Fix for a stale bootstrap address. With TCPStore sharing, torch 2.15's
    /// `next_rendezvous` builds the workers' `MASTER_ADDR`/`MASTER_PORT` on an agent's first
    /// rendezvous and rebuilds it only when the agent becomes rank 0 without a server. After
    /// rank 0 dies, an agent that stays non-rank-0 keeps the dead node's address while the new
    /// rank 0 serves another: the workers of one group are sent to two masters and never form a
    /// process group. With this fix every agent rebuilds its bootstrap address every round.
    RefreshMasterAddr,
    /// Fix for the world-size disagreement race. torch's `_get_world` returns the rank and
    /// `len(participants)` of the state as this node last synced it, and every sync sanitizes
    /// nodes with an expired heartbeat out of a complete round. Two nodes that finish their join
    /// of one round on either side of a dead participant's expiry report two world sizes, and
    /// ranks that point at different nodes, for the same round. With this fix the op that marks
    /// the round complete also records its participants and ranks in the state, and the world a
    /// finished join reads is that record, whatever sanitize dropped since.
    WorldAtCompletion,
    /// Fix for pytorch#191190: `_mark_rendezvous_complete` hands out ranks in
    /// `sorted(participants)` order, which compares node addresses as strings, so with 12
    /// nodes `node-10` and `node-11` come before `node-2`, which gets rank 4 (likewise
    /// `127.0.0.10` before `127.0.0.2`). With this fix the numbers inside an address compare
    /// as numbers, so ranks follow the nodes' natural order.
    NaturalNodeOrder,
    /// Fix for a waiter left out of a full round. When a round reopens with more waiting
    /// nodes than `max_nodes`, the first `max_nodes` to add themselves complete it, and the
    /// others stay on the wait list: torch's join op moves a node to the redundancy list only
    /// when it was on neither list. `num_nodes_waiting()` counts the wait list, so the new
    /// group restarts at its next monitor tick, the round reopens, and one node is again
    /// left waiting, for ever. With this fix, the op that completes a round at `max_nodes`
    /// moves the wait list onto the redundancy list, where a node waits for a free place
    /// without restarting anyone.
    FullRoundParksWaiters,
}

impl RendezvousFix {
    /// The fix's name as a scenario file spells it.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

impl Fix for RendezvousFix {
    const KEY: &'static str = "rendezvous.fixes";

    fn info(self) -> FixInfo {
        match self {
            RendezvousFix::DeadParticipantRejoin => FixInfo {
                upstream: "pytorch#111646",
                summary: "`num_nodes_waiting()` also counts members of this node's round that \
                    heartbeat expiry removed, so survivors of a dead participant re-rendezvous at \
                    their next monitor tick instead of waiting out the collective timeout",
                shown_by: ShownBy::Scenarios("powered_off_after_round"),
            },
            RendezvousFix::RestartedNodeReplacesEntry => FixInfo {
                upstream: "torch: a restarted node's stale entry",
                summary: "a node entering the state (participants, wait list or redundancy list) \
                    first drops every entry with its address and local id but another pid, as \
                    heartbeat expiry would later; torch keeps a restarted agent's dead entry \
                    until it expires, so an open round can complete listing the host twice",
                shown_by: ShownBy::Scenarios("restarted_node_listed_twice"),
            },
            RendezvousFix::MonotonicHeartbeats => FixInfo {
                upstream: "torch: wall-clock heartbeat expiry",
                summary: "each node ages a heartbeat by its own monotonic clock since it saw that \
                    node's stamp change, instead of comparing the writer's wall-clock stamp with \
                    its own wall clock, so clock skew cannot eat the expiry margin; a node first \
                    seen already dead is dropped up to one expiry later than torch would",
                shown_by: ShownBy::Scenarios("clock_skew_eats_heartbeat_margin"),
            },
            RendezvousFix::RefreshMasterAddr => FixInfo {
                upstream: "torch 2.15: stale bootstrap address",
                summary: "every agent rebuilds its workers' bootstrap address \
                    (`MASTER_ADDR`/`MASTER_PORT`) every round; torch 2.15 builds it on an agent's \
                    first rendezvous and rebuilds it only on a rank 0 without a server, so a \
                    survivor of a dead rank 0 keeps the dead master and a late joiner waits for \
                    an address nobody publishes",
                shown_by: ShownBy::Scenarios("rank0_dies_stale_master"),
            },
            RendezvousFix::WorldAtCompletion => FixInfo {
                upstream: "torch: world size read after sanitize",
                summary: "the op that marks a round complete also records its participants and \
                    ranks in the rendezvous state, and a finished join reports its rank, world \
                    size and participants from that record; torch's `_get_world` reads them from \
                    the state as last synced, after sanitize may have dropped a dead participant, \
                    so nodes that finish one round on either side of a heartbeat expiry report \
                    two world sizes",
                shown_by: ShownBy::Scenarios("world_size_race"),
            },
            RendezvousFix::NaturalNodeOrder => FixInfo {
                upstream: "pytorch#191190",
                summary: "ranks are handed out in the nodes' natural order, the numbers inside \
                    addresses compared as numbers (`node-2` before `node-10`); torch sorts the \
                    addresses as strings, so with 12 nodes `node-2` gets rank 4",
                shown_by: ShownBy::Scenarios("ranks_follow_string_order"),
            },
            RendezvousFix::FullRoundParksWaiters => FixInfo {
                upstream: "torch: a waiter left out of a full round",
                summary: "the op that completes a round at `max_nodes` moves the nodes still on \
                    the wait list to the redundancy list; torch leaves them waiting, so \
                    `num_nodes_waiting()` restarts the new group at once and the round that \
                    follows leaves one node out again, for ever",
                shown_by: ShownBy::Scenarios("spare_left_waiting"),
            },
        }
    }
}

/// The opt-in deviations from HugeCTR `reader.fixes` may switch on, named in kebab-case and
/// declared in name order (the order error messages list them in).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[strum(serialize_all = "kebab-case")]
pub enum ReaderFix {
    /// Fix: after a broken read makes a worker open the next file, do not count the failed read
    /// against that new file. HugeCTR resets its record index to 0 when it opens the file and
    /// then still increments it for the failed read, so the new file ends one record early.
    BrokenReadRecordIndex,
    /// Fix: a batch that ends at end-of-data with no record (every record in it failed its
    /// checksum) takes the end-of-data path instead of being published as a size-0 batch, which
    /// HugeCTR's collector cannot tell apart from the end marker.
    EmptyBatchIsEndMarker,
    /// Fix: `Model::train` trains on incomplete batches instead of dropping them.
    TrainKeepsIncompleteBatches,
    /// Fix: a worker whose retries run out publishes what it read and then its end marker, as at
    /// end-of-data, instead of letting its thread die while the collector waits on it forever.
    WorkerFailureIsEndOfData,
}

impl Fix for ReaderFix {
    const KEY: &'static str = "reader.fixes";

    fn info(self) -> FixInfo {
        match self {
            ReaderFix::BrokenReadRecordIndex => FixInfo {
                upstream: "HugeCTR: a broken read counted against the next file",
                summary: "after a broken read makes a worker open the next file, the failed read \
                    is not counted against that file (HugeCTR resets its record index to 0 on \
                    opening the file and then still counts the failed read, so the new file ends \
                    one record early)",
                shown_by: ShownBy::Scenarios("reader_broken_read"),
            },
            ReaderFix::EmptyBatchIsEndMarker => FixInfo {
                upstream: "HugeCTR: an empty batch taken for the end marker",
                summary: "a batch that ends at end-of-data with no record (every record in it \
                    failed its checksum) takes the end-of-data path instead of being published \
                    as a size-0 batch, which HugeCTR's collector cannot tell from the end marker",
                shown_by: ShownBy::Scenarios("reader_empty_batch_collides"),
            },
            ReaderFix::TrainKeepsIncompleteBatches => FixInfo {
                upstream: "HugeCTR: `Model::train` drops incomplete batches",
                summary: "`Model::train` trains on incomplete batches instead of dropping them",
                shown_by: ShownBy::Scenarios("reader_train_drops_incomplete"),
            },
            ReaderFix::WorkerFailureIsEndOfData => FixInfo {
                upstream: "HugeCTR: a dead worker hangs the collector",
                summary: "a worker whose retries run out publishes what it read and then its end \
                    marker, as at end-of-data, instead of its thread dying while the collector \
                    waits on it for ever",
                shown_by: ShownBy::Scenarios("reader_worker_dies"),
            },
        }
    }
}
