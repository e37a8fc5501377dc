//! The contract's invariants, each named once with what it asserts: what `expect.violations`
//! may list, what every report lists (in this order), and what `check` judges. Names are
//! stable: later additions go at the end, nothing is renamed or reordered.

/// One invariant of the contract, in the contract's order.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
pub enum Invariant {
    #[strum(serialize = "rendezvous.agreement")]
    RendezvousAgreement,
    #[strum(serialize = "rendezvous.exclusive")]
    RendezvousExclusive,
    #[strum(serialize = "rendezvous.bounds")]
    RendezvousBounds,
    #[strum(serialize = "rendezvous.liveness")]
    RendezvousLiveness,
    #[strum(serialize = "rendezvous.closed_is_final")]
    RendezvousClosedIsFinal,
    #[strum(serialize = "agent.restart_budget")]
    AgentRestartBudget,
    #[strum(serialize = "agent.ranks")]
    AgentRanks,
    #[strum(serialize = "agent.no_zombie_steps")]
    AgentNoZombieSteps,
    #[strum(serialize = "job.progress")]
    JobProgress,
    #[strum(serialize = "sampler.coverage")]
    SamplerCoverage,
    #[strum(serialize = "reader.exactly_once")]
    ReaderExactlyOnce,
    #[strum(serialize = "reader.buffer_protocol")]
    ReaderBufferProtocol,
    #[strum(serialize = "reader.terminates")]
    ReaderTerminates,
    #[strum(serialize = "agent.bootstrap")]
    AgentBootstrap,
    #[strum(serialize = "sampler.epoch_reshuffled")]
    SamplerEpochReshuffled,
    #[strum(serialize = "job.resumes_after_heal")]
    JobResumesAfterHeal,
    #[strum(serialize = "agent.no_restart_loop")]
    AgentNoRestartLoop,
}

impl Invariant {
    /// The stable name reports and scenario files use (`rendezvous.agreement`).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// What must hold, in one line (docs/invariants.md says how each is judged).
    pub fn meaning(self) -> &'static str {
        match self {
            Invariant::RendezvousAgreement => {
                "every node that completes a round sees the same participants and world size"
            }
            Invariant::RendezvousExclusive => {
                "at most one group per round, and no process a member of two live groups"
            }
            Invariant::RendezvousBounds => "min_nodes <= world size <= max_nodes at every completion",
            Invariant::RendezvousLiveness => {
                "enough live waiting agents complete a round within the bound, and none waits for ever"
            }
            Invariant::RendezvousClosedIsFinal => "no round completes after the rendezvous closed",
            Invariant::AgentRestartBudget => {
                "per agent process, restarts after failures <= max_restarts"
            }
            Invariant::AgentRanks => {
                "the worker ranks agents read back form disjoint blocks covering the world"
            }
            Invariant::AgentNoZombieSteps => "workers take steps only while their group runs",
            Invariant::JobProgress => {
                "steps go up by one, roll back only to the last checkpoint, and finish on success"
            }
            Invariant::SamplerCoverage => {
                "every epoch's samples are dealt to the ranks as torch's samplers deal them"
            }
            Invariant::ReaderExactlyOnce => {
                "every intact record is handed out and trained on once per epoch"
            }
            Invariant::ReaderBufferProtocol => {
                "reader buffers move only through HugeCTR's state cycle, by their own threads"
            }
            Invariant::ReaderTerminates => "no trainer waits for ever on its reader",
            Invariant::AgentBootstrap => {
                "every member of a round's worker group was given the same bootstrap address"
            }
            Invariant::SamplerEpochReshuffled => {
                "with shuffling on, no epoch is trained in the order of the epoch before"
            }
            Invariant::JobResumesAfterHeal => {
                "once the faults are over and min_nodes healthy nodes run agents, training resumes"
            }
            Invariant::AgentNoRestartLoop => {
                "no worker group restarts without a step more often than the scenario explains"
            }
        }
    }

    /// Whether it judges the job as a whole (does training go on?) rather than one mechanism:
    /// a fix removes a finding when the mechanism invariants hold, and restores the job when
    /// these hold too.
    pub fn judges_the_whole_job(self) -> bool {
        matches!(
            self,
            Invariant::JobResumesAfterHeal | Invariant::AgentNoRestartLoop
        )
    }

    /// Every invariant's name, in the contract's order.
    pub fn names() -> impl Iterator<Item = &'static str> {
        use strum::VariantArray;
        Invariant::VARIANTS.iter().map(|i| i.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::VariantArray;

    #[test]
    fn names_parse_back_and_stay_in_the_contract_order() {
        for invariant in Invariant::VARIANTS {
            assert_eq!(invariant.name().parse::<Invariant>(), Ok(*invariant));
            assert!(!invariant.meaning().is_empty());
        }
        let first_and_last = (Invariant::names().next(), Invariant::names().last());
        assert_eq!(
            first_and_last,
            (Some("rendezvous.agreement"), Some("agent.no_restart_loop"))
        );
    }
}
