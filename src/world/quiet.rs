//! Quiet windows: stretches of simulated time in which every agent process only repeats its
//! steady routine (monitor ticks that find nothing new, store polls that read the same
//! answer, keep-alives), so the routine may be fast-forwarded instead of simulated message by
//! message.
//!
//! A window is open while every live process has declared itself quiet, no process is
//! launching, the network is calm (no cut link, no loss, the scenario's latency), and every
//! disturbance lies at least its settle time back. A disturbance is anything that may make a
//! process act; each closes the window and wakes everyone who slept through it. Its settle
//! time (the longest any process declared for its kind, [`Settle`]) keeps the moments after
//! it message by message, as torch plays them:
//! - a *loss* (a fault being applied, a process ending) may stop a heartbeat: long enough
//!   for that heartbeat to expire and be seen by a poll;
//! - a *change* (a process starting, or about to act: join, write, restart its workers)
//!   stops none: long enough for every routine to read the new state and act on it.
//!
//! What a sleeper's skipped periodic writes would have left behind (a keep-alive's heartbeat
//! stamp) is kept here as [`VirtualBeats`]: the reader of the state applies them in time
//! order, so every reader sees the stamps it would have seen, at no simulator event.
//!
//! The world knows no subsystem: beats are keyed by a number their writer chooses, unique
//! among the run's writers.

use super::env::NodeEnv;
use super::time;
use super::wake::Wake;
use crate::scenario::model::{FaultKind, Scenario};
use crate::sim_time::{clock_span, SimDuration, SimInstant};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Whether a run may fast-forward quiet windows: not on the exact path, and not where a
/// skipped message could race with something no disturbance announces: a lossy network (a
/// keep-alive that would have been lost). Skewed clocks are judged while the run goes
/// (`QuietBoard::window_open`): their spread against what the quiet processes tolerate. A
/// paused node only keeps windows shut while it is paused (`WorldState::calm`).
pub fn allowed(scenario: &Scenario, exact_control_plane: bool) -> bool {
    !exact_control_plane
        && scenario.network.loss == 0.0
        && !scenario
            .faults
            .iter()
            .any(|f| matches!(f.kind, FaultKind::Loss { .. }))
}

/// The periodic writes of one writer skipped while it slept through a window: one at
/// `origin`, then every `interval`, until the window closed (`until`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VirtualBeats {
    pub origin: SimInstant,
    pub interval: SimDuration,
    /// The writer's wall clock minus simulated time, in the clock's signed microseconds (its
    /// skew; windows never span a step).
    pub wall_offset_us: i64,
    /// When the window closed; `None` while the writer still sleeps.
    pub until: Option<SimInstant>,
}

impl VirtualBeats {
    /// When the writer's last skipped write at or before `now` fell due.
    pub fn last_tick(&self, now: SimInstant) -> Option<SimInstant> {
        let end = self.until.map_or(now, |until| until.min(now));
        if end < self.origin {
            return None;
        }
        Some(
            self.origin
                .after(end.since(self.origin).floor_to(self.interval)),
        )
    }

    /// The writer's wall-clock stamp of its last skipped write at or before `now`.
    pub fn last_wall_us(&self, now: SimInstant) -> Option<i64> {
        let tick = self.last_tick(now)?;
        Some(clock_span(tick.since_start()).saturating_add(self.wall_offset_us))
    }
}

/// How long after a disturbance of each kind a process's routine must be simulated before
/// a window may skip it, and how far apart the nodes' wall clocks may be while it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Settle {
    pub after_loss: SimDuration,
    pub after_change: SimDuration,
    /// The widest spread of the nodes' wall clocks (the latest minus the earliest) under
    /// which the routine stays routine: a reader compares a writer's heartbeat stamp, taken
    /// by the writer's clock, with its own, so a skew between them ages the stamp in the
    /// reader's eyes. Zero: only clocks that agree.
    pub clock_spread_below: SimDuration,
}

