//! The kind of a violation: which of the ways its invariant can break it shows. Each
//! invariant's kinds are one enum, defined next to the checker that reports them; [`Kind`]
//! gathers them into the one type a [`super::Violation`] carries, the report prints and the
//! fuzzer buckets findings by.

use super::agent::{NoZombieStepsKind, RestartBudgetKind};
use super::bootstrap::BootstrapKind;
use super::job::ProgressKind;
use super::ranks::RanksKind;
use super::reader_output::{BufferProtocolKind, ExactlyOnceKind, TerminatesKind};
use super::rendezvous::{
    AgreementKind, BoundsKind, ClosedIsFinalKind, ExclusiveKind, LivenessKind,
};
use super::restart_loop::RestartLoopKind;
use super::resume::ResumesKind;
use super::sampler::CoverageKind;
use super::sampler_reshuffle::ReshuffledKind;
use crate::invariant::Invariant;
use strum::VariantArray;

/// Declares one invariant's kinds: a fieldless enum whose variants serialize, and name
/// themselves, in kebab-case, and which lists its variants (for [`Kind::all_of`]).
macro_rules! kind_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($(#[$variant_meta:meta])* $variant:ident),* $(,)? }) => {
        $(#[$meta])*
        #[derive(
            Debug,
            Clone,
            Copy,
            PartialEq,
            Eq,
            PartialOrd,
            Ord,
            serde::Serialize,
            strum::IntoStaticStr,
            strum::VariantArray,
        )]
        #[serde(rename_all = "kebab-case")]
        #[strum(serialize_all = "kebab-case")]
        $vis enum $name {
            $($(#[$variant_meta])* $variant,)*
        }
    };
}
pub(super) use kind_enum;

/// Declares [`Kind`] with one variant per invariant, named as the invariant's, holding that
/// invariant's kinds; the matches it writes are exhaustive over [`Invariant`], so a new
/// invariant cannot go without kinds.
macro_rules! kinds {
    ($($invariant:ident($kinds:ty)),* $(,)?) => {
        /// The kind of one violation, tagged with its invariant. It serializes as the
        /// kind's kebab-case name alone (`delivered-twice`): the report prints it next to
        /// the invariant's name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
        #[serde(untagged)]
        pub enum Kind {
            $(
                #[doc = concat!("A violation of [`Invariant::", stringify!($invariant), "`].")]
                $invariant($kinds),
            )*
        }

        impl Kind {
            /// The kind's kebab-case name, unique within its invariant.
            pub fn name(self) -> &'static str {
                match self {
                    $(Kind::$invariant(kind) => kind.into(),)*
                }
            }

            /// The invariant a violation of this kind breaks.
            pub fn invariant(self) -> Invariant {
                match self {
                    $(Kind::$invariant(_) => Invariant::$invariant,)*
                }
            }

            /// Every kind `invariant` can report, in declaration order.
            pub fn all_of(invariant: Invariant) -> Vec<Kind> {
                match invariant {
                    $(Invariant::$invariant => <$kinds>::VARIANTS
                        .iter()
                        .map(|&kind| Kind::$invariant(kind))
                        .collect(),)*
                }
            }
        }

        $(
            impl From<$kinds> for Kind {
                fn from(kind: $kinds) -> Kind {
                    Kind::$invariant(kind)
                }
            }
        )*
    };
}

kinds! {
    RendezvousAgreement(AgreementKind),
    RendezvousExclusive(ExclusiveKind),
    RendezvousBounds(BoundsKind),
    RendezvousLiveness(LivenessKind),
    RendezvousClosedIsFinal(ClosedIsFinalKind),
    AgentRestartBudget(RestartBudgetKind),
    AgentRanks(RanksKind),
    AgentNoZombieSteps(NoZombieStepsKind),
    JobProgress(ProgressKind),
    SamplerCoverage(CoverageKind),
    ReaderExactlyOnce(ExactlyOnceKind),
    ReaderBufferProtocol(BufferProtocolKind),
    ReaderTerminates(TerminatesKind),
    AgentBootstrap(BootstrapKind),
    SamplerEpochReshuffled(ReshuffledKind),
    JobResumesAfterHeal(ResumesKind),
    AgentNoRestartLoop(RestartLoopKind),
}

impl std::fmt::Display for Kind {
    /// `reader.exactly_once:delivered-twice`: the invariant and the kind, as fuzz
    /// signatures name them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.invariant().name(), self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_invariant_has_distinct_kebab_case_kinds_of_its_own() {
        for &invariant in Invariant::VARIANTS {
            let kinds = Kind::all_of(invariant);
            assert!(!kinds.is_empty(), "{}", invariant.name());
            let names: BTreeSet<&str> = kinds.iter().map(|k| k.name()).collect();
            assert_eq!(names.len(), kinds.len(), "{}", invariant.name());
            for kind in kinds {
                assert_eq!(kind.invariant(), invariant);
                let name = kind.name();
                assert!(
                    name.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
                    "{name}"
                );
                let json = serde_json::to_string(&kind).unwrap();
                assert_eq!(json, format!("\"{name}\""));
            }
        }
    }

    #[test]
    fn every_kind_is_listed_in_its_invariants_row_of_the_docs() {
        let docs = include_str!("../../docs/invariants.md");
        let (_, kinds_section) = docs
            .split_once("## Kinds of violation")
            .expect("docs/invariants.md has a kinds section");
        for &invariant in Invariant::VARIANTS {
            let row_start = format!("| `{}` |", invariant.name());
            let row = kinds_section
                .lines()
                .find(|l| l.starts_with(&row_start))
                .unwrap_or_else(|| panic!("no kinds row for {}", invariant.name()));
            for kind in Kind::all_of(invariant) {
                let named = format!("`{}`", kind.name());
                assert!(row.contains(&named), "{kind} is not in its row: {row}");
            }
        }
    }

    #[test]
    fn a_kind_displays_with_its_invariant() {
        let kind = Kind::from(ExactlyOnceKind::DeliveredTwice);
        assert_eq!(kind.to_string(), "reader.exactly_once:delivered-twice");
    }
}
