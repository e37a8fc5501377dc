//! Process-wide memos of costly pure results (an epoch of a dataset dealt to a world of
//! ranks), shared by every run on every thread of the process, and the thread that fills
//! them ahead of need (`prefetch`).
//!
//! A fuzz campaign runs thousands of short runs over one dataset; each used to deal the same
//! few epochs again, and its checks dealt them once more. Only pure functions of the key may
//! be memoized: a hit gives exactly what computing would, so no run depends on which runs
//! came before it, on which thread it ran, or on what was computed ahead for it. Each memo
//! is bounded by a total weight (the caller's measure of an entry's size); the least
//! recently used entries go first.

pub mod prefetch;

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// A bounded memo from `K` to shared `V`s.
pub struct Memo<K, V> {
    /// The most weight kept at once; an entry heavier than a quarter of it is never kept,
    /// so one huge result cannot push out every small one.
    weight_max: usize,
    /// The most entries kept at once, whatever they weigh.
    entries_max: usize,
    entries: Mutex<Entries<K, V>>,
}

struct Entries<K, V> {
    by_key: BTreeMap<K, Entry<V>>,
    /// Keys by the moment they were last used, oldest first.
    by_use: BTreeMap<u64, K>,
    weight: usize,
    clock: u64,
    /// Keys some thread is computing now: another thread that wants one waits for it
    /// rather than computing it again (a prefetch and the run that needs it, two fuzz
    /// runs that start the same epoch).
    computing: BTreeMap<K, Arc<InFlight>>,
}

struct Entry<V> {
    value: Arc<V>,
    weight: usize,
    used_at: u64,
}

/// One computation under way; it is finished however it ends (a value, an error, a panic).
#[derive(Default)]
struct InFlight {
    finished: Mutex<bool>,
    changed: Condvar,
}

impl InFlight {
    fn wait(&self) {
        let mut finished = self.finished.lock().unwrap_or_else(PoisonError::into_inner);
        while !*finished {
            finished = self
                .changed
                .wait(finished)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Waits for the computation to finish, running queued prefetch work on this thread
    /// meanwhile (`prefetch::run_one_queued`): the computation waited for is usually the
    /// prefetch thread's, and the work queued behind it is what this thread asks for next.
    fn wait_helping(&self) {
        while !self.is_finished() {
            if !prefetch::run_one_queued() {
                self.wait();
                return;
            }
        }
    }

    fn is_finished(&self) -> bool {
        *self.finished.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn finish(&self) {
        *self.finished.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.changed.notify_all();
    }
}

/// Ends this thread's computation of `key` when dropped, even by a panic: the key leaves
/// `computing` and its waiters wake (to find the value kept, or to compute it themselves).
struct Computing<'m, K: Ord + Clone, V> {
    memo: &'m Memo<K, V>,
    key: &'m K,
}

impl<K: Ord + Clone, V> Drop for Computing<'_, K, V> {
    fn drop(&mut self) {
        if let Some(in_flight) = self.memo.lock().computing.remove(self.key) {
            in_flight.finish();
        }
    }
}

impl<K: Ord + Clone, V> Memo<K, V> {
    /// An empty memo keeping at most `weight_max` weight.
    pub const fn new(weight_max: usize) -> Self {
        Self::bounded(weight_max, usize::MAX)
    }

    /// An empty memo keeping at most `weight_max` weight in at most `entries_max` entries.
    pub const fn bounded(weight_max: usize, entries_max: usize) -> Self {
        Memo {
            weight_max,
            entries_max,
            entries: Mutex::new(Entries {
                by_key: BTreeMap::new(),
                by_use: BTreeMap::new(),
                weight: 0,
                clock: 0,
                computing: BTreeMap::new(),
            }),
        }
    }

    /// The value of `key`: the kept one, or `compute`'s, kept when it succeeds and its
    /// `weight` fits. While another thread computes the same key this one waits for it;
    /// if that one kept nothing (an error, a panic, too heavy) this one computes too.
    pub fn get_or_compute<E>(
        &self,
        key: &K,
        weight: usize,
        compute: impl FnOnce() -> Result<V, E>,
    ) -> Result<Arc<V>, E> {
        self.get_or_compute_waiting(key, weight, compute, InFlight::wait_helping)
    }

