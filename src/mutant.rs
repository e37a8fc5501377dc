//! The mutants: bugs planted in the pure cores that only the command line switches on, so a
//! test can show the fuzzer finds a known bug (a canary). Each hook lives next to the code
//! it breaks (`rendezvous::{ops, apply, sanitize}`, `job`'s epoch plans, the reader's
//! collector) and tests for its variant.

use std::collections::BTreeSet;

/// Every mutant the command line knows, named (in kebab-case) as `--mutant` spells it, with
/// what it breaks, for `--help` and error messages.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
    strum::EnumMessage,
)]
#[serde(rename_all = "kebab-case")]
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

impl Mutant {
    /// The mutant's name as `--mutant` spells it.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// The planted bugs of one run, by the part of the simulation each breaks: the rendezvous
/// core's go into its settings, the job's into its epoch plans, the reader's into each
/// node's reader configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mutants {
    /// For `RendezvousSettings::mutants`.
    pub rendezvous: BTreeSet<Mutant>,
    /// Read by the job's epoch plans.
    pub job: BTreeSet<Mutant>,
    /// For the reader's `ReaderConfig::mutants`.
    pub reader: BTreeSet<Mutant>,
}

impl Mutants {
    /// Switches the mutant `name` (as `--mutant` spells it) on where it acts; an unknown
    /// name is an error naming it.
    pub fn switch_on(&mut self, name: &str) -> Result<(), String> {
        let mutant: Mutant = name.parse().map_err(|_| name.to_owned())?;
        self.insert(mutant);
        Ok(())
    }

    /// Switches `mutant` on where it acts.
    pub fn insert(&mut self, mutant: Mutant) {
        // Exhaustive, so a new mutant must say which part of the simulation it breaks.
        let set = match mutant {
            Mutant::LateJoinerJoinsCompleteRound
            | Mutant::RankCollision
            | Mutant::NoHeartbeatExpiry => &mut self.rendezvous,
            Mutant::SamplerOffByOne => &mut self.job,
            Mutant::ReaderDoublePublish => &mut self.reader,
        };
        set.insert(mutant);
    }

    /// Every mutant switched on, by name, in name order.
    pub fn names(&self) -> BTreeSet<&'static str> {
        self.rendezvous
            .iter()
            .chain(&self.job)
            .chain(&self.reader)
            .map(|&m| m.into())
            .collect()
    }
}
