//! proptest strategies that draw whole scenarios for the reader target.
//!
//! A case is a short fault-free job (1–2 nodes of one GPU each, 10–60 steps of 10 ms, a
//! 5 min time limit) fed by a drawn `[reader]`: 1–4 workers over as many to 12 files of
//! 1–40 records, a batch of 1–32 rounded up to a multiple of the nodes (HugeCTR splits a
//! batch over every GPU), repeat mode one time in four, either check, and swarm-style data
//! faults: each case first picks which of broken files, corrupt records, truncated files
//! and fixes it draws at all, then draws up to a few of each. Every part is drawn
//! independently and made valid afterwards, so shrinking simplifies each on its own;
//! everything drawn is within the validation bounds (a test checks the round trip).

use super::strategy::Case;
use crate::reader::config::ReaderFix;
use crate::scenario;
use crate::scenario::model::{CheckKind, ReaderSection};
use crate::sim_time::SimDuration;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use strum::VariantArray;

/// Most files a drawn reader has.
pub const FILES_MAX: u32 = 12;
/// Most records per drawn file.
pub const RECORDS_PER_FILE_MAX: u64 = 40;

/// The reader's shape: workers, extra files beyond them, records per file, batch size,
/// repeat, check.
type Shape = (u32, u32, u64, u64, u8, bool);

/// Data faults before they are made valid: file and record picks, reduced modulo the
/// drawn shape.
type FaultPicks = (Vec<u32>, Vec<(u32, u64)>, Vec<(u32, u64)>, Vec<usize>);

fn picks() -> impl Strategy<Value = FaultPicks> {
    (
        proptest::collection::vec(0u32..FILES_MAX, 0..=4),
        proptest::collection::vec((0u32..FILES_MAX, 0u64..RECORDS_PER_FILE_MAX), 0..=6),
        proptest::collection::vec((0u32..FILES_MAX, 0u64..RECORDS_PER_FILE_MAX), 0..=2),
        proptest::collection::vec(0usize..ReaderFix::VARIANTS.len(), 0..=3),
    )
}

/// Whole reader cases.
pub fn case() -> impl Strategy<Value = Case> {
    (
        (
            1u32..=4,
            0u32..=8,
            1u64..=RECORDS_PER_FILE_MAX,
            1u64..=32,
            0u8..4,
            any::<bool>(),
        ),
        (1u32..=2, 10u64..=60),
        // Swarm: which fault families this case uses at all.
        0u8..16,
        picks(),
        any::<u64>(),
    )
        .prop_map(|(shape, (nodes, steps), mask, picks, seed)| {
            let mut s = scenario::default_scenario("fuzz reader case");
            s.time_limit = SimDuration::from_ms(300_000);
            s.cluster.nodes = nodes;
            // One GPU per node, so the drawn batch needs only to split over the nodes.
            s.cluster.gpus_per_node = 1;
            s.agent.nproc_per_node = 1;
            s.rendezvous.min_nodes = nodes;
            s.rendezvous.max_nodes = nodes;
            s.job.steps = steps;
            s.job.step_time = SimDuration::from_ms(10);
            s.job.checkpoint_every = 10;
            let mut r = reader(shape, mask, &picks);
            r.batch_size = r.batch_size.div_ceil(u64::from(nodes)) * u64::from(nodes);
            s.reader = Some(r);
            Case {
                scenario: s,
                // TOML integers are signed: keep the seed within them.
                seed: seed >> 1,
            }
        })
}

fn reader(shape: Shape, mask: u8, picks: &FaultPicks) -> ReaderSection {
    let (workers, extra_files, records_per_file, batch_size, repeat_pick, sum) = shape;
    let files = (workers + extra_files).min(FILES_MAX);
    let (broken, corrupt, truncated, fixes) = picks;
    let on = |bit: u8| mask & (1 << bit) != 0;
    let broken: BTreeSet<u32> = if on(0) {
        broken.iter().map(|f| f % files).collect()
    } else {
        BTreeSet::new()
    };
    let corrupt: BTreeSet<(u32, u64)> = if on(1) {
        corrupt
            .iter()
            .map(|&(f, r)| (f % files, r % records_per_file))
            .collect()
    } else {
        BTreeSet::new()
    };
    let truncated: BTreeMap<u32, u64> = if on(2) {
        truncated
            .iter()
            .map(|&(f, kept)| (f % files, kept % records_per_file))
            .collect()
    } else {
        BTreeMap::new()
    };
    let fixes: BTreeSet<ReaderFix> = if on(3) {
        fixes.iter().map(|&i| ReaderFix::VARIANTS[i]).collect()
    } else {
        BTreeSet::new()
    };
    ReaderSection {
        workers,
        files,
        records_per_file,
        batch_size,
        repeat: repeat_pick == 0,
        check: if sum { CheckKind::Sum } else { CheckKind::None },
        broken_files: broken.into_iter().collect(),
        corrupt_records: corrupt.into_iter().collect(),
        truncated_files: truncated.into_iter().collect(),
        parse_time: SimDuration::from_us(1),
        record_size_bytes: 368,
        fixes: fixes.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_drawn_reader_scenario_round_trips_through_toml() {
        crate::fuzz::strategy::assert_cases_round_trip(super::case(), 9);
    }
}
