//! torch's CPU random generator, bit for bit: MT19937 seeding and output, `random()`,
//! `random64()`, and the two draws built on them that samplers use, `randperm` and `randint`.

use super::SamplerError;

use super::rng_kernels::{falling_remainders, twist_and_temper, STATE_WORDS};

/// From this `n` on, torch's `randperm` switches from the swap loop with 32-bit draws to the
/// inside-out shuffle with 64-bit draws (`u32::MAX / 20`).
pub const RANDPERM_64BIT_FROM_N: u64 = u32::MAX as u64 / 20;

/// From this range on, torch's `randint` draws 64 bits per element instead of 32.
pub const RANDINT_64BIT_FROM_RANGE: u64 = 1 << 28;

/// Draws per block of the shuffles, which also is how far ahead they request memory (large
/// permutations do not fit in cache).
const DRAW_BLOCK: usize = 64;

/// Permutations up to this size are shuffled without drawing ahead: they stay in the cache,
/// where the look-ahead's bookkeeping costs more than it saves (a `u32` permutation of
/// 100,000 shuffled about a quarter faster here; one of a million, a third slower).
const IN_CACHE_BYTES_MAX: usize = 1 << 20;

/// torch's CPU generator (`torch.Generator()` after `manual_seed`).
///
/// The whole 624-word state is twisted and tempered in one pass whenever it runs out, so a
/// draw is an array read; the output sequence is exactly that of `std::mt19937`.
#[derive(Clone)]
pub struct TorchGenerator {
    state: [u32; STATE_WORDS],
    tempered: [u32; STATE_WORDS],
    next_word: usize,
}

impl std::fmt::Debug for TorchGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TorchGenerator")
            .field("next_word", &self.next_word)
            .finish_non_exhaustive()
    }
}

