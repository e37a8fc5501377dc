//! The state holder of a node's rendezvous handler (torch's
//! `_BackendRendezvousStateHolder` with the op executor that drives it): the
//! sync-decide-apply loop, the compare-and-set on the encoded state with its 1 s cache,
//! the backoff after a lost write, and sanitizing what it reads.

use super::planned_write::PlannedWrite;
use super::RendezvousError;
use crate::rendezvous::decoded_states::{DecodedStates, SharedState};
use crate::rendezvous::edits::Membership;
use crate::rendezvous::ops::{decide, Action, OpContext, OpKind};
use crate::rendezvous::quiet_wait;
use crate::rendezvous::sanitize::{drop_nodes, sanitize, HeartbeatReceipts};
use crate::rendezvous::settings::{RendezvousFix, RendezvousSettings};
use crate::rendezvous::skipped_beats;
use crate::rendezvous::state::{NodeDesc, RendezvousState};
use crate::rendezvous::story;
use crate::sim_time::{
    deadline_after, reading_before, span_between_readings, SimDuration, SimInstant,
};
use crate::store::cost::StoreCosts;
use crate::store::service::StoreClient;
use crate::store::Value;
use crate::trace::EventKind;
use crate::world::net::{CallCpu, ReplyCpu};
use crate::world::{time, NodeEnv};
use std::sync::Arc;

/// What the c10d backend stores under the state key before anyone wrote a state
/// (torch's null sentinel, base64 of "canimadam").
pub(super) const NULL_SENTINEL: &[u8] = b"Y2FuaW1hZGFt";
/// The state holder serves a cached state for this long (torch's `cache_duration`).
pub const CACHE: SimDuration = SimDuration::from_secs(1);
/// What torch's `_keep_alive` spends in Python after its last store call returns and before
/// its timer waits the next interval: it logs through `_record`, which calls
/// `inspect.stack()`. Measured on torch 2.15.0 (`conformance/measure_keepalive.py --tail`,
/// two batches of 20 calls): 0.50 to 1.28 ms, medians 0.80 and 1.13 ms. So a keep-alive
/// every second finds the state its last one cached just over `CACHE` old, stale, and reads
/// the store before it writes. The model's timer ticks exactly one interval apart: the tail
/// is added to the cache's age at each keep-alive's first sync, not to the timer's period.
pub const KEEP_ALIVE_TAIL: SimDuration = SimDuration::from_us(1_000);
/// `SYNC` waits this long before polling again (torch's `_delay(seconds=1)`).
pub const SYNC_DELAY: SimDuration = SimDuration::from_secs(1);

/// Whether a step that writes nothing goes into the run's story: FINISH of a join (the
/// node's round) or a close, and every error. The exit and keep-alive ops finish with
/// nothing more to do, at every `next_rendezvous` and every timer tick.
fn ends_op_in_story(op: OpKind, action: Action) -> bool {
    match action {
        Action::Finish => matches!(op, OpKind::Join | OpKind::Close),
        Action::ErrorClosed | Action::ErrorTimeout => true,
        _ => false,
    }
}

/// What a sync's exchange with the store finds: the value now stored, and the value
/// written with its write, if any.
type Exchanged = (Value, Option<(Value, Arc<PlannedWrite>)>);

