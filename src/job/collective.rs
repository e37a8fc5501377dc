//! The cost of a step's gradient all-reduce: NCCL's ring, modelled with the α-β cost.
//!
//! Inside a node the GPUs reduce over NVLink (the profile's device-to-device bandwidth);
//! across nodes a ring of N nodes moves 2(N−1)/N of the bytes over each node's link in
//! 2(N−1) latency-bound steps. The two phases add up (hierarchical all-reduce).

/// Microseconds to all-reduce `bytes` over `nodes` nodes of `gpus` GPUs each.
pub fn ring_all_reduce_us(
    bytes: u64,
    nodes: u64,
    gpus: u64,
    latency_us: u64,
    bandwidth_bits_per_sec: u64,
    d2d_bits_per_sec: u64,
) -> u64 {
    let bits = bytes as f64 * 8.0;
    let intra_us = if gpus > 1 && d2d_bits_per_sec > 0 {
        2.0 * (gpus - 1) as f64 / gpus as f64 * bits / d2d_bits_per_sec as f64 * 1e6
    } else {
        0.0
    };
    let inter_us = if nodes > 1 && bandwidth_bits_per_sec > 0 {
        let steps = 2.0 * (nodes - 1) as f64;
        steps * latency_us as f64
            + steps / nodes as f64 * bits / bandwidth_bits_per_sec as f64 * 1e6
    } else {
        0.0
    };
    let us = (intra_us + inter_us).round();
    if us.is_finite() {
        us.min(u64::MAX as f64) as u64
    } else {
        u64::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_gpu_alone_costs_nothing() {
        assert_eq!(ring_all_reduce_us(1 << 30, 1, 1, 1000, 1, 1), 0);
    }

    #[test]
    fn ring_cost_follows_alpha_beta() {
        // 2 nodes, 1 GPU each, 1 GB at 8 Gbps: 2·1/2·8e9/8e9 s = 1 s, plus 2 latencies.
        assert_eq!(
            ring_all_reduce_us(1_000_000_000, 2, 1, 500, 8_000_000_000, 1),
            1_001_000
        );
        // Bandwidth term tends to 2·M/B as the ring grows.
        let big = ring_all_reduce_us(1_000_000_000, 1000, 1, 0, 8_000_000_000, 1);
        assert!((1_990_000..2_000_000).contains(&big), "{big}");
        // NVLink phase for 8 GPUs: 2·7/8 · 8e9 bits / 8e12 = 1750 us.
        assert_eq!(
            ring_all_reduce_us(1_000_000_000, 1, 8, 0, 1, 8_000_000_000_000),
            1750
        );
    }
}
