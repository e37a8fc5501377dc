//! The mutants: bugs planted in the pure cores that only the command line switches on, so a
//! test can show the fuzzer finds a known bug (a canary). The hooks themselves live next to
//! the code they break (`rendezvous::{ops, apply, sanitize}`, `job::epoch_plan`, the reader's
//! collector), named by constants there.

use crate::runner::RunOptions;

/// Every mutant the command line knows, named (in kebab-case) as `--mutant` spells it, with
/// what it breaks, for `--help` and error messages.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
    strum::EnumMessage,
)]
#[strum(serialize_all = "kebab-case")]
pub enum Mutant {
    #[strum(message = "the join op admits a joiner of a complete round into its participants")]
    LateJoinerJoinsCompleteRound,
    #[strum(message = "completing a round gives two participants the same rank")]
    RankCollision,
    #[strum(message = "sanitize never drops a dead node")]
    NoHeartbeatExpiry,
    #[strum(message = "DistributedSampler's stride starts at rank + 1 instead of rank")]
    SamplerOffByOne,
    #[strum(message = "the reader's collector hands a batch out twice")]
    ReaderDoublePublish,
}

/// Every mutant the command line knows: the rendezvous core's, the job's and the reader's.
pub fn known() -> Vec<&'static str> {
    <Mutant as strum::VariantArray>::VARIANTS
        .iter()
        .map(|m| m.into())
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

    use strum::EnumMessage;

    #[test]
    fn every_known_mutant_is_described_and_unknown_ones_are_refused() {
        for name in known() {
            let mutant: Mutant = name.parse().unwrap();
            assert!(mutant.get_message().is_some_and(|m| !m.is_empty()));
            assert!(options_of(&[name.to_string()]).is_ok());
        }
        let error = options_of(&["no-such-bug".to_string()]).unwrap_err();
        assert_eq!(
            error,
            "`no-such-bug` is not a mutant (one of: late-joiner-joins-complete-round, \
             rank-collision, no-heartbeat-expiry, sampler-off-by-one, reader-double-publish)"
        );
    }

    #[test]
    fn the_mutants_are_the_ones_the_hooks_test() {
        let hooks: Vec<&str> = crate::rendezvous::settings::KNOWN_MUTANTS
            .iter()
            .chain([&crate::job::epoch_plan::MUTANT_SAMPLER_OFF_BY_ONE])
            .chain(crate::reader::KNOWN_MUTANTS.iter())
            .copied()
            .collect();
        assert_eq!(known(), hooks);
    }

    #[test]
    fn each_mutant_reaches_the_part_whose_hook_tests_it() {
        for name in known() {
            let mut mutants = crate::runner::Mutants::default();
            mutants.switch_on(name).expect("a known mutant");
            let part = |set: &std::collections::BTreeSet<String>| set.contains(name);
            assert_eq!(
                part(&mutants.rendezvous),
                crate::rendezvous::settings::KNOWN_MUTANTS.contains(&name),
                "{name}"
            );
            assert_eq!(
                part(&mutants.job),
                name == crate::job::epoch_plan::MUTANT_SAMPLER_OFF_BY_ONE,
                "{name}"
            );
            assert_eq!(
                part(&mutants.reader),
                crate::reader::KNOWN_MUTANTS.contains(&name),
                "{name}"
            );
        }
    }
}