/// What a disturbance may have done (see the module's note).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disturbance {
    /// A heartbeat may stop: a fault, or a process ending.
    Loss,
    /// A process starts, or is about to act.
    Change,
}

/// The run's quiet-window bookkeeping (lives in the world's state).
#[derive(Default)]
pub struct QuietBoard {
    /// Whether this run may fast-forward at all (off for the exact path and for scenarios
    /// whose clocks or links could race with a skipped message).
    pub allowed: bool,
    /// How long after a disturbance of each kind no window opens.
    settle: Settle,
    /// The narrowest clock spread any quiet process tolerated (`Settle::clock_spread_below`);
    /// `None` until one declared itself quiet.
    clock_spread_below: Option<SimDuration>,
    /// The last disturbance of each kind (none yet: a run starts with no heartbeat lost).
    last_loss: Option<SimInstant>,
    last_change: Option<SimInstant>,
    /// When the open window opened.
    open_since: Option<SimInstant>,
    /// Who sleeps through the open window, to wake when it closes.
    sleepers: Vec<Arc<Wake>>,
    /// Skipped periodic writes, by writer.
    beats: BTreeMap<u64, VirtualBeats>,
    /// The newest stamp of any skipped write of a closed window (every reader after the
    /// window asks; computed once when it closes).
    newest_closed_utc_us: Option<i64>,
    /// How many windows opened (reported with the run's statistics).
    pub windows_opened: u64,
    /// Counts the changes to the skipped writes: a window closing, a writer skipping.
    beats_generation: u64,
}

impl QuietBoard {
    pub fn new(allowed: bool) -> Self {
        QuietBoard {
            allowed,
            ..Default::default()
        }
    }

    /// A process needs `settle` after each disturbance before its routine may be skipped.
    pub fn settle_at_least(&mut self, settle: Settle) {
        self.settle.after_loss = self.settle.after_loss.max(settle.after_loss);
        self.settle.after_change = self.settle.after_change.max(settle.after_change);
        self.clock_spread_below = Some(
            self.clock_spread_below
                .map_or(settle.clock_spread_below, |below| {
                    below.min(settle.clock_spread_below)
                }),
        );
    }

    /// Something may make a process act: the window (if open) closes now, its sleepers wake,
    /// and none opens for the settle time of `what`.
    pub fn disturb(&mut self, now: SimInstant, what: Disturbance) {
        match what {
            Disturbance::Loss => self.last_loss = Some(now),
            Disturbance::Change => self.last_change = Some(now),
        }
        let Some(since) = self.open_since.take() else {
            return;
        };
        assert!(since <= now, "a window closed before it opened");
        for beats in self.beats.values_mut() {
            if beats.until.is_none() {
                beats.until = Some(now);
            }
        }
        self.beats_generation += 1;
        self.newest_closed_utc_us = self
            .beats
            .values()
            .filter_map(|b| b.last_wall_us(now))
            .max();
        for sleeper in self.sleepers.drain(..) {
            sleeper.notify();
        }
    }

    /// Whether a window is open now, given what the world's state says of its processes and
    /// network (`calm`) and how far apart the nodes' wall clocks are (`clock_spread`); opens
    /// one when it may. A spread is only ever stepped by a fault, which closes the window.
    pub fn window_open(&mut self, now: SimInstant, calm: bool, clock_spread: SimDuration) -> bool {
        if self.open_since.is_some() {
            return true;
        }
        let settled =
            |last: Option<SimInstant>, settle| last.is_none_or(|at| now >= at.after(settle));
        let settled = settled(self.last_loss, self.settle.after_loss)
            && settled(self.last_change, self.settle.after_change);
        let clocks_agree_enough = clock_spread.is_zero()
            || self
                .clock_spread_below
                .is_some_and(|below| clock_spread < below);
        if !self.allowed || !calm || !settled || !clocks_agree_enough {
            return false;
        }
        self.open_since = Some(now);
        self.windows_opened += 1;
        true
    }

