//! Parity cases of the samplers, torch RNG and rank assignment.

use serde::de::DeserializeOwned;
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

/// Recomputes one case of a sampler kind: `Ok(None)` when it matches, `Ok(Some(description))`
/// when it differs, `Err` when the case is not valid (missing field, impossible parameters).
pub fn check_case(kind: &str, case: &Value) -> Result<Option<String>, String> {
    match kind {
        "randperm" => {
            let c: RandpermCase = parse(case)?;
            let actual = generator(c.seed)?
                .randperm(c.n)
                .map_err(|e| e.to_string())?;
            Ok(compare(&c.expected, json!(actual)))
        }
        "randperm_digest" => check_randperm_digest(parse(case)?),
        "randint" => {
            let c: RandintCase = parse(case)?;
            let mut g = generator(c.seed)?;
            let actual = g.randint(c.high, c.size).map_err(|e| e.to_string())?;
            Ok(compare(&c.expected, json!(actual)))
        }
        "distributed_sampler" => {
            let c: DistributedCase = parse(case)?;
            let mut s = DistributedSampler::new(
                c.dataset_len,
                c.num_replicas,
                0,
                c.shuffle,
                c.seed,
                c.drop_last,
            )
            .map_err(|e| e.to_string())?;
            s.set_epoch(c.epoch);
            let actual = s.indices_all_ranks().map_err(|e| e.to_string())?;
            Ok(compare(&c.expected, json!(actual)))
        }
        "load_balancing_sampler" => {
            let c: LoadBalancingCase = parse(case)?;
            let actual = load_balancing(&c)?
                .indices_all_ranks()
                .map_err(|e| e.to_string())?;
            Ok(compare(&c.expected, json!(actual)))
        }
        "load_balancing_batch_sampler" => {
            let c: LoadBalancingCase = parse(case)?;
            let batch_size = c.batch_size.ok_or("missing field `batch_size`")?;
            let drop_last_batches = c
                .drop_last_batches
                .ok_or("missing field `drop_last_batches`")?;
            let sampler = load_balancing(&c)?;
            let batches = LoadBalancingBatchSampler::new(sampler, batch_size, drop_last_batches)
                .map_err(|e| e.to_string())?;
            let actual = batches.batches_all_ranks().map_err(|e| e.to_string())?;
            Ok(compare(&c.expected, json!(actual)))
        }
        "assign_ranks" => {
            let c: AssignRanksCase = parse(case)?;
            Ok(compare(&c.expected, json!(assign_worker_ranks(&c.roles))))
        }
        other => Err(format!("kind {other:?} is not a sampler kind")),
    }
}

#[derive(Deserialize)]
struct RandpermCase {
    n: u64,
    seed: i128,
    expected: Value,
}

#[derive(Deserialize)]
struct RandpermDigestCase {
    n: u64,
    seed: i128,
    head: Value,
    sha256_le_i64: String,
}

#[derive(Deserialize)]
struct RandintCase {
    high: u64,
    size: usize,
    seed: i128,
    expected: Value,
}

#[derive(Deserialize)]
struct DistributedCase {
    dataset_len: u64,
    num_replicas: u64,
    seed: i64,
    epoch: u64,
    shuffle: bool,
    drop_last: bool,
    expected: Value,
}

#[derive(Deserialize)]
struct LoadBalancingCase {
    complexities: Vec<i64>,
    num_replicas: u64,
    seed: i64,
    epoch: u64,
    shuffle: bool,
    drop_last: bool,
    random_level: f64,
    batch_size: Option<usize>,
    drop_last_batches: Option<bool>,
    expected: Value,
}

#[derive(Deserialize)]
struct AssignRanksCase {
    roles: Vec<GroupRole>,
    expected: Value,
}

fn parse<T: DeserializeOwned>(case: &Value) -> Result<T, String> {
    T::deserialize(case).map_err(|e| e.to_string())
}

fn compare(expected: &Value, actual: Value) -> Option<String> {
    first_difference(expected, &actual)
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

fn load_balancing(c: &LoadBalancingCase) -> Result<LoadBalancingSampler, String> {
    let mut s = LoadBalancingSampler::new(
        c.complexities.clone(),
        c.num_replicas,
        0,
        c.shuffle,
        c.seed,
        c.drop_last,
        c.random_level,
    )
    .map_err(|e| e.to_string())?;
    s.set_epoch(c.epoch);
    Ok(s)
}

/// Checks the head and the SHA-256 of a large permutation; the permutation is held as
/// `u32` when it fits (half the memory) and hashed as little-endian `i64` in chunks.
fn check_randperm_digest(c: RandpermDigestCase) -> Result<Option<String>, String> {
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
        let case = json!({"kind": "randperm", "n": 2, "seed": -1e30, "expected": [0, 1]});
        assert!(check_case("randperm", &case).is_err());
        let case = json!({"kind": "randperm", "n": 2, "expected": [0, 1]});
        assert!(check_case("randperm", &case).is_err());
    }
}
