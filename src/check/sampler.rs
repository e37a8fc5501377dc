//! The `sampler.*` invariants, judged on what the ranks actually trained on: the job's
//! sample ledger summarises every epoch a group finished (`EpochCovered`).

use super::{InvariantResult, Violation};
use crate::sampler::samples_per_rank;
use crate::scenario::model::Scenario;
use crate::trace::{EventKind, Trace};

/// `sampler.coverage`: per epoch a group finished, every rank trained on the same number of
/// samples; an epoch run from its start covers the whole dataset (all of it, or with
/// `drop_last` exactly `num_samples × world_size` distinct samples); and the only repeats
/// are the sampler's padding (`total_size − len`). An epoch resumed mid-way is held to the
/// counts of its remaining batches and to the padding bound. Not applicable when no epoch
/// was finished.
pub(super) fn coverage(scenario: &Scenario, trace: &Trace) -> InvariantResult {
    let len = scenario.job.dataset.len;
    let sampler = &scenario.job.sampler;
    let mut applicable = false;
    let mut violations = Vec::new();
    for event in &trace.events {
        let EventKind::EpochCovered {
            epoch,
            world_size,
            first_batch,
            samples,
            distinct,
            ranks,
            rank_samples_min,
            rank_samples_max,
            ..
        } = &event.kind
        else {
            continue;
        };
        applicable = true;
        let mut fail = |message: String| {
            violations.push(Violation::new(
                event.at_us,
                event.node.as_deref(),
                format!("epoch {epoch} (world size {world_size}): {message}"),
            ))
        };
        let (num_samples, total_size) = samples_per_rank(len, *world_size, sampler.drop_last);
        let expected_per_rank =
            num_samples.saturating_sub(first_batch.saturating_mul(sampler.batch_size));
        if ranks != world_size {
            fail(format!("{ranks} of {world_size} ranks trained"));
        }
        if rank_samples_min != rank_samples_max {
            fail(format!(
                "ranks trained on unequal counts, {rank_samples_min} to {rank_samples_max}"
            ));
        }
        if *rank_samples_max != expected_per_rank || *rank_samples_min != expected_per_rank {
            fail(format!(
                "a rank trained on {rank_samples_min}..{rank_samples_max} samples, the sampler's num_samples leaves {expected_per_rank}"
            ));
        }
        let padding = total_size.saturating_sub(len);
        let repeats = samples - distinct;
        if repeats > padding {
            fail(format!(
                "{repeats} samples were repeated, but padding accounts for only {padding}"
            ));
        }
        let whole = total_size.min(len);
        if *first_batch == 0 && *distinct != whole {
            fail(format!(
                "the ranks together covered {distinct} distinct samples of the {whole} the epoch must cover"
            ));
        }
    }
    InvariantResult::judge("sampler.coverage", applicable, violations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::testkit::{e, scenario, trace};
    use crate::check::Status;

    fn covered(first_batch: u64, samples: u64, distinct: u64, min: u64, max: u64) -> EventKind {
        EventKind::EpochCovered {
            store_incarnation: 1,
            round: 0,
            epoch: 0,
            world_size: 4,
            first_batch,
            samples,
            distinct,
            ranks: 4,
            rank_samples_min: min,
            rank_samples_max: max,
        }
    }

    fn judge(len: u64, kind: EventKind) -> InvariantResult {
        let mut s = scenario();
        s.job.dataset.len = len;
        s.job.sampler.drop_last = false;
        s.job.sampler.batch_size = 2;
        coverage(&s, &trace(vec![e(1, "node-0", kind)]))
    }

    #[test]
    fn a_whole_padded_epoch_holds() {
        // 10 samples over 4 ranks: 3 each, 2 of padding.
        assert_eq!(judge(10, covered(0, 12, 10, 3, 3)).status, Status::Held);
    }

    #[test]
    fn unequal_counts_missing_samples_and_extra_repeats_are_violations() {
        assert_eq!(judge(10, covered(0, 11, 10, 2, 3)).status, Status::Violated);
        assert_eq!(judge(10, covered(0, 12, 9, 3, 3)).status, Status::Violated);
        assert_eq!(judge(10, covered(0, 12, 8, 3, 3)).status, Status::Violated);
    }

    #[test]
    fn a_resumed_epoch_is_held_to_its_remaining_batches() {
        // Resumed at batch 1 of 2: 1 sample per rank remains.
        assert_eq!(judge(10, covered(1, 4, 4, 1, 1)).status, Status::Held);
        assert_eq!(judge(10, covered(1, 8, 8, 2, 2)).status, Status::Violated);
    }

    #[test]
    fn without_finished_epochs_it_does_not_apply() {
        let r = coverage(&scenario(), &trace(Vec::new()));
        assert_eq!(r.status, Status::NotApplicable);
    }
}