    /// `wake` is notified when the open window closes. Call only while one is open.
    pub fn sleep_through(&mut self, wake: Arc<Wake>) {
        assert!(self.open_since.is_some(), "a sleeper joined no window");
        self.sleepers.push(wake);
    }

    /// `writer` skips its periodic writes from `beats.origin` on, through the open window.
    pub fn skip_beats(&mut self, writer: u64, beats: VirtualBeats) {
        assert!(
            self.open_since.is_some() && beats.until.is_none() && !beats.interval.is_zero(),
            "beats skipped outside a window"
        );
        self.beats.insert(writer, beats);
        self.beats_generation += 1;
    }

    /// While no window is open, every skipped write's last stamp stands still: a count that
    /// changes whenever one may move. `None` while a window is open (stamps move with time).
    pub fn settled_beats_generation(&self) -> Option<u64> {
        self.open_since.is_none().then_some(self.beats_generation)
    }

    /// The wall-clock stamp of `writer`'s last skipped write at or before `now`.
    pub fn last_beat_wall_us(&self, writer: u64, now: SimInstant) -> Option<i64> {
        self.beats.get(&writer)?.last_wall_us(now)
    }

    /// The newest stamp any skipped write carries at `now`: a reader whose oldest stamp
    /// is at least this new has nothing to apply.
    pub fn newest_beat_wall_us(&self, now: SimInstant) -> Option<i64> {
        if self.open_since.is_none() {
            return self.newest_closed_utc_us;
        }
        self.beats
            .values()
            .filter_map(|b| b.last_wall_us(now))
            .max()
    }
}

impl NodeEnv {
    /// This process's agent only repeats its steady routine; `settle`: how long after each
    /// kind of disturbance its routine must be simulated.
    pub fn set_quiet(&self, settle: Settle) {
        let mut st = self.world().state.lock().expect("world lock");
        if let Some(p) = self.process_mut(&mut st) {
            p.quiet = true;
            st.quiet.settle_at_least(settle);
        }
    }

    /// This process's agent is about to act: a window open now closes, and everyone
    /// sleeping through it wakes first. Acting is a change: a process that leaves is a loss
    /// when it ends (`env::run_process`).
    pub fn set_busy(&self) {
        let mut st = self.world().state.lock().expect("world lock");
        let Some(p) = self.process_mut(&mut st) else {
            return;
        };
        if p.quiet {
            p.quiet = false;
            st.quiet.disturb(time::now_whole_us(), Disturbance::Change);
        }
    }

    /// When a quiet window is open now: `wake` is notified when it closes, and this returns
    /// true. False (and nothing registered) when none is.
    pub fn sleep_through_window(&self, wake: &Arc<Wake>) -> bool {
        let mut st = self.world().state.lock().expect("world lock");
        if !st.quiet_window_open(&self.world().scenario) {
            return false;
        }
        st.quiet.sleep_through(Arc::clone(wake));
        true
    }

    /// [`NodeEnv::sleep_through_window`] for a periodic writer (`writer`, one write every
    /// `interval`, the first one due at `first_due`, now or later): its writes until the
    /// window closes are kept as [`VirtualBeats`], stamped with this node's wall clock.
    pub fn skip_beats_through_window(
        &self,
        wake: &Arc<Wake>,
        writer: u64,
        first_due: SimInstant,
        interval: SimDuration,
    ) -> bool {
        let now = time::now_whole_us();
        let wall_offset_us = self
            .now_utc_us()
            .saturating_sub(clock_span(now.since_start()));
        let mut st = self.world().state.lock().expect("world lock");
        if !st.quiet_window_open(&self.world().scenario) {
            return false;
        }
        st.quiet.sleep_through(Arc::clone(wake));
        let beats = VirtualBeats {
            origin: first_due.max(now),
            interval,
            wall_offset_us,
            until: None,
        };
        st.quiet.skip_beats(writer, beats);
        true
    }

