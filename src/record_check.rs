//! How the data reader's records are framed and checked (HugeCTR's `Check_t`): a word of
//! the scenario format (`reader.check`) that the reader model acts on, kept on the ground
//! floor so the scenario names it without reaching up into the reader.

use serde::{Deserialize, Serialize};

/// How records are framed and checked, as `reader.check` spells it (`sum`, `none`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// Each block is framed as length, bytes, byte-sum; a wrong sum fails the record.
    Sum,
    /// Raw records: nothing is checked, so corrupt or missing bytes go unnoticed.
    None,
}

impl CheckKind {
    /// The `error_check` value a file header carries for this check type.
    pub fn header_code(self) -> u32 {
        match self {
            CheckKind::Sum => 1,
            CheckKind::None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scenario_spelling_reads_and_writes() {
        #[derive(Deserialize, Serialize)]
        struct Section {
            check: CheckKind,
        }
        let sum: Section = toml::from_str("check = \"sum\"").unwrap();
        assert_eq!(sum.check, CheckKind::Sum);
        let none: Section = toml::from_str("check = \"none\"").unwrap();
        assert_eq!(none.check, CheckKind::None);
        assert!(toml::from_str::<Section>("check = \"Sum\"").is_err());
        let written = toml::to_string(&Section {
            check: CheckKind::None,
        })
        .unwrap();
        assert_eq!(written.trim(), "check = \"none\"");
    }
}
