//! The mutants: bugs planted in the pure cores that only the command line switches on, so a
//! test can show the fuzzer finds a known bug (a canary). Each hook lives next to the code
//! it breaks (`rendezvous::{ops, apply, sanitize}`, `job`'s epoch plans, the reader's
//! collector) and tests for its variant.

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