    /// Of `stamps` (an item, its writer, the stamp it holds), those whose writer's last
    /// skipped write by now is newer than the stamp, with that write's stamp; one look at
    /// the board for all of them.
    pub fn newer_skipped_beats<K>(
        &self,
        stamps: impl Iterator<Item = (K, u64, i64)>,
    ) -> Vec<(K, i64)> {
        let now = time::now_whole_us();
        let st = self.world().state.lock().expect("world lock");
        stamps
            .filter_map(|(item, writer, stamp)| {
                let beat = st.quiet.last_beat_wall_us(writer, now)?;
                (beat > stamp).then_some((item, beat))
            })
            .collect()
    }

    /// How long ago (simulated time) `writer`'s last skipped write fell due, if it skipped
    /// any: a skipped keep-alive was also a sync of its holder's state, as torch's is.
    pub fn last_skipped_beat_age(&self, writer: u64) -> Option<SimDuration> {
        let now = time::now_whole_us();
        let st = self.world().state.lock().expect("world lock");
        let tick = st.quiet.beats.get(&writer)?.last_tick(now)?;
        Some(now.since(tick))
    }

    /// The skipped writes' generation while no window is open
    /// (`QuietBoard::settled_beats_generation`).
    pub fn settled_skipped_beats(&self) -> Option<u64> {
        let st = self.world().state.lock().expect("world lock");
        st.quiet.settled_beats_generation()
    }

