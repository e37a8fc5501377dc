//! Parity cases of the samplers, torch RNG and rank assignment.

use serde::de::{Deserializer, Visitor};
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::first_difference;
use crate::agent::ranks::{assign_worker_ranks, GroupRole};
use crate::sampler::{
    DistributedSampler, LoadBalancingBatchSampler, LoadBalancingSampler, TorchGenerator,
};

/// How many leading values a `randperm_digest` case lists.
const DIGEST_HEAD_LEN: usize = 16;

/// Values converted to bytes per hashing step of a digest (bounded scratch memory).
const DIGEST_CHUNK_VALUES: usize = 1 << 14;

/// `randperm`: torch's `randperm(n)` after `manual_seed(seed)`.
#[derive(Debug, Clone, Deserialize)]
pub struct RandpermCase {
    n: u64,
    #[serde(deserialize_with = "torch_seed")]
    seed: i128,
    expected: Value,
}

impl RandpermCase {
    pub(super) fn check(&self) -> Result<Option<String>, String> {
        let actual = generator(self.seed)?
            .randperm(self.n)
            .map_err(|e| e.to_string())?;
        Ok(compare(&self.expected, json!(actual)))
    }
}

/// `randperm_digest`: the head and SHA-256 of a permutation too large to list.
#[derive(Debug, Clone, Deserialize)]
pub struct RandpermDigestCase {
    n: u64,
    #[serde(deserialize_with = "torch_seed")]
    seed: i128,
    head: Value,
    sha256_le_i64: String,
}

/// `randint`: torch's `randint(high, (size,))` after `manual_seed(seed)`.
#[derive(Debug, Clone, Deserialize)]
pub struct RandintCase {
    high: u64,
    size: usize,
    #[serde(deserialize_with = "torch_seed")]
    seed: i128,
    expected: Value,
}

impl RandintCase {
    pub(super) fn check(&self) -> Result<Option<String>, String> {
        let mut g = generator(self.seed)?;
        let actual = g.randint(self.high, self.size).map_err(|e| e.to_string())?;
        Ok(compare(&self.expected, json!(actual)))
    }
}

/// `distributed_sampler`: every rank's indices of one epoch.
#[derive(Debug, Clone, Deserialize)]
pub struct DistributedCase {
    dataset_len: u64,
    num_replicas: u64,
    seed: i64,
    epoch: u64,
    shuffle: bool,
    drop_last: bool,
    expected: Value,
}

impl DistributedCase {
    pub(super) fn check(&self) -> Result<Option<String>, String> {
        let mut s = DistributedSampler::new(
            self.dataset_len,
            self.num_replicas,
            0,
            self.shuffle,
            self.seed,
            self.drop_last,
        )
        .map_err(|e| e.to_string())?;
        s.set_epoch(self.epoch);
        let actual = s.indices_all_ranks().map_err(|e| e.to_string())?;
        Ok(compare(&self.expected, json!(actual)))
    }
}

/// `load_balancing_sampler`: Bagua's sampler, every rank's indices of one epoch.
#[derive(Debug, Clone, Deserialize)]
pub struct LoadBalancingCase {
    complexities: Vec<i64>,
    num_replicas: u64,
    seed: i64,
    epoch: u64,
    shuffle: bool,
    drop_last: bool,
    random_level: f64,
    expected: Value,
}

impl LoadBalancingCase {
    pub(super) fn check(&self) -> Result<Option<String>, String> {
        let actual = self
            .sampler()?
            .indices_all_ranks()
            .map_err(|e| e.to_string())?;
        Ok(compare(&self.expected, json!(actual)))
    }

    fn sampler(&self) -> Result<LoadBalancingSampler, String> {
        let mut s = LoadBalancingSampler::new(
            self.complexities.clone(),
            self.num_replicas,
            0,
            self.shuffle,
            self.seed,
            self.drop_last,
            self.random_level,
        )
        .map_err(|e| e.to_string())?;
        s.set_epoch(self.epoch);
        Ok(s)
    }
}

/// `load_balancing_batch_sampler`: Bagua's batch sampler over the load-balancing sampler,
/// every rank's batches of one epoch.
#[derive(Debug, Clone, Deserialize)]
pub struct LoadBalancingBatchCase {
    #[serde(flatten)]
    sampler: LoadBalancingCase,
    batch_size: usize,
    drop_last_batches: bool,
}

impl LoadBalancingBatchCase {
    pub(super) fn check(&self) -> Result<Option<String>, String> {
        let batches = LoadBalancingBatchSampler::new(
            self.sampler.sampler()?,
            self.batch_size,
            self.drop_last_batches,
        )
        .map_err(|e| e.to_string())?;
        let actual = batches.batches_all_ranks().map_err(|e| e.to_string())?;
        Ok(compare(&self.sampler.expected, json!(actual)))
    }
}