impl TorchGenerator {
    /// A generator after `manual_seed(seed)`: torch keeps only `seed mod 2^32`.
    pub fn new(seed: u64) -> Self {
        let mut state = [0u32; STATE_WORDS];
        state[0] = seed as u32;
        for i in 1..STATE_WORDS {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        // The first draw twists, as in the reference engine.
        TorchGenerator {
            state,
            tempered: [0; STATE_WORDS],
            next_word: STATE_WORDS,
        }
    }

    /// A generator after `manual_seed(seed)` with a signed seed: torch takes a negative seed
    /// as its two's-complement 64-bit pattern before reducing it mod 2^32.
    pub fn from_signed_seed(seed: i64) -> Self {
        Self::new(seed as u64)
    }

    /// One 32-bit word (torch's `random()`).
    #[inline]
    pub fn random(&mut self) -> u32 {
        if self.next_word == STATE_WORDS {
            self.refill();
        }
        let word = self.tempered[self.next_word];
        self.next_word += 1;
        word
    }

    /// Two words, the first as the high half (torch's `random64()`).
    #[inline]
    pub fn random64(&mut self) -> u64 {
        let high = self.random() as u64;
        let low = self.random() as u64;
        (high << 32) | low
    }

    /// Twists the whole state and tempers it into the output buffer.
    #[cold]
    fn refill(&mut self) {
        twist_and_temper(&mut self.state, &mut self.tempered);
        self.next_word = 0;
    }

    /// `torch.randperm(n, generator=self)` as `u64` values.
    pub fn randperm(&mut self, n: u64) -> Result<Vec<u64>, SamplerError> {
        self.randperm_with_room(n, 0)
    }

    /// [`Self::randperm`] in a vector with room for `spare` more values, so a caller that
    /// pads the permutation (as `DistributedSampler` does) never moves it.
    pub fn randperm_with_room(&mut self, n: u64, spare: usize) -> Result<Vec<u64>, SamplerError> {
        let len = usize::try_from(n).map_err(|_| SamplerError::TooLarge { n })?;
        let mut perm = Vec::new();
        perm.try_reserve_exact(len.saturating_add(spare))
            .map_err(|_| SamplerError::TooLarge { n })?;
        advise_huge_pages(&mut perm);
        perm.extend(0..n);
        self.shuffle_in_place(&mut perm);
        Ok(perm)
    }

    /// `torch.randperm(n, generator=self)` with `u32` values: half the memory of
    /// [`Self::randperm`] (which matters past two hundred million, and lets a 100 000-sample
    /// permutation fit a core's cache), same draws.
    pub fn randperm_u32(&mut self, n: u32) -> Result<Vec<u32>, SamplerError> {
        self.randperm_u32_with_room(n, 0)
    }

    /// [`Self::randperm_u32`] with room for `spare` more values, as
    /// [`Self::randperm_with_room`].
    pub fn randperm_u32_with_room(
        &mut self,
        n: u32,
        spare: usize,
    ) -> Result<Vec<u32>, SamplerError> {
        let mut perm = Vec::new();
        perm.try_reserve_exact((n as usize).saturating_add(spare))
            .map_err(|_| SamplerError::TooLarge { n: n as u64 })?;
        advise_huge_pages(&mut perm);
        perm.extend(0..n);
        self.shuffle_in_place(&mut perm);
        Ok(perm)
    }

    /// Shuffles `0..len` held in `perm` the way torch's CPU randperm does; `perm[i]` must be
    /// `i` on entry.
    fn shuffle_in_place<T: PermValue>(&mut self, perm: &mut [T]) {
        if (perm.len() as u64) < RANDPERM_64BIT_FROM_N {
            self.swap_shuffle(perm);
        } else {
            self.inside_out_shuffle(perm);
        }
    }

    /// Fills `out` with consecutive `random()` words (the same words, faster than a loop).
    pub fn fill_random(&mut self, out: &mut [u32]) {
        let mut filled = 0;
        while filled < out.len() {
            if self.next_word == STATE_WORDS {
                self.refill();
            }
            let take = (out.len() - filled).min(STATE_WORDS - self.next_word);
            out[filled..filled + take]
                .copy_from_slice(&self.tempered[self.next_word..self.next_word + take]);
            self.next_word += take;
            filled += take;
        }
    }

    /// Fills `out` with consecutive `random64()` values.
    pub fn fill_random64(&mut self, out: &mut [u64]) {
        let mut filled = 0;
        while filled < out.len() {
            let pairs_left = (STATE_WORDS - self.next_word) / 2;
            let take = (out.len() - filled).min(pairs_left);
            let words = &self.tempered[self.next_word..self.next_word + 2 * take];
            for (slot, pair) in out[filled..filled + take]
                .iter_mut()
                .zip(words.chunks_exact(2))
            {
                *slot = ((pair[0] as u64) << 32) | pair[1] as u64;
            }
            self.next_word += 2 * take;
            filled += take;
            if filled < out.len() {
                // The buffer is empty or holds one word: this draw refills (and straddles).
                out[filled] = self.random64();
                filled += 1;
            }
        }
    }

    /// torch's path for small `n`: swap `i` with `i + random() % (n - i)`.
    fn swap_shuffle<T: PermValue>(&mut self, perm: &mut [T]) {
        let n = perm.len();
        let (mut words, mut remainders) = ([0u32; DRAW_BLOCK], [0u32; DRAW_BLOCK]);
        // n - i < 2^28 on this path, so the modulo fits in 32 bits.
        self.shuffle_in_blocks(perm, n.saturating_sub(1), |g, start, targets| {
            let len = targets.len();
            g.fill_random(&mut words[..len]);
            falling_remainders(&words[..len], (n - start) as u32, &mut remainders[..len]);
            for (j, (target, &remainder)) in targets.iter_mut().zip(&remainders).enumerate() {
                *target = start + j + remainder as usize;
            }
        });
    }

    /// torch's path for large `n`: the inside-out shuffle with `random64() % (i + 1)`.
    /// As `perm[i]` still holds `i` at step `i`, "`perm[i] = perm[z]; perm[z] = i`" is a swap.
    fn inside_out_shuffle<T: PermValue>(&mut self, perm: &mut [T]) {
        let mut draws = [0u64; DRAW_BLOCK];
        self.shuffle_in_blocks(perm, perm.len(), |g, start, targets| {
            g.fill_random64(&mut draws[..targets.len()]);
            for (j, (target, &draw)) in targets.iter_mut().zip(&draws).enumerate() {
                *target = (draw % (start + j + 1) as u64) as usize;
            }
        });
    }

    /// Runs `steps` swaps `perm.swap(i, target_i)`, the targets drawn by `draw_targets` a
    /// block at a time. Past the cache's size they are drawn one block ahead so that their
    /// cache lines are requested early: every swap would otherwise wait on memory in turn.
    /// The draws stay in order.
    fn shuffle_in_blocks<T: PermValue>(
        &mut self,
        perm: &mut [T],
        steps: usize,
        mut draw_targets: impl FnMut(&mut Self, usize, &mut [usize]),
    ) {
        if std::mem::size_of_val(perm) <= IN_CACHE_BYTES_MAX {
            let mut targets = [0usize; DRAW_BLOCK];
            let mut start = 0;
            while start < steps {
                let len = (steps - start).min(DRAW_BLOCK);
                draw_targets(self, start, &mut targets[..len]);
                for (j, &target) in targets[..len].iter().enumerate() {
                    perm.swap(start + j, target);
                }
                start += len;
            }
            return;
        }
        let (mut blocks, mut more) = ([0usize; DRAW_BLOCK], [0usize; DRAW_BLOCK]);
        // The two blocks trade places by reference: copying them cost a tenth of a shuffle.
        let (mut current, mut next) = (&mut blocks, &mut more);
        let mut current_len = steps.min(DRAW_BLOCK);
        draw_targets(self, 0, &mut current[..current_len]);
        let mut start = 0;
        while start < steps {
            let next_start = start + current_len;
            let next_len = (steps - next_start).min(DRAW_BLOCK);
            draw_targets(self, next_start, &mut next[..next_len]);
            for &target in &next[..next_len] {
                prefetch(perm, target);
            }
            for (j, &target) in current[..current_len].iter().enumerate() {
                perm.swap(start + j, target);
            }
            std::mem::swap(&mut current, &mut next);
            (start, current_len) = (next_start, next_len);
        }
    }

    /// `torch.randint(high, (size,), generator=self)`: each element is a draw mod `high`,
    /// the draw being 64 bits wide when `high >= 2^28`. `high = 0` is an error, as in torch.
    pub fn randint(&mut self, high: u64, size: usize) -> Result<Vec<u64>, SamplerError> {
        if high == 0 {
            return Err(SamplerError::EmptyRandintRange);
        }
        let mut values = Vec::new();
        values
            .try_reserve_exact(size)
            .map_err(|_| SamplerError::TooLarge { n: size as u64 })?;
        if high >= RANDINT_64BIT_FROM_RANGE {
            values.extend((0..size).map(|_| self.random64() % high));
        } else {
            let high = high as u32;
            values.extend((0..size).map(|_| (self.random() % high) as u64));
        }
        Ok(values)
    }
}

/// Element type of a permutation: `u32` (compact) or `u64`.
trait PermValue: Copy {}
impl PermValue for u32 {}
impl PermValue for u64 {}

/// From this many bytes on, a permutation's buffer asks the kernel for huge pages: with 4 KiB
/// pages nearly every swap of a huge permutation also misses the TLB.
const HUGE_PAGES_FROM_BYTES: usize = 64 << 20;

/// Advises the kernel to back `values`' (still untouched) spare capacity with huge pages; a
/// hint only, ignored where unsupported.
fn advise_huge_pages<T>(values: &mut Vec<T>) {
    let bytes = values.capacity() * std::mem::size_of::<T>();
    if bytes < HUGE_PAGES_FROM_BYTES {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        // x86-64 and aarch64 Linux back transparent huge pages with 2 MiB pages.
        const HUGE_PAGE_BYTES: usize = 2 << 20;
        let start = values.as_mut_ptr() as usize;
        let aligned_start = start.next_multiple_of(HUGE_PAGE_BYTES);
        let aligned_end = (start + bytes) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
        if aligned_end > aligned_start {
            // SAFETY: the range lies inside the vector's own allocation; MADV_HUGEPAGE only
            // changes how the kernel backs it, never its contents. A failure is harmless.
            unsafe {
                libc::madvise(
                    aligned_start as *mut libc::c_void,
                    aligned_end - aligned_start,
                    libc::MADV_HUGEPAGE,
                );
            }
        }
    }
}

/// Asks the cache for `values[index]`'s line; a hint only, with no effect on results.
#[inline(always)]
fn prefetch<T>(values: &[T], index: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(value) = values.get(index) {
        // SAFETY: prefetching never faults and never changes memory; the pointer is in bounds.
        #[allow(unused_unsafe)]
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast::<i8>());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (values, index);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_words_match_std_mt19937() {
        // Published first output of std::mt19937 with its default seed 5489.
        let mut g = TorchGenerator::new(5489);
        assert_eq!(g.random(), 3_499_211_612);
        // The 10000th output of default-seeded std::mt19937, as the C++ standard requires.
        let mut g = TorchGenerator::new(5489);
        let last = (0..10_000).map(|_| g.random()).last();
        assert_eq!(last, Some(4_123_659_995));
    }

    #[test]
    fn seed_is_taken_mod_2_pow_32() {
        let mut a = TorchGenerator::new(7);
        let mut b = TorchGenerator::new(7 + (1 << 32));
        assert_eq!(a.random64(), b.random64());
        let mut c = TorchGenerator::from_signed_seed(-1);
        let mut d = TorchGenerator::new(u32::MAX as u64);
        assert_eq!(c.random(), d.random());
    }

    #[test]
    fn random64_puts_first_word_high() {
        let mut words = TorchGenerator::new(3);
        let mut wide = TorchGenerator::new(3);
        let (high, low) = (words.random() as u64, words.random() as u64);
        assert_eq!(wide.random64(), (high << 32) | low);
    }

    #[test]
    fn randperm_is_a_permutation() {
        let mut g = TorchGenerator::new(42);
        let mut perm = g.randperm(1000).unwrap();
        perm.sort_unstable();
        assert!(perm.iter().copied().eq(0..1000));
        assert_eq!(
            TorchGenerator::new(1).randperm(0).unwrap(),
            Vec::<u64>::new()
        );
    }

    #[test]
    fn bulk_draws_match_single_draws() {
        for skip in [0, 1, 2, 623, 624, 625] {
            let mut single = TorchGenerator::new(11);
            let mut bulk = TorchGenerator::new(11);
            for _ in 0..skip {
                single.random();
                bulk.random();
            }
            let expected: Vec<u64> = (0..1500).map(|_| single.random64()).collect();
            let mut got = vec![0u64; 1500];
            bulk.fill_random64(&mut got);
            assert_eq!(got, expected, "skip {skip}");
            let expected: Vec<u32> = (0..1500).map(|_| single.random()).collect();
            let mut got = vec![0u32; 1500];
            bulk.fill_random(&mut got);
            assert_eq!(got, expected, "skip {skip}");
        }
    }

    /// The textbook inside-out shuffle, to check the blocked, prefetching one against.
    #[test]
    fn inside_out_matches_the_textbook_one() {
        let n = 5000;
        let mut g = TorchGenerator::new(9);
        let mut expected: Vec<u64> = (0..n).collect();
        for k in 0..n as usize {
            let z = (g.random64() % (k as u64 + 1)) as usize;
            expected[k] = expected[z];
            expected[z] = k as u64;
        }
        let mut perm: Vec<u64> = (0..n).collect();
        TorchGenerator::new(9).inside_out_shuffle(&mut perm);
        assert_eq!(perm, expected);
    }

    /// The textbook swap shuffle, to check the in-cache one and the blocked, prefetching
    /// one against, on each side of `IN_CACHE_BYTES_MAX`.
    #[test]
    fn swap_shuffle_matches_the_textbook_one_in_and_past_the_cache() {
        let in_cache = IN_CACHE_BYTES_MAX / 4;
        for n in [in_cache - 1, in_cache, in_cache + 1, 3 * in_cache] {
            let mut g = TorchGenerator::new(5);
            let mut expected: Vec<u32> = (0..n as u32).collect();
            for i in 0..n.saturating_sub(1) {
                let target = i + (g.random() % (n - i) as u32) as usize;
                expected.swap(i, target);
            }
            let mut perm: Vec<u32> = (0..n as u32).collect();
            TorchGenerator::new(5).swap_shuffle(&mut perm);
            assert!(perm == expected, "n = {n}");
        }
    }

    #[test]
    fn randint_rejects_empty_range() {
        assert!(TorchGenerator::new(0).randint(0, 3).is_err());
    }
}