    /// The newest stamp any skipped write carries by now.
    pub fn newest_skipped_beat_wall_us(&self) -> Option<i64> {
        let st = self.world().state.lock().expect("world lock");
        st.quiet.newest_beat_wall_us(time::now_whole_us())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(us: u64) -> SimInstant {
        SimInstant::from_us(us)
    }

    fn beats(origin_us: u64, until_us: Option<u64>) -> VirtualBeats {
        VirtualBeats {
            origin: at(origin_us),
            interval: SimDuration::from_us(5),
            wall_offset_us: 1000,
            until: until_us.map(at),
        }
    }

    #[test]
    fn the_last_skipped_write_falls_on_the_writers_grid() {
        assert_eq!(beats(10, None).last_tick(at(9)), None);
        assert_eq!(beats(10, None).last_tick(at(24)), Some(at(20)));
        assert_eq!(beats(10, Some(17)).last_tick(at(100)), Some(at(15)));
    }

    #[test]
    fn the_last_skipped_write_is_the_last_tick_before_the_close_or_now() {
        assert_eq!(beats(10, None).last_wall_us(at(9)), None);
        assert_eq!(beats(10, None).last_wall_us(at(10)), Some(1010));
        assert_eq!(beats(10, None).last_wall_us(at(24)), Some(1020));
        assert_eq!(beats(10, Some(14)).last_wall_us(at(100)), Some(1010));
        assert_eq!(beats(10, Some(15)).last_wall_us(at(100)), Some(1015));
    }

    #[test]
    fn a_disturbance_closes_the_window_and_holds_the_next_for_the_settle_time() {
        let mut board = QuietBoard::new(true);
        board.settle_at_least(Settle {
            after_loss: SimDuration::from_us(20),
            after_change: SimDuration::from_us(5),
            clock_spread_below: SimDuration::ZERO,
        });
        board.disturb(at(0), Disturbance::Loss);
        assert!(
            !board.window_open(at(10), true, SimDuration::ZERO),
            "within the settle time of time 0"
        );
        assert!(board.window_open(at(20), true, SimDuration::ZERO));
        let wake = Arc::new(Wake::default());
        board.sleep_through(Arc::clone(&wake));
        board.skip_beats(7, beats(22, None));
        assert_eq!(board.newest_beat_wall_us(at(30)), Some(1027));
        board.disturb(at(33), Disturbance::Loss);
        assert_eq!(board.newest_beat_wall_us(at(100)), Some(1032));
        assert_eq!(board.last_beat_wall_us(7, at(100)), Some(1032));
        assert!(!board.window_open(at(40), true, SimDuration::ZERO));
        assert!(
            !board.window_open(at(60), false, SimDuration::ZERO),
            "not while the network is not calm"
        );
        assert!(board.window_open(at(60), true, SimDuration::ZERO));
        assert_eq!(board.windows_opened, 2);
    }

    #[test]
    fn a_change_holds_the_next_window_for_its_own_settle_time_and_a_loss_still_for_its() {
        let mut board = QuietBoard::new(true);
        board.settle_at_least(Settle {
            after_loss: SimDuration::from_us(40),
            after_change: SimDuration::from_us(5),
            clock_spread_below: SimDuration::ZERO,
        });
        assert!(
            board.window_open(at(0), true, SimDuration::ZERO),
            "no disturbance yet"
        );
        board.disturb(at(10), Disturbance::Change);
        assert!(!board.window_open(at(14), true, SimDuration::ZERO));
        assert!(
            board.window_open(at(15), true, SimDuration::ZERO),
            "a change settles sooner"
        );
        board.disturb(at(20), Disturbance::Loss);
        board.disturb(at(50), Disturbance::Change);
        assert!(
            !board.window_open(at(59), true, SimDuration::ZERO),
            "a later change does not cut a loss's settle short"
        );
        assert!(board.window_open(at(60), true, SimDuration::ZERO));
    }

    #[test]
    fn no_window_opens_where_fast_forward_is_not_allowed() {
        let mut board = QuietBoard::new(false);
        assert!(!board.window_open(at(1_000_000), true, SimDuration::ZERO));
    }

    #[test]
    fn skewed_clocks_keep_windows_shut_unless_every_quiet_process_tolerates_their_spread() {
        let mut board = QuietBoard::new(true);
        let spread = SimDuration::from_us(7);
        assert!(
            !board.window_open(at(0), true, spread),
            "nobody has said what spread it tolerates"
        );
        let tolerating = |below_us| Settle {
            clock_spread_below: SimDuration::from_us(below_us),
            ..Settle::default()
        };
        board.settle_at_least(tolerating(7));
        assert!(
            !board.window_open(at(0), true, spread),
            "the bound is strict"
        );
        board.settle_at_least(tolerating(100));
        assert!(
            !board.window_open(at(0), true, spread),
            "the narrowest tolerance holds"
        );
        assert!(board.window_open(at(0), true, SimDuration::from_us(6)));
        board.disturb(at(1), Disturbance::Change);
        let mut fresh = QuietBoard::new(true);
        fresh.settle_at_least(tolerating(0));
        assert!(
            fresh.window_open(at(0), true, SimDuration::ZERO),
            "clocks that agree need no tolerance"
        );
    }

    #[test]
    fn the_skipped_writes_stand_still_between_windows_under_one_generation() {
        let mut board = QuietBoard::new(true);
        let before = board.settled_beats_generation().expect("no window open");
        assert!(board.window_open(at(0), true, SimDuration::ZERO));
        assert_eq!(
            board.settled_beats_generation(),
            None,
            "stamps move in a window"
        );
        board.skip_beats(7, beats(0, None));
        board.disturb(at(25), Disturbance::Change);
        let after = board.settled_beats_generation().expect("closed");
        assert_ne!(after, before, "the window's writes changed the stamps");
        assert_eq!(
            board.last_beat_wall_us(7, at(30)),
            board.last_beat_wall_us(7, at(99))
        );
        board.disturb(at(40), Disturbance::Loss);
        assert_eq!(
            board.settled_beats_generation(),
            Some(after),
            "a disturbance with no window open moves no stamp"
        );
    }
}