/// The state holder and its store client: torch's `_BackendRendezvousStateHolder`.
pub(super) struct Holder {
    pub(super) env: NodeEnv,
    pub(super) node: NodeDesc,
    /// The length of `node`'s encoding in a state: every write's length is counted from it.
    pub(super) node_bytes: i64,
    pub(super) settings: Arc<RendezvousSettings>,
    pub(super) store: StoreClient,
    pub(super) key: String,
    /// The synced state, shared with every node that read the same bytes; copied on write.
    /// Read it through `state()`, which counts a write not yet made.
    pub(super) synced: Arc<RendezvousState>,
    /// The run's decoded states, shared by every node of the run.
    pub(super) decoded: Arc<DecodedStates>,
    /// What the store's requests cost (`[cluster] store_cost_scale`), and the CPU this
    /// node spends decoding each state it reads, made from them once.
    pub(super) costs: StoreCosts,
    pub(super) decoding: ReplyCpu,
    pub(super) token: Option<Value>,
    /// The write the next sync makes: the state is dirty while there is one.
    pub(super) unwritten: Option<Arc<PlannedWrite>>,
    pub(super) last_sync_mono_us: Option<i64>,
    /// The monitor's last read a quiet window skipped (`skipped_beats::last_skipped_read`).
    pub(super) skipped_read_mono_us: Option<i64>,
    /// Events to record once the next write lands: a close or a heartbeat.
    pub(super) pending_event: Option<EventKind>,
    /// The step the next write makes, for the run's story once it lands (a keep-alive only
    /// when its write removed expired nodes: the trace has each as a heartbeat).
    pub(super) pending_step: Option<(OpKind, Action, SimInstant)>,
    /// The nodes the last sync's sanitize removed: the next write that lands removes them
    /// from the shared state.
    pub(super) dropped_at_sync: Vec<NodeDesc>,
    /// The store incarnation this handler's client reached, once the story learned it.
    pub(super) story_incarnation: Option<u64>,
    /// With the opt-in fix `dead-participant-rejoin`: the round this node last joined and
    /// its participants (the list shared by the nodes that joined the same world).
    pub(super) joined: Option<(u64, Arc<[NodeDesc]>)>,
    /// When this node saw each heartbeat stamp change (for the opt-in fix
    /// `monotonic-heartbeats`); empty without it.
    pub(super) receipts: HeartbeatReceipts,
    /// Draws the waits after lost writes (`cas_backoff_max_seconds`), made at the first.
    pub(super) backoff: Option<rand_chacha::ChaCha8Rng>,
}

/// torch's `has_set`: whether the bytes now stored are the bytes written. The server
/// answers a write that landed with the very value sent; otherwise the bytes are equal only
/// when another write made the same state (`PlannedWrite::is_written_as`).
fn landed(stored: &Value, ours: &Value, write: &PlannedWrite, synced: &SharedState) -> bool {
    if Value::same(stored, ours) {
        return true;
    }
    if is_null_sentinel(stored) {
        return stored == ours;
    }
    write.is_written_as(ours, stored, &synced.state)
}

/// Whether a stored value is torch's null sentinel. A written state never is, and reading
/// its bytes to find that out would encode it: every sync did, for every state it read.
fn is_null_sentinel(value: &Value) -> bool {
    !value.is_made_from::<RendezvousState>() && value.bytes() == NULL_SENTINEL
}

impl Holder {
    /// torch's `_DistributedRendezvousOpExecutor.run`: sync, decide, apply, until FINISH.
    pub(super) async fn run(
        &mut self,
        op: OpKind,
        mut deadline_mono_us: i64,
        update_deadline: bool,
    ) -> Result<(), RendezvousError> {
        let mut python_before = match op {
            OpKind::KeepAlive => KEEP_ALIVE_TAIL,
            _ => SimDuration::ZERO,
        };
        loop {
            if self.sync_aged(python_before).await? == Some(false) {
                self.back_off().await;
            }
            python_before = SimDuration::ZERO;
            let now_utc_us = self.env.now_utc_us();
            let now_mono_us = self.env.now_mono_us();
            let ctx = OpContext::new(&self.node, self.state(), &self.settings);
            let decided = decide(op, &ctx, now_utc_us, now_mono_us, deadline_mono_us);
            let member = ctx.member;
            let Ok(action) = decided else {
                self.env.set_busy();
                return decided
                    .map(|_| ())
                    .map_err(|e| RendezvousError::GracefulExit(e.run_id));
            };
            if op == OpKind::Join
                && self
                    .wait_slept_through_window(action, deadline_mono_us)
                    .await
            {
                continue;
            }
            if ends_op_in_story(op, action) {
                self.record_unwritten_step(op, action);
            }
            match action {
                Action::Finish => return Ok(()),
                Action::ErrorClosed => {
                    return Err(RendezvousError::Closed(self.settings.run_id.clone()))
                }
                Action::ErrorTimeout => {
                    return Err(RendezvousError::Timeout(self.settings.run_id.clone()))
                }
                Action::Sync => time::sleep(SYNC_DELAY).await,
                _ => {
                    self.apply_for_write(op, action, member, now_utc_us);
                    if action == Action::RemoveFromRedundancyList && update_deadline {
                        // A redundant node may now take part: it gets a fresh join timeout.
                        deadline_mono_us = deadline_after(now_mono_us, self.settings.join_timeout);
                    }
                }
            }
        }
    }