    /// [`Self::get_or_compute`] for a value asked for inside another memo's computation
    /// (a deal's permutation): while another thread computes it, this one waits without
    /// taking queued work, which could ask for the very entry this thread is computing.
    /// `compute` itself must wait on no memo.
    pub fn get_or_compute_inside<E>(
        &self,
        key: &K,
        weight: usize,
        compute: impl FnOnce() -> Result<V, E>,
    ) -> Result<Arc<V>, E> {
        self.get_or_compute_waiting(key, weight, compute, InFlight::wait)
    }

    fn get_or_compute_waiting<E>(
        &self,
        key: &K,
        weight: usize,
        compute: impl FnOnce() -> Result<V, E>,
        wait: fn(&InFlight),
    ) -> Result<Arc<V>, E> {
        let other = {
            let mut entries = self.lock();
            if let Some(value) = entries.hit(key) {
                return Ok(value);
            }
            let other = entries.computing.get(key).map(Arc::clone);
            if other.is_none() {
                entries
                    .computing
                    .insert(key.clone(), Arc::new(InFlight::default()));
            }
            other
        };
        let _computing = match other {
            Some(other) => {
                wait(&other);
                if let Some(value) = self.lock().hit(key) {
                    return Ok(value);
                }
                None
            }
            None => Some(Computing { memo: self, key }),
        };
        let value = Arc::new(compute()?);
        if weight <= self.weight_max / 4 {
            let bounds = (self.weight_max, self.entries_max);
            self.lock().keep(key, Arc::clone(&value), weight, bounds);
        }
        Ok(value)
    }

    /// The kept value of `key`, if any (counted as a use); never computed, nor waited for.
    pub fn get(&self, key: &K) -> Option<Arc<V>> {
        self.lock().hit(key)
    }

    /// Whether `key` is kept or being computed (a prefetch of it would do nothing).
    pub fn has(&self, key: &K) -> bool {
        let entries = self.lock();
        entries.by_key.contains_key(key) || entries.computing.contains_key(key)
    }

    /// How much weight is kept now.
    pub fn weight(&self) -> usize {
        self.lock().weight
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries<K, V>> {
        // Nothing that can panic runs under the lock but the maps' own updates.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<K: Ord + Clone, V> Entries<K, V> {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn hit(&mut self, key: &K) -> Option<Arc<V>> {
        let now = self.tick();
        let entry = self.by_key.get_mut(key)?;
        self.by_use.remove(&entry.used_at);
        entry.used_at = now;
        self.by_use.insert(now, key.clone());
        Some(Arc::clone(&entry.value))
    }

    /// Keeps `value`, letting the least recently used go until it fits both bounds.
    fn keep(&mut self, key: &K, value: Arc<V>, weight: usize, bounds: (usize, usize)) {
        let (weight_max, entries_max) = bounds;
        if self.by_key.contains_key(key) {
            return;
        }
        while self.weight + weight > weight_max || self.by_key.len() >= entries_max {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            if let Some(gone) = self.by_key.remove(&oldest) {
                self.weight -= gone.weight;
            }
        }
        let used_at = self.tick();
        self.by_use.insert(used_at, key.clone());
        self.by_key.insert(
            key.clone(),
            Entry {
                value,
                weight,
                used_at,
            },
        );
        self.weight += weight;
    }
}

#[cfg(test)]
mod tests {
    use super::Memo;
    use std::sync::mpsc;

    fn ok(v: u64) -> impl FnOnce() -> Result<u64, ()> {
        move || Ok(v)
    }

    #[test]
    fn a_kept_value_is_not_computed_again() {
        let memo: Memo<u64, u64> = Memo::new(100);
        assert_eq!(*memo.get_or_compute(&1, 10, ok(7)).unwrap(), 7);
        let again = memo.get_or_compute(&1, 10, || -> Result<u64, ()> { panic!("computed twice") });
        assert_eq!(*again.unwrap(), 7);
        assert_eq!(memo.weight(), 10);
    }

