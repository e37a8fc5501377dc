//! A small work pool on std threads: maps items over `jobs` threads and hands results back
//! in input order, so what a campaign computes does not depend on how many threads ran it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

/// The number of threads to use when the user does not say: the available cores.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Maps `f` over `items` on `jobs` threads; `on_done` sees each result on the calling
/// thread as it arrives (for progress). Results come back in the order of `items`.
pub fn map<T, R, F, D>(items: &[T], jobs: usize, f: F, mut on_done: D) -> Vec<R>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> R + Sync,
    D: FnMut(&R),
{
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<(usize, R)>();
    let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            let tx = tx.clone();
            let (next, f) = (&next, &f);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= items.len() {
                    break;
                }
                if tx.send((i, f(&items[i]))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        for (i, r) in rx {
            on_done(&r);
            out[i] = Some(r);
        }
    });
    out.into_iter()
        .map(|r| r.expect("every item was mapped"))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_come_back_in_input_order_for_any_job_count() {
        let items: Vec<u64> = (0..100).collect();
        for jobs in [1, 2, 7] {
            let mut seen = 0;
            let got = super::map(&items, jobs, |x| x * x, |_| seen += 1);
            assert_eq!(seen, 100);
            assert_eq!(got, items.iter().map(|x| x * x).collect::<Vec<_>>());
        }
    }
}