    /// This node's copy of the state: the state last synced, with the change of a write
    /// not yet made (built now if it was not).
    pub(super) fn state(&self) -> &Arc<RendezvousState> {
        match &self.unwritten {
            Some(write) => write.state(),
            None => &self.synced,
        }
    }

    /// Plans a state-changing `action` of `op` on this node's copy of the state (where its
    /// entries are `member`), to be written by the next sync, with the event and the story's
    /// step to record once that write lands.
    fn apply_for_write(&mut self, op: OpKind, action: Action, member: Membership, now_utc_us: i64) {
        let base = Arc::clone(self.state());
        let write = PlannedWrite::new(
            base,
            action,
            (self.node.clone(), member, self.node_bytes),
            Arc::clone(&self.settings),
            now_utc_us,
        );
        self.pending_event = match action {
            Action::MarkRendezvousClosed => Some(EventKind::RendezvousClosed {
                pid: self.env.pid,
                // Closing leaves the round as it is.
                round: write.base().round,
                // Filled in when the write lands (the client is bound by then).
                store_incarnation: 0,
            }),
            Action::KeepAlive => Some(EventKind::Heartbeat { pid: self.env.pid }),
            _ => None,
        };
        self.pending_step = Some((op, action, time::now_whole_us()));
        self.unwritten = Some(write);
    }

    /// The story's step of `op` taking `action` at `at` on `state`, the lists made from
    /// `state` if the story keeps them; `dropped` are the expired nodes the step removed.
    fn record_step(
        &mut self,
        (op, action, at): (OpKind, Action, SimInstant),
        state: &RendezvousState,
        dropped: &[NodeDesc],
    ) {
        if self.story_incarnation.is_none() {
            // Asked without waiting (a client stays bound to the incarnation it reached): a
            // record must not move the simulation.
            let asked = futures::FutureExt::now_or_never(self.store.incarnation());
            self.story_incarnation = asked.flatten();
        }
        let taker = story::StepTaker {
            at,
            node: crate::scenario::node::NodeIndex(self.env.index),
            pid: self.env.pid,
            op,
            action,
            store_incarnation: self.story_incarnation.unwrap_or(0),
        };
        let step = story::step(taker, state, dropped);
        self.env
            .record_rendezvous_step(step, || story::lists(state));
    }

    /// A step that ends the op without writing (FINISH of a join or close, an error), on
    /// the state it was decided on.
    fn record_unwritten_step(&mut self, op: OpKind, action: Action) {
        let state = Arc::clone(self.state());
        self.record_step((op, action, time::now_whole_us()), &state, &[]);
    }

    /// The pending step, now that its write landed as `written`; a keep-alive only when
    /// the write also removed expired nodes.
    fn record_landed_step(&mut self, written: &RendezvousState) {
        let Some(pending) = self.pending_step.take() else {
            return;
        };
        let dropped = std::mem::take(&mut self.dropped_at_sync);
        if pending.1 != Action::KeepAlive || !dropped.is_empty() {
            self.record_step(pending, written, &dropped);
        }
    }