/// `assign_ranks`: torch's `_assign_worker_ranks` over the groups' declared roles.
#[derive(Debug, Clone, Deserialize)]
pub struct AssignRanksCase {
    roles: Vec<GroupRole>,
    expected: Value,
}

impl AssignRanksCase {
    pub(super) fn check(&self) -> Option<String> {
        compare(&self.expected, json!(assign_worker_ranks(&self.roles)))
    }
}

fn compare(expected: &Value, actual: Value) -> Option<String> {
    first_difference(expected, &actual)
}

/// A seed as a vector writes it: a JSON integer, signed or not. (Read through a visitor:
/// serde buffers the fields of a tagged case, and its buffer holds no 128-bit integers.)
fn torch_seed<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i128, D::Error> {
    struct Integer;
    impl Visitor<'_> for Integer {
        type Value = i128;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("i128")
        }
        fn visit_i64<E>(self, v: i64) -> Result<i128, E> {
            Ok(i128::from(v))
        }
        fn visit_u64<E>(self, v: u64) -> Result<i128, E> {
            Ok(i128::from(v))
        }
    }
    deserializer.deserialize_any(Integer)
}

/// A generator after torch's `manual_seed(seed)`, which accepts `[-2^63, 2^64)`.
fn generator(seed: i128) -> Result<TorchGenerator, String> {
    if seed < i64::MIN as i128 || seed > u64::MAX as i128 {
        return Err(format!(
            "seed {seed} is outside torch's range [-2^63, 2^64)"
        ));
    }
    // Two's complement for negative seeds; only the low 32 bits matter anyway.
    Ok(TorchGenerator::new(seed as u64))
}

/// Checks the head and the SHA-256 of a large permutation; the permutation is held as
/// `u32` when it fits (half the memory) and hashed as little-endian `i64` in chunks.
impl RandpermDigestCase {
    pub(super) fn check(&self) -> Result<Option<String>, String> {
        check_randperm_digest(self)
    }
}

fn check_randperm_digest(c: &RandpermDigestCase) -> Result<Option<String>, String> {
    let mut g = generator(c.seed)?;
    let (head, digest) = match u32::try_from(c.n) {
        Ok(n) => {
            let perm = g.randperm_u32(n).map_err(|e| e.to_string())?;
            let head: Vec<u32> = perm.iter().take(DIGEST_HEAD_LEN).copied().collect();
            (json!(head), sha256_le_i64(&perm))
        }
        Err(_) => {
            let perm = g.randperm(c.n).map_err(|e| e.to_string())?;
            let head: Vec<u64> = perm.iter().take(DIGEST_HEAD_LEN).copied().collect();
            // Values past 2^63 cannot occur: they would need more memory than exists.
            let signed: Vec<i64> = perm.iter().map(|&v| v as i64).collect();
            (json!(head), sha256_le_i64(&signed))
        }
    };
    if let Some(d) = compare(&c.head, head) {
        return Ok(Some(format!("head: {d}")));
    }
    if digest != c.sha256_le_i64.to_ascii_lowercase() {
        return Ok(Some(format!(
            "sha256_le_i64: expected {}, actual {digest}",
            c.sha256_le_i64
        )));
    }
    Ok(None)
}

/// SHA-256 (hex) of the values as consecutive little-endian `i64`s.
fn sha256_le_i64<T: Copy + Into<i64>>(values: &[T]) -> String {
    let mut hasher = Sha256::new();
    let mut bytes = vec![0u8; DIGEST_CHUNK_VALUES * 8];
    for chunk in values.chunks(DIGEST_CHUNK_VALUES) {
        let used = &mut bytes[..chunk.len() * 8];
        for (dst, &value) in used.chunks_exact_mut(8).zip(chunk) {
            dst.copy_from_slice(&value.into().to_le_bytes());
        }
        hasher.update(used);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_of_known_values() {
        // SHA-256 of 16 zero bytes (two zero i64s).
        assert_eq!(
            sha256_le_i64(&[0i64, 0]),
            "374708fff7719dd5979ec875d56cd2286f6d3cf7ec317a3b25632aab28ec37bb"
        );
    }

    #[test]
    fn bad_seed_is_an_invalid_case() {
        let case = |value| serde_json::from_value::<super::super::Case>(value);
        let float_seed = json!({"kind": "randperm", "n": 2, "seed": -1e30, "expected": [0, 1]});
        assert!(case(float_seed).is_err());
        let no_seed = json!({"kind": "randperm", "n": 2, "expected": [0, 1]});
        assert!(case(no_seed).is_err());
        assert!(generator(i128::from(u64::MAX) + 1).is_err());
        assert!(generator(i128::from(i64::MIN)).is_ok());
    }
}