    #[test]
    fn the_least_recently_used_go_first_and_the_weight_stays_bounded() {
        let memo: Memo<u64, u64> = Memo::new(100);
        for key in 0..4 {
            memo.get_or_compute(&key, 25, ok(key)).unwrap();
        }
        // Key 0 is used again, so key 1 is the oldest when key 4 needs room.
        memo.get_or_compute(&0, 25, ok(99)).unwrap();
        memo.get_or_compute(&4, 25, ok(4)).unwrap();
        assert_eq!(memo.weight(), 100);
        assert_eq!(*memo.get_or_compute(&0, 25, ok(99)).unwrap(), 0, "kept");
        assert_eq!(*memo.get_or_compute(&1, 25, ok(11)).unwrap(), 11, "evicted");
        assert!(memo.weight() <= 100);
    }

    #[test]
    fn the_entries_stay_bounded_however_light() {
        let memo: Memo<u64, u64> = Memo::bounded(100, 2);
        for key in 0..3 {
            memo.get_or_compute(&key, 1, ok(key)).unwrap();
        }
        assert_eq!(memo.weight(), 2);
        assert_eq!(*memo.get_or_compute(&2, 1, ok(22)).unwrap(), 2, "kept");
        assert_eq!(*memo.get_or_compute(&0, 1, ok(10)).unwrap(), 10, "evicted");
    }

    /// Starts computing `key` in `memo` on another thread, holding it in flight until `go`
    /// is sent; returns once the computation has begun.
    fn held_in_flight(
        memo: &'static Memo<u64, u64>,
        key: u64,
        result: Result<u64, &'static str>,
    ) -> (mpsc::Sender<()>, std::thread::JoinHandle<()>) {
        let (started_tx, started_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let _ = memo.get_or_compute(&key, 1, || {
                started_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                if result == Err("panic") {
                    panic!("the first computation breaks");
                }
                result
            });
        });
        started_rx.recv().unwrap();
        (go_tx, holder)
    }

    #[test]
    fn a_key_being_computed_is_waited_for_not_computed_again() {
        static MEMO: Memo<u64, u64> = Memo::new(100);
        let (go, holder) = held_in_flight(&MEMO, 1, Ok(7));
        assert!(MEMO.has(&1), "in flight");
        let waiter = std::thread::spawn(|| {
            *MEMO
                .get_or_compute(&1, 1, || -> Result<u64, &str> { panic!("computed twice") })
                .unwrap()
        });
        go.send(()).unwrap();
        holder.join().unwrap();
        assert_eq!(waiter.join().unwrap(), 7, "the first computation's value");
    }

    #[test]
    fn a_waiter_computes_when_the_first_computation_fails_or_panics() {
        static MEMO: Memo<u64, u64> = Memo::new(100);
        for (key, first) in [(1, Err("no")), (2, Err("panic"))] {
            let (go, holder) = held_in_flight(&MEMO, key, first);
            let waiter = std::thread::spawn(move || *MEMO.get_or_compute(&key, 1, ok(5)).unwrap());
            go.send(()).unwrap();
            assert_eq!(holder.join().is_err(), first == Err("panic"));
            assert_eq!(waiter.join().unwrap(), 5, "computed by the waiter");
            assert!(
                !MEMO.lock().computing.contains_key(&key),
                "no longer in flight"
            );
        }
    }

    #[test]
    fn errors_and_heavy_values_are_not_kept() {
        let memo: Memo<u64, u64> = Memo::new(100);
        assert_eq!(memo.get_or_compute(&1, 1, || Err("no")), Err("no"));
        assert_eq!(*memo.get_or_compute(&1, 1, ok(3)).unwrap(), 3);
        assert_eq!(*memo.get_or_compute(&2, 26, ok(5)).unwrap(), 5);
        assert_eq!(
            *memo.get_or_compute(&2, 26, ok(6)).unwrap(),
            6,
            "too heavy to keep"
        );
        assert_eq!(memo.weight(), 1);
    }
}
