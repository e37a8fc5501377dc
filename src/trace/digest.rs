//! The digest of the samples a node's ranks trained on in one step, as the trace records it
//! (`TrainedOn::samples_digest`), computed one node at a time or four at once, from batches
//! given as slices or read where a deal keeps them.

/// A digest of the batches a node's ranks trained on in one step, in local rank order:
/// order-sensitive, and a batch's length is folded in so that ids cannot slide from one rank
/// to the next unnoticed. Not cryptographic: it tells a job's slip from the sampler's deal.
/// Each id costs one multiply (the job digests every sample it trains on, and the checker
/// digests its own deal again), and one full mix at the end spreads every bit.
pub fn samples_digest<'a>(batches: impl IntoIterator<Item = &'a [u64]>) -> u64 {
    let mut digest = SEED;
    for batch in batches {
        digest = fold_batch(digest, batch);
    }
    mix(digest)
}

/// Where every digest's chain starts.
const SEED: u64 = 0x243f_6a88_85a3_08d3;

/// The [`samples_digest`] of `ranks` batches read where they lie: rank `rank`'s batch holds
/// `len(rank)` ids, its `i`-th being `id(rank, i)`. The same value as the batches given as
/// slices, for a deal that does not keep them as slices (torch's padded order, read by
/// stride).
pub fn samples_digest_by(
    ranks: u64,
    len: impl Fn(u64) -> u64,
    id: impl Fn(u64, u64) -> u64,
) -> u64 {
    let mut digest = SEED;
    for rank in 0..ranks {
        let ids = len(rank);
        digest = fold(digest, ids);
        for i in 0..ids {
            digest = fold(digest, id(rank, i));
        }
    }
    mix(digest)
}

/// [`samples_digests_x4`] of four nodes of `ranks` ranks whose batches all hold `len` ids,
/// read where they lie: node `node`'s rank `rank`'s `i`-th id is `id(node, rank, i)`.
pub fn even_digests_x4(ranks: u64, len: u64, id: impl Fn(usize, u64, u64) -> u64) -> [u64; 4] {
    let mut digests = [SEED; 4];
    for rank in 0..ranks {
        // Four locals rather than an array, so each chain stays in a register.
        let [mut d0, mut d1, mut d2, mut d3] = digests.map(|d| fold(d, len));
        for i in 0..len {
            d0 = fold(d0, id(0, rank, i));
            d1 = fold(d1, id(1, rank, i));
            d2 = fold(d2, id(2, rank, i));
            d3 = fold(d3, id(3, rank, i));
        }
        digests = [d0, d1, d2, d3];
    }
    digests.map(mix)
}

/// One word into the running digest: a rotate, an xor and an odd multiply (FxHash's step),
/// so a word's position changes what it contributes.
fn fold(digest: u64, word: u64) -> u64 {
    (digest.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95)
}

/// splitmix64's finalizer: every input bit reaches every output bit.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The [`samples_digest`] of each of four nodes' batches, computed together: a digest is a
/// chain of dependent multiplies, and four independent chains interleaved take about as
/// long as one. `batch(node, rank)` gives node `node`'s rank `rank`'s batch; every node has
/// `ranks` ranks. The values are exactly those of four calls to [`samples_digest`].
pub fn samples_digests_x4<'a>(ranks: u64, batch: impl Fn(usize, u64) -> &'a [u64]) -> [u64; 4] {
    let mut digests = [SEED; 4];
    for rank in 0..ranks {
        let batches = [0, 1, 2, 3].map(|node| batch(node, rank));
        let len = batches[0].len();
        if batches.iter().any(|b| b.len() != len) {
            // Uneven batches cannot go in step: fold each on its own.
            for (digest, b) in digests.iter_mut().zip(batches) {
                *digest = fold_batch(*digest, b);
            }
            continue;
        }
        // Four locals rather than an array, so each chain stays in a register.
        let [mut d0, mut d1, mut d2, mut d3] = digests.map(|d| fold(d, len as u64));
        let [b0, b1, b2, b3] = batches.map(|b| &b[..len]);
        for i in 0..len {
            d0 = fold(d0, b0[i]);
            d1 = fold(d1, b1[i]);
            d2 = fold(d2, b2[i]);
            d3 = fold(d3, b3[i]);
        }
        digests = [d0, d1, d2, d3];
    }
    digests.map(mix)
}

