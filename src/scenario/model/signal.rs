//! The signals a scenario names: the ones torchrun's agent may be told to handle
//! (`agent.signals_to_handle`), the one a training script checkpoints on
//! (`job.checkpoint_on_signal`) and the ones a `signal` fault sends.

/// A POSIX signal, spelled as torchrun's `--signals-to-handle` and Python's `signal` module
/// spell it (`"SIGUSR1"`).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    serde::Deserialize,
    schemars::JsonSchema,
    serde::Serialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
pub enum Signal {
    #[serde(rename = "SIGTERM")]
    #[strum(serialize = "SIGTERM")]
    Term,
    #[serde(rename = "SIGINT")]
    #[strum(serialize = "SIGINT")]
    Int,
    #[serde(rename = "SIGHUP")]
    #[strum(serialize = "SIGHUP")]
    Hup,
    #[serde(rename = "SIGQUIT")]
    #[strum(serialize = "SIGQUIT")]
    Quit,
    #[serde(rename = "SIGUSR1")]
    #[strum(serialize = "SIGUSR1")]
    Usr1,
    #[serde(rename = "SIGUSR2")]
    #[strum(serialize = "SIGUSR2")]
    Usr2,
}

impl Signal {
    /// Linux's number for it: a process it kills reports `-number` to `Popen`, and a shell
    /// shows `128 + number`.
    pub fn number(self) -> i32 {
        match self {
            Signal::Term => 15,
            Signal::Int => 2,
            Signal::Hup => 1,
            Signal::Quit => 3,
            Signal::Usr1 => 10,
            Signal::Usr2 => 12,
        }
    }

    /// The signals a `signal` fault may send: the user signals schedulers send before a
    /// preemption (SLURM's `--signal`). SIGTERM is the `stop` fault.
    pub fn is_user(self) -> bool {
        matches!(self, Signal::Usr1 | Signal::Usr2)
    }
}

/// torchrun's default `--signals-to-handle` (`TORCHELASTIC_SIGNALS_TO_HANDLE`) in torch 2.15.
pub const SIGNALS_HANDLED_BY_DEFAULT: [Signal; 4] =
    [Signal::Term, Signal::Int, Signal::Hup, Signal::Quit];
