//! The mutants: bugs planted in the pure cores that only the command line switches on, so a
//! test can show the fuzzer finds a known bug (a canary). The hooks themselves live next to
//! the code they break (`rendezvous::{ops, apply, sanitize}`, `job::epoch_plan`, the reader's
//! collector), named by constants there.

use crate::runner::RunOptions;

/// What each mutant breaks, for `--help` and error messages.
pub const DESCRIPTIONS: &[(&str, &str)] = &[
    (
        "late-joiner-joins-complete-round",
        "the join op admits a joiner of a complete round into its participants",
    ),
    (
        "rank-collision",
        "completing a round gives two participants the same rank",
    ),
    ("no-heartbeat-expiry", "sanitize never drops a dead node"),
    (
        "sampler-off-by-one",
        "DistributedSampler's stride starts at rank + 1 instead of rank",
    ),
    (
        "reader-double-publish",
        "the reader's collector hands a batch out twice",
    ),
];

/// Every mutant the command line knows: the rendezvous core's, the job's and the reader's.
pub fn known() -> Vec<&'static str> {
    crate::rendezvous::settings::KNOWN_MUTANTS
        .iter()
        .chain(std::iter::once(
            &crate::job::epoch_plan::MUTANT_SAMPLER_OFF_BY_ONE,
        ))
        .chain(crate::reader::KNOWN_MUTANTS.iter())
        .copied()
        .collect()
}

/// Run options with the named mutants on; an unknown name is an error that lists the known
/// ones (the CLI turns it into exit 2).
pub fn options_of(names: &[String]) -> Result<RunOptions, String> {
    RunOptions::with_mutants(names)
        .map_err(|name| format!("`{name}` is not a mutant (one of: {})", known().join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_mutant_is_described_and_unknown_ones_are_refused() {
        for name in known() {
            assert!(DESCRIPTIONS.iter().any(|(n, _)| *n == name));
            assert!(options_of(&[name.to_string()]).is_ok());
        }
        assert!(options_of(&["no-such-bug".to_string()]).is_err());
    }
}