/// One batch, its length first, into a running digest.
fn fold_batch(mut digest: u64, batch: &[u64]) -> u64 {
    digest = fold(digest, batch.len() as u64);
    for &id in batch {
        digest = fold(digest, id);
    }
    digest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_tells_order_rank_boundaries_and_ids_apart() {
        let d = |batches: &[&[u64]]| samples_digest(batches.iter().copied());
        let base = d(&[&[1, 2], &[3]]);
        assert_eq!(base, d(&[&[1, 2], &[3]]));
        assert_ne!(base, d(&[&[2, 1], &[3]]), "order");
        assert_ne!(base, d(&[&[1], &[2, 3]]), "rank boundary");
        assert_ne!(base, d(&[&[1, 2], &[4]]), "ids");
        assert_ne!(d(&[&[], &[]]), d(&[&[]]), "empty batches still count");
    }

    #[test]
    fn the_digest_tells_every_swap_and_every_changed_id_of_a_step_apart() {
        let ranks: Vec<Vec<u64>> = (0..8u64)
            .map(|r| (0..32).map(|k| r * 1_000 + k * 7).collect())
            .collect();
        let digest = |ranks: &[Vec<u64>]| samples_digest(ranks.iter().map(Vec::as_slice));
        let base = digest(&ranks);
        let mut seen = std::collections::BTreeSet::from([base]);
        for r in 0..ranks.len() {
            for k in 0..ranks[r].len() {
                let mut changed = ranks.clone();
                changed[r][k] += 1;
                assert!(seen.insert(digest(&changed)), "id {k} of rank {r} changed");
                if k + 1 < ranks[r].len() {
                    let mut swapped = ranks.clone();
                    swapped[r].swap(k, k + 1);
                    assert!(
                        seen.insert(digest(&swapped)),
                        "ids {k}, {} of rank {r}",
                        k + 1
                    );
                }
            }
        }
    }

    #[test]
    fn four_digests_at_once_are_the_four_digests() {
        // Even batches, and uneven ones (a short last batch on some ranks of some nodes).
        for short in [false, true] {
            let batches: Vec<Vec<Vec<u64>>> = (0..4u64)
                .map(|node| {
                    (0..3u64)
                        .map(|rank| {
                            let len = if short && (node + rank) % 3 == 0 {
                                5
                            } else {
                                8
                            };
                            (0..len).map(|k| node * 977 + rank * 31 + k * 7).collect()
                        })
                        .collect()
                })
                .collect();
            let at_once = samples_digests_x4(3, |node, rank| &batches[node][rank as usize]);
            for (node, ranks) in batches.iter().enumerate() {
                let one = samples_digest(ranks.iter().map(Vec::as_slice));
                assert_eq!(at_once[node], one, "node {node}, short {short}");
            }
        }
        let empty: [u64; 4] = samples_digests_x4(0, |_, _| &[]);
        assert_eq!(empty, [samples_digest(std::iter::empty()); 4]);
    }

    #[test]
    fn digests_read_in_place_are_the_digests_of_the_slices() {
        // Four nodes of three ranks, batches of five ids; and ranks of uneven lengths.
        let id = |node: usize, rank: u64, i: u64| node as u64 * 977 + rank * 31 + i * 7;
        let batches: Vec<Vec<Vec<u64>>> = (0..4)
            .map(|node| {
                (0..3)
                    .map(|rank| (0..5).map(|i| id(node, rank, i)).collect())
                    .collect()
            })
            .collect();
        let in_place = even_digests_x4(3, 5, id);
        for (node, ranks) in batches.iter().enumerate() {
            let slices = samples_digest(ranks.iter().map(Vec::as_slice));
            assert_eq!(in_place[node], slices, "node {node}");
            assert_eq!(
                samples_digest_by(3, |_| 5, |rank, i| id(node, rank, i)),
                slices
            );
        }
        let uneven: Vec<Vec<u64>> = vec![vec![4, 1], vec![], vec![9, 9, 2]];
        let len = |rank: u64| uneven[rank as usize].len() as u64;
        let by = samples_digest_by(3, len, |rank, i| uneven[rank as usize][i as usize]);
        assert_eq!(by, samples_digest(uneven.iter().map(Vec::as_slice)));
    }
}
