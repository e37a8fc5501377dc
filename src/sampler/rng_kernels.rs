//! The two inner loops of torch's generator that every deal runs: MT19937's twist and
//! temper, and `randperm`'s remainders. Each is written once and compiled twice, plainly
//! and for AVX2, and the CPU picks at run time; both give the same bits (shown below, and
//! tested against each other), so a run's results never depend on the machine.

/// Number of 32-bit words in the MT19937 state.
pub(super) const STATE_WORDS: usize = 624;
/// Offset of the word mixed into each twisted word.
const SHIFT_WORDS: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// Twists the whole state and tempers it into `tempered` (the reference engine's output
/// order).
pub(super) fn twist_and_temper(state: &mut [u32; STATE_WORDS], tempered: &mut [u32; STATE_WORDS]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, the only feature the function is compiled for.
        unsafe { twist_and_temper_avx2(state, tempered) };
        return;
    }
    twist_and_temper_body(state, tempered);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn twist_and_temper_avx2(state: &mut [u32; STATE_WORDS], tempered: &mut [u32; STATE_WORDS]) {
    twist_and_temper_body(state, tempered);
}

/// Both loops read only words not yet rewritten in the pass or written at least 227 words
/// before, so the compiler may run them eight words at a time.
#[inline(always)]
fn twist_and_temper_body(s: &mut [u32; STATE_WORDS], tempered: &mut [u32; STATE_WORDS]) {
    #[inline(always)]
    fn mix(upper_from: u32, lower_from: u32, far: u32) -> u32 {
        let y = (upper_from & UPPER_MASK) | (lower_from & LOWER_MASK);
        far ^ (y >> 1) ^ ((y & 1).wrapping_neg() & MATRIX_A)
    }
    for i in 0..STATE_WORDS - SHIFT_WORDS {
        s[i] = mix(s[i], s[i + 1], s[i + SHIFT_WORDS]);
    }
    for i in STATE_WORDS - SHIFT_WORDS..STATE_WORDS - 1 {
        s[i] = mix(s[i], s[i + 1], s[i + SHIFT_WORDS - STATE_WORDS]);
    }
    s[STATE_WORDS - 1] = mix(s[STATE_WORDS - 1], s[0], s[SHIFT_WORDS - 1]);
    for (out, &word) in tempered.iter_mut().zip(s.iter()) {
        let mut y = word;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        *out = y;
    }
}

/// `remainders[j] = words[j] % (first_divisor - j)`: the swap shuffle's draws, the divisor
/// falling by one per step. `first_divisor` must exceed the last index.
pub(super) fn falling_remainders(words: &[u32], first_divisor: u32, remainders: &mut [u32]) {
    debug_assert!(words.len() == remainders.len() && (first_divisor as usize) > words.len() - 1);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, the only feature the function is compiled for.
        unsafe { falling_remainders_avx2(words, first_divisor, remainders) };
        return;
    }
    for (j, (rem, &word)) in remainders.iter_mut().zip(words).enumerate() {
        *rem = word % (first_divisor - j as u32);
    }
}

/// Integer division has no vector instruction, so the quotient is taken in `f64`, four at a
/// time. It is exact: the quotient `w / d` of a 32-bit `w` is rounded by less than
/// `2^-53 · 2^32 / d < 1 / d`, while a quotient that is not an integer lies at least `1 / d`
/// below the next one, so the rounded quotient's floor is the true one. That floor is below
/// 2^32; adding 2^52 puts it, exactly, in the low bits of the double.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn falling_remainders_avx2(words: &[u32], first_divisor: u32, remainders: &mut [u32]) {
    const TWO_POW_52: f64 = 4_503_599_627_370_496.0;
    for (j, (rem, &word)) in remainders.iter_mut().zip(words).enumerate() {
        let divisor = first_divisor - j as u32;
        let quotient = ((word as f64 / divisor as f64).floor() + TWO_POW_52).to_bits() as u32;
        *rem = word.wrapping_sub(quotient.wrapping_mul(divisor));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn plain_remainders(words: &[u32], first_divisor: u32) -> Vec<u32> {
        (0..words.len())
            .map(|j| words[j] % (first_divisor - j as u32))
            .collect()
    }

    #[test]
    fn remainders_are_exact_for_random_and_extreme_pairs() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let extremes = [0, 1, 2, u32::MAX, u32::MAX - 1, 1 << 31, (1 << 31) - 1];
        for round in 0..20_000 {
            let len = rng.gen_range(1..=64usize);
            let first_divisor = match round % 4 {
                0 => len as u32 + rng.gen_range(0..8),
                1 => rng.gen_range(len as u32..=u32::MAX),
                2 => u32::MAX - rng.gen_range(0..8),
                _ => rng.gen_range(len as u32..1 << 20),
            };
            let words: Vec<u32> = (0..len)
                .map(|j| match rng.gen_range(0..4) {
                    0 => extremes[j % extremes.len()],
                    1 => (first_divisor - j as u32).wrapping_mul(rng.gen_range(0..4)),
                    _ => rng.gen(),
                })
                .collect();
            let mut got = vec![0; len];
            falling_remainders(&words, first_divisor, &mut got);
            assert_eq!(
                got,
                plain_remainders(&words, first_divisor),
                "{first_divisor}"
            );
        }
    }

    #[test]
    fn the_vector_twist_gives_the_plain_twists_words() {
        let mut state = [0u32; STATE_WORDS];
        for (i, word) in state.iter_mut().enumerate() {
            *word = (i as u32).wrapping_mul(2_654_435_761) ^ 0x5bd1_e995;
        }
        let (mut plain_state, mut plain_out) = (state, [0u32; STATE_WORDS]);
        let mut out = [0u32; STATE_WORDS];
        for _ in 0..50 {
            twist_and_temper(&mut state, &mut out);
            twist_and_temper_body(&mut plain_state, &mut plain_out);
            assert_eq!((state, out), (plain_state, plain_out));
        }
    }
}