    /// A join's wait: a routine step sleeps through a quiet window when one is open (true);
    /// any other step of the join announces that this process acts.
    async fn wait_slept_through_window(&self, action: Action, deadline_mono_us: i64) -> bool {
        if !quiet_wait::is_routine(action, self.state()) {
            self.env.set_busy();
            return false;
        }
        let (env, node, settings) = (&self.env, &self.node, &self.settings);
        let outcome =
            quiet_wait::wait(env, node, settings, self.state(), action, deadline_mono_us).await;
        outcome == quiet_wait::WaitOutcome::Slept
    }

    /// torch's backoff after a write that lost (`cas_backoff_max_seconds`; off by default).
    async fn back_off(&mut self) {
        let max = self.settings.cas_backoff_max;
        if max.is_zero() {
            return;
        }
        let env = &self.env;
        let rng = self.backoff.get_or_insert_with(|| env.rng("cas-backoff"));
        if let Some(delay) = crate::rendezvous::backoff::delay_after_lost_write(max, rng) {
            time::sleep(delay).await;
        }
    }

    /// torch's `_BackendRendezvousStateHolder.sync`: write if dirty (CAS on the token), else
    /// read unless the cache is fresh; then sanitize. Returns whether a write landed.
    pub(super) async fn sync(&mut self) -> Result<Option<bool>, RendezvousError> {
        self.sync_aged(SimDuration::ZERO).await
    }

    /// [`Self::sync`], its cache judged `python_before` older: the Python torch ran since
    /// the last sync that the model's timer does not count (`KEEP_ALIVE_TAIL`).
    async fn sync_aged(
        &mut self,
        python_before: SimDuration,
    ) -> Result<Option<bool>, RendezvousError> {
        let Some((bits, written)) = self.write_or_read(python_before).await? else {
            return Ok(None);
        };
        let synced = if !is_null_sentinel(&bits) {
            let synced = self
                .decoded
                .decode(&bits)
                .map_err(|e| RendezvousError::State(e.to_string()))?;
            self.token = Some(bits.clone());
            synced
        } else {
            self.token = None;
            SharedState::new(Arc::default())
        };
        let has_set = written.map(|(ours, write)| landed(&bits, &ours, &write, &synced));
        if has_set == Some(true) {
            self.record_landed_step(&synced.state);
            if let Some(mut event) = self.pending_event.take() {
                if let EventKind::RendezvousClosed {
                    store_incarnation, ..
                } = &mut event
                {
                    *store_incarnation = self.store.incarnation().await.unwrap_or(0);
                }
                self.env.record(event);
            }
        } else if has_set == Some(false) {
            self.pending_event = None;
            self.pending_step = None;
        }
        self.unwritten = None;
        self.last_sync_mono_us = Some(self.env.now_mono_us());
        let now_utc_us = self.env.now_utc_us();
        self.synced = synced.state.clone();
        skipped_beats::apply(&self.env, &mut self.synced, &synced);
        self.dropped_at_sync = self.drop_dead(&synced, now_utc_us);
        Ok(has_set)
    }

    /// Sanitizes the state just read: drops the nodes whose heartbeat expired (by the
    /// monotonic receipts with `monotonic-heartbeats`) and returns them.
    fn drop_dead(&mut self, synced: &SharedState, now_utc_us: i64) -> Vec<NodeDesc> {
        if self.settings.has_fix(RendezvousFix::MonotonicHeartbeats) {
            let now_mono_us = self.env.now_mono_us();
            self.receipts.observe(&self.synced, now_mono_us);
            let dead = self.receipts.expired(&self.settings, now_mono_us);
            if !dead.is_empty() {
                drop_nodes(Arc::make_mut(&mut self.synced), &self.settings, &dead);
                self.synced.assert_well_formed(&self.settings);
            }
            return dead;
        }
        if !synced.may_expire(&self.settings, now_utc_us) {
            return Vec::new();
        }
        let dead = sanitize(Arc::make_mut(&mut self.synced), &self.settings, now_utc_us);
        if !dead.is_empty() {
            // A node died: rare, so the whole state is checked, O(nodes).
            self.synced.assert_well_formed(&self.settings);
        }
        dead
    }

