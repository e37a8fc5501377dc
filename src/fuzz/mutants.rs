//! The command line's side of the mutants (`crate::mutant`): their names and the run
//! options that switch them on.

pub use crate::mutant::Mutant;
use crate::runner::RunOptions;

/// Every mutant the command line knows: the rendezvous core's, the job's and the reader's.
pub fn known() -> Vec<&'static str> {
    <Mutant as strum::VariantArray>::VARIANTS
        .iter()
        .map(|m| m.into())
        .collect()
}

/// The mutant `name` names; an unknown name is an error that lists the known ones (the CLI
/// turns it into exit 2).
pub fn parse(name: &str) -> Result<Mutant, String> {
    name.parse()
        .map_err(|_| format!("`{name}` is not a mutant (one of: {})", known().join(", ")))
}

/// Run options with the named mutants on; an unknown name is an error as [`parse`] gives it.
pub fn options_of(names: &[String]) -> Result<RunOptions, String> {
    let mut options = RunOptions::default();
    for name in names {
        options.mutants.insert(parse(name)?);
    }
    Ok(options)
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
}
