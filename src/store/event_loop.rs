//! When the store server's one event loop finishes each request: libuv's passes over the
//! sockets with data, a few kilobytes a read, so a small request is not held behind every
//! byte of the large ones queued before it.
//!
//! torch 2.15's libuv TCPStore gives each read at most 4 096 bytes (its buffer allocator
//! caps libuv's suggested 64 KiB), and libuv reads a socket at most 32 times before it goes
//! on to the next ready one. A request is served as it is read: its cost (`StoreCosts`) is
//! spread over its reads, and it is done with its last one. A pass takes the sockets that
//! have data when it starts, in the order they got it; data that arrives meanwhile waits
//! for the next pass. Pure: the server (`service`) feeds it arrivals and the time, and
//! applies each request when its pass starts, its reply leaving when its last read ends.

use std::collections::{BTreeMap, VecDeque};

/// The most bytes one read callback gets (TCPStore's `ALLOC_BUFFER_SIZE`).
pub const READ_BYTES_MAX: u64 = 4_096;
/// How many reads libuv makes of one socket in one pass before the next socket's turn.
pub const READS_PER_PASS: u64 = 32;

/// One request waiting to be read.
#[derive(Debug)]
struct Job<T> {
    what: T,
    reads_left: u64,
    /// The cost of each read but the last, and of the last (which takes the remainder).
    read_ns: u64,
    last_read_ns: u64,
    /// The loop's time spent on it so far, its passes' factors included.
    charged_ns: u64,
}

/// A request the loop is done with: it ends at `end_ns`, having cost the loop `charged_ns`.
#[derive(Debug, PartialEq, Eq)]
pub struct Done<T> {
    pub what: T,
    pub end_ns: u64,
    pub charged_ns: u64,
}

/// The event loop's schedule.
#[derive(Debug)]
pub struct EventLoop<T> {
    /// Each socket's requests not yet fully read, oldest first.
    sockets: BTreeMap<u64, VecDeque<Job<T>>>,
    /// The sockets with data, in the order they got it: the next pass's order.
    ready: VecDeque<u64>,
    /// Requests still coming in on the server's link, by when they are all in (and the
    /// order they came in), with their socket.
    landing: BTreeMap<(u64, u64), (u64, Job<T>)>,
    landed: u64,
    /// When the pass in progress ends (the loop is idle at and after it, until data comes).
    pass_end_ns: u64,
}

impl<T> Default for EventLoop<T> {
    fn default() -> Self {
        EventLoop {
            sockets: BTreeMap::new(),
            ready: VecDeque::new(),
            landing: BTreeMap::new(),
            landed: 0,
            pass_end_ns: 0,
        }
    }
}

impl<T> EventLoop<T> {
    /// A request of `bytes` on the wire, costing `cost_ns` of the loop, on `socket`; its
    /// last byte is in at `in_ns`.
    pub fn arrive(&mut self, socket: u64, what: T, (bytes, in_ns): (u64, u64), cost_ns: u64) {
        let reads = bytes.div_ceil(READ_BYTES_MAX).max(1);
        let read_ns = cost_ns / reads;
        let job = Job {
            what,
            reads_left: reads,
            read_ns,
            last_read_ns: cost_ns - read_ns * (reads - 1),
            charged_ns: 0,
        };
        self.landed += 1;
        self.landing.insert((in_ns, self.landed), (socket, job));
    }

    /// Moves the requests that are all in by `now_ns` to their sockets.
    fn take_in(&mut self, now_ns: u64) {
        while let Some(entry) = self.landing.first_entry() {
            if entry.key().0 > now_ns {
                break;
            }
            let (socket, job) = entry.remove();
            self.queue(socket, job);
        }
    }

    fn queue(&mut self, socket: u64, job: Job<T>) {
        let queue = self.sockets.entry(socket).or_default();
        if queue.is_empty() {
            self.ready.push_back(socket);
        }
        queue.push_back(job);
    }

    /// When the loop next needs the time: the end of the pass in progress, or now if a new
    /// pass can start (data is waiting and no pass runs). `None` when it has nothing to do.
    pub fn next_pass_ns(&self) -> Option<u64> {
        if !self.ready.is_empty() {
            return Some(self.pass_end_ns);
        }
        let (&(in_ns, _), _) = self.landing.first_key_value()?;
        Some(in_ns.max(self.pass_end_ns))
    }