    /// The exchange with the store: a compare-and-set of this node's state when dirty, else
    /// a read, unless the last sync is under a second old. Returns the value now stored, and
    /// the value written, if any. The write is lazy: its bytes are made only if it lands.
    async fn write_or_read(
        &mut self,
        python_before: SimDuration,
    ) -> Result<Option<Exchanged>, RendezvousError> {
        if let Some(write) = &self.unwritten {
            // The state is the token's (the state last read) changed a little: its length
            // is counted from the token's by what changed.
            let write = Arc::clone(write);
            let ours = write.value(self.token.as_ref());
            let expected = self
                .token
                .clone()
                .unwrap_or_else(|| Value::from(NULL_SENTINEL));
            // torch pickles and base64-encodes the state before the write, and decodes the
            // state it gets back: CPU time that grows with the nodes.
            let cpu = CallCpu {
                before_ns: self.costs.state_encode_ns(ours.len()),
                after: Some(Arc::clone(&self.decoding)),
            };
            let stored = self
                .store
                .compare_set_costing(&self.key, (expected, ours.clone()), cpu)
                .await?;
            return Ok(Some((stored, Some((ours, write)))));
        }
        if let Some(last) = self.last_sync_or_skipped_mono_us() {
            let fresh_for = CACHE.saturating_sub(python_before);
            if last >= reading_before(self.env.now_mono_us(), fresh_for).max(0) {
                return Ok(None);
            }
        }
        let cpu = CallCpu {
            before_ns: 0,
            after: Some(Arc::clone(&self.decoding)),
        };
        let stored = self.store.get_costing(&self.key, cpu).await?;
        Ok(Some((stored, None)))
    }

    /// The last sync on this node's monotonic clock, counting a keep-alive skipped in a
    /// quiet window and the monitor's reads the window skipped: torch's keep-alive syncs the
    /// state, which keeps the agent's cache fresh, so after a window the agent reads the
    /// store only when the exact path's would.
    fn last_sync_or_skipped_mono_us(&self) -> Option<i64> {
        let skipped = self
            .env
            .last_skipped_beat_age(skipped_beats::writer_id(&self.node))
            .map(|age| reading_before(self.env.now_mono_us(), age));
        self.last_sync_mono_us
            .max(skipped)
            .max(self.skipped_read_mono_us)
    }

    /// Counts the reads the monitor, ticking every `grid` from `ticks_from`, would have made
    /// in the quiet window it just woke from.
    pub(super) fn count_skipped_reads(&mut self, ticks_from: SimInstant, grid: SimDuration) {
        let Some(last_mono_us) = self.last_sync_or_skipped_mono_us() else {
            return;
        };
        let now = time::now_whole_us();
        let now_mono_us = self.env.now_mono_us();
        let last = now.before(span_between_readings(last_mono_us, now_mono_us));
        let read = skipped_beats::last_skipped_read(last, ticks_from, grid, CACHE, now);
        if read > last {
            self.skipped_read_mono_us = Some(reading_before(now_mono_us, now.since(read)));
        }
    }

    /// With `dead-participant-rejoin`: how many members of the round this node joined are
    /// gone from the (sanitized) state while that round is still current. Always 0 without
    /// the fix, as in torch.
    pub(super) fn dead_round_members(&self) -> usize {
        if !self.settings.has_fix(RendezvousFix::DeadParticipantRejoin) {
            return 0;
        }
        match &self.joined {
            Some((round, members)) if *round == self.state().round => members
                .iter()
                .filter(|m| !self.state().participants.contains_key(*m))
                .count(),
            _ => 0,
        }
    }
}
