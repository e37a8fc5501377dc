//! `trainsim fuzz`: campaigns around the ordinary run path that draw scenarios instead of
//! reading them (proptest strategies in [`strategy`], [`job_case`], [`reader_strategy`]).
//!
//! A campaign ([`campaign`]) runs every case of a range over a thread pool ([`parallel`]),
//! buckets findings by signature ([`signature`]), triages each signature against torch's
//! known behaviours ([`triage`]), shrinks and writes a minimal repro for each ([`minimal`]),
//! counts rare protocol situations ([`coverage`]), optionally keeps a corpus of cases that
//! reached new ones and mutates them ([`corpus`]), and writes a summary that merges across
//! case ranges ([`summary`]).
//!
//! What counts as a finding:
//! - without a mutant, any violated invariant (or harness failure) is a finding;
//! - with a mutant, torch's own behaviour already violates some invariants in some fault
//!   plans (`rendezvous.liveness` after a kill, pytorch#111646), so each failing case also
//!   runs without the mutant, and only invariants violated with the mutant but held or not
//!   applicable without it count. The canary is then what the fuzzer finds, not torch's
//!   known bugs.

pub mod campaign;
pub mod corpus;
pub mod coverage;
pub mod first_cause;
pub mod job_case;
pub mod minimal;
pub mod mutants;
pub mod parallel;
pub mod reader_strategy;
pub mod root_causes;
pub mod signature;
pub mod strategy;
pub mod summary;
pub mod triage;

use proptest::strategy::{BoxedStrategy, Strategy};
use strategy::Case;

/// Which part of the system the drawn scenarios exercise, named as `--target` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum FuzzTarget {
    /// Cluster shapes, rendezvous settings and fault plans ([`strategy`]).
    #[default]
    Rendezvous,
    /// The training job: data, samplers, GPUs and job faults ([`job_case`]).
    Job,
    /// Reader configurations with broken files and corrupt records ([`reader_strategy`]).
    Reader,
}

impl FuzzTarget {
    /// The target's name as `--target` spells it.
    pub fn name(self) -> &'static str {
        self.into()
    }

    fn strategy(self) -> BoxedStrategy<Case> {
        match self {
            FuzzTarget::Rendezvous => strategy::case().boxed(),
            FuzzTarget::Job => job_case::case().boxed(),
            FuzzTarget::Reader => reader_strategy::case().boxed(),
        }
    }
}