    /// Starts a pass at `now_ns` if none is in progress and data waits: every request it
    /// finishes, with when it ends, in order. `factor` of the number of sockets in the pass
    /// multiplies its costs (what the loop pays for juggling them).
    pub fn start_pass(&mut self, now_ns: u64, factor: impl Fn(usize) -> f64) -> Vec<Done<T>> {
        if now_ns < self.pass_end_ns {
            return Vec::new();
        }
        self.take_in(now_ns);
        if self.ready.is_empty() {
            return Vec::new();
        }
        let factor = factor(self.ready.len());
        let mut clock_ns = now_ns;
        let mut done = Vec::new();
        for _ in 0..self.ready.len() {
            let socket = self.ready.pop_front().expect("counted above");
            let queue = self
                .sockets
                .get_mut(&socket)
                .expect("a ready socket has a queue");
            clock_ns = read_socket(queue, clock_ns, factor, &mut done);
            if queue.is_empty() {
                self.sockets.remove(&socket);
            } else {
                self.ready.push_back(socket);
            }
        }
        self.pass_end_ns = clock_ns;
        done
    }
}

/// One socket's turn in a pass from `clock_ns`: up to [`READS_PER_PASS`] reads, finishing
/// the requests whose last read it makes. Returns when the turn ends.
fn read_socket<T>(
    queue: &mut VecDeque<Job<T>>,
    mut clock_ns: u64,
    factor: f64,
    done: &mut Vec<Done<T>>,
) -> u64 {
    let mut reads = READS_PER_PASS;
    while reads > 0 {
        let Some(job) = queue.front_mut() else {
            break;
        };
        let taken = reads.min(job.reads_left);
        let last = taken == job.reads_left;
        let ns = job.read_ns * (taken - u64::from(last)) + if last { job.last_read_ns } else { 0 };
        // Saturates: a cost past u64 nanoseconds is far past every time limit.
        let charged_ns = (ns as f64 * factor).round() as u64;
        clock_ns = clock_ns.saturating_add(charged_ns);
        job.charged_ns = job.charged_ns.saturating_add(charged_ns);
        job.reads_left -= taken;
        reads -= taken;
        if last {
            let job = queue.pop_front().expect("the front job");
            done.push(Done {
                what: job.what,
                end_ns: clock_ns,
                charged_ns: job.charged_ns,
            });
        }
    }
    clock_ns
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(l: &mut EventLoop<&'static str>, mut now_ns: u64) -> Vec<(&'static str, u64)> {
        let mut out = Vec::new();
        while let Some(at) = l.next_pass_ns() {
            now_ns = now_ns.max(at);
            out.extend(
                l.start_pass(now_ns, |_| 1.0)
                    .into_iter()
                    .map(|d| (d.what, d.end_ns)),
            );
        }
        out
    }

    #[test]
    fn a_small_request_waits_one_pass_not_every_large_request() {
        let mut l = EventLoop::default();
        // Two 400 kB requests of 98 reads, 1 ms a read (98 ms each), then a one-read one.
        l.arrive(1, "big1", (400_000, 0), 98_000_000);
        l.arrive(2, "big2", (400_000, 0), 98_000_000);
        let first = l.start_pass(0, |_| 1.0);
        assert!(first.is_empty());
        assert_eq!(l.next_pass_ns(), Some(64_000_000));
        l.arrive(3, "small", (10, 1_000), 20_000);
        let out = drain(&mut l, 0);
        // The small one is read in the second pass, after the two sockets' 32 reads each.
        assert_eq!(out[0], ("small", 128_000_000 + 20_000));
        assert_eq!(out[1].0, "big1");
        assert_eq!(out[2], ("big2", 196_000_000 + 20_000));
    }

    #[test]
    fn one_socket_alone_costs_its_requests_back_to_back() {
        let mut l = EventLoop::default();
        l.arrive(1, "a", (400_000, 5), 3_700_000);
        l.arrive(1, "b", (10, 5), 20_000);
        assert_eq!(drain(&mut l, 5), vec![("a", 3_700_005), ("b", 3_720_005)]);
        // A free loop answers at once, once the request is all in.
        l.arrive(2, "free", (1_000_000, 9_000_000), 0);
        assert_eq!(l.next_pass_ns(), Some(9_000_000));
        assert_eq!(drain(&mut l, 9_000_000), vec![("free", 9_000_000)]);
    }
}
