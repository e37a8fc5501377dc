//! One run end to end: scenario in, report out. The world runs on its own thread; a panic
//! anywhere (simulation, checks, report) is caught and turned into a harness failure that
//! names the seed and the line that reproduces it.
//!
//! A run is described once, by a [`Run`] (scenario, file, seed, [`RunOptions`]), and ended
//! by one of its terminal methods: a report, a report with its trace, or a determinism
//! double-run. `--check-determinism` lives here too: it runs a seed twice and, when the
//! traces differ, says where they first diverge, because a bare "hashes differ" leaves the
//! user to rerun both and diff them by hand.

use crate::check;
use crate::report::{self, Report};
use crate::scenario::failure_draw::{self, DrawError};
use crate::scenario::model::Scenario;
use crate::store::cost::StoreCosts;
use crate::store::{StoreStats, StoreStatsHandle};
use crate::trace::{RunEnd, Trace};
use crate::world::{self, HarnessError, Programs, SimulatedRun};
use futures::FutureExt;
use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

/// A finished run as the outputs tell it: its report, its trace, and the story recorded
/// beside the trace (outside its hash).
#[derive(Debug, Clone)]
pub struct Told {
    pub report: Report,
    pub trace: Trace,
    pub story: crate::trace::Story,
}

/// The harness itself failed on this run (exit code 3).
#[derive(Debug, Clone, thiserror::Error)]
#[error("harness failure on seed {seed}: {message}\n{repro}")]
pub struct HarnessFailure {
    pub seed: u64,
    pub message: String,
    pub repro: String,
}

/// How to run beyond what the scenario says: only the command line sets these. This is the
/// one configuration a run carries besides its scenario; the runner hands each part to the
/// code it acts on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Planted bugs to switch on; none runs the real code.
    pub mutants: Mutants,
    /// A tighter bound than `world::SIM_EVENTS_MAX` on the simulator events the run may
    /// cost (`trainsim bench` stops its largest workloads with it).
    pub sim_events_max: Option<u64>,
    /// Time every training step one at a time (see `Programs::step_by_step`).
    pub step_by_step: bool,
    /// Simulate the agents' steady routine message by message, never fast-forwarding a
    /// quiet window (see `Programs::exact_control_plane`).
    pub exact_control_plane: bool,
    /// torch's own elastic code as every node's control plane instead of the model's
    /// (`--torch PYTHON`); `None` runs the model unless the scenario's `[torch]` names one.
    pub torch: Option<crate::torch_plane::TorchPlane>,
}

impl RunOptions {
    /// Options with the named mutants on; `Err` holds the first name that is no mutant.
    pub fn with_mutants<S: AsRef<str>>(names: &[S]) -> Result<RunOptions, String> {
        let mut options = RunOptions::default();
        for name in names {
            options.mutants.switch_on(name.as_ref())?;
        }
        Ok(options)
    }

    /// The programs of a run with these options: torch's agent on every node, with the
    /// mutants switched on where they act, and the c10d store, counting what it serves in a
    /// handle of its own.
    pub fn programs(&self) -> Programs {
        self.programs_counting(StoreStatsHandle::default())
    }

    /// [`RunOptions::programs`], with the stores counting what they serve in `store_stats`.
    pub fn programs_counting(&self, store_stats: StoreStatsHandle) -> Programs {
        let mutants = Arc::new(self.mutants.clone());
        let agent: Arc<dyn Fn(world::NodeEnv) -> _ + Send + Sync> = match &self.torch {
            // torch's own agent, from the host this run leases for its whole length.
            Some(plane) => {
                let run = crate::torch_plane::node::TorchRun::lease(plane, mutants);
                Arc::new(move |env| {
                    crate::torch_plane::node::agent_process(env, Arc::clone(&run)).boxed()
                })
            }
            None => Arc::new(move |env| {
                crate::agent::process::agent_process(env, Arc::clone(&mutants)).boxed()
            }),
        };
        Programs {
            step_by_step: self.step_by_step,
            // torch's Python reads its clocks itself: its routine is never fast-forwarded.
            exact_control_plane: self.exact_control_plane || self.torch.is_some(),
            agent,
            store: Arc::new(move |addr, scenario| {
                let costs = StoreCosts::scaled(scenario.cluster.store_cost_scale);
                let stats = Arc::clone(&store_stats);
                async move {
                    // A bind failure means the port is taken: the store simply never comes
                    // up, and clients see connection errors, as they would in torch.
                    let _ = crate::store::service::serve(addr, costs, stats).await;
                }
                .boxed()
            }),
            resolve_role: Arc::new(crate::agent::rank0::resolve_role),
        }
    }

    /// ` --mutant M` for each mutant (and `--exact-control-plane` when set), to append to
    /// a repro line.
    pub fn mutant_flags(&self) -> String {
        let mut flags: String = self
            .mutants
            .names()
            .iter()
            .map(|m| format!(" --mutant {m}"))
            .collect();
        if self.exact_control_plane {
            flags.push_str(" --exact-control-plane");
        }
        if let Some(plane) = &self.torch {
            let word = |path: &std::path::Path| quoted_path(&path.to_string_lossy());
            flags.push_str(&format!(" --torch {}", word(&plane.python)));
            if let Some(src) = &plane.elastic_src {
                flags.push_str(&format!(" --torch-elastic-src {}", word(src)));
            }
        }
        flags
    }
}

pub use crate::mutant::Mutants;

/// A path as a shell word for a repro line: as it is when the shell would not split it,
/// single-quoted otherwise.
fn quoted_path(path: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+:=@%,".contains(c);
    if !path.is_empty() && path.chars().all(plain) {
        path.to_owned()
    } else {
        format!("'{}'", path.replace('\'', "'\\''"))
    }
}

/// One run to make: a scenario (read from `file`), the seed (the file's unless
/// [`Run::seed`] says otherwise) and the options.
#[derive(Debug, Clone)]
pub struct Run<'a> {
    /// The scenario as the file says it.
    file_scenario: &'a Scenario,
    /// The scenario `seed` plays: the file's, with its failure process drawn (see
    /// `scenario::failure_draw`), or why the draw failed. Drawn on first use, so a run
    /// given another seed draws once, for that seed.
    drawn: OnceLock<Result<Cow<'a, Scenario>, DrawError>>,
    file: &'a str,
    seed: u64,
    options: RunOptions,
}

impl<'a> Run<'a> {
    /// The run of `scenario` (read from `file`) with its own seed and no options.
    pub fn of(scenario: &'a Scenario, file: &'a str) -> Self {
        Run {
            file_scenario: scenario,
            drawn: OnceLock::new(),
            file,
            seed: scenario.seed,
            options: RunOptions::default(),
        }
    }

    /// The same run with `seed` instead.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self.drawn = OnceLock::new();
        self
    }

    /// The scenario this seed plays (its failure process drawn), or why it cannot be drawn.
    pub fn scenario(&self) -> Result<&Scenario, DrawError> {
        self.drawn
            .get_or_init(|| failure_draw::expand(self.file_scenario, self.seed))
            .as_deref()
            .map_err(Clone::clone)
    }

    /// The same run with `options` (mutants, bounds) the scenario file cannot set.
    pub fn options(mut self, options: RunOptions) -> Self {
        self.options = options;
        self
    }

    /// Runs, checks and builds the report.
    pub fn report(&self) -> Result<Report, HarnessFailure> {
        self.traced().map(|(report, _)| report)
    }

    /// Like [`Run::report`], but also hands back the trace, for exports and determinism
    /// checks; a run with mutants names them in its repro line.
    pub fn traced(&self) -> Result<(Report, Trace), HarnessFailure> {
        self.told().map(|told| (told.report, told.trace))
    }

    /// Like [`Run::traced`], with the story recorded beside the trace, for the outputs
    /// that tell the run (`--explain`, `--trace`, `--html`).
    pub fn told(&self) -> Result<Told, HarnessFailure> {
        let run = self.simulate().map_err(|e| self.failure(e.to_string()))?;
        let report = self.check(&run.trace, &run.end)?;
        Ok(Told {
            report,
            trace: run.trace,
            story: run.story,
        })
    }

    /// Only the simulation and the invariants' verdicts, with the trace: neither the trace's
    /// hash nor the report, which a fuzz case's verdict, signature and coverage never read.
    /// A panic in the checks is a harness failure, as in [`Run::check`].
    pub fn judged(&self) -> Result<(Vec<check::InvariantResult>, Trace), HarnessFailure> {
        let run = self.simulate().map_err(|e| self.failure(e.to_string()))?;
        let scenario = self.scenario().map_err(|e| self.failure(e.to_string()))?;
        let invariants = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check::check_all(scenario, self.seed, &run.trace, &run.end)
        }))
        .map_err(|payload| {
            self.failure(format!(
                "the checks panicked: {}",
                world::panic_message(&payload)
            ))
        })?;
        Ok((invariants, run.trace))
    }

    /// Only the simulation, with the world's own error and the run's stats beside its
    /// trace: for callers that read what the run cost or what the store had served when it
    /// hit its bound (`trainsim bench`).
    pub fn simulate(&self) -> Result<SimulatedRun, HarnessError> {
        self.simulate_measured().0
    }

    /// [`Run::simulate`], with what the run's stores served, whether or not the run
    /// finished (a run stopped at its bound on simulator events still served that much).
    pub fn simulate_measured(&self) -> (Result<SimulatedRun, HarnessError>, StoreStats) {
        let sim_events_max = self.options.sim_events_max.unwrap_or(world::SIM_EVENTS_MAX);
        let store_stats = StoreStatsHandle::default();
        let scenario = match self.scenario() {
            Ok(scenario) => scenario,
            Err(e) => {
                return (
                    Err(HarnessError::Input(e.to_string())),
                    StoreStats::default(),
                )
            }
        };
        let run = world::simulate_bounded(
            scenario,
            self.seed,
            self.options.programs_counting(Arc::clone(&store_stats)),
            sim_events_max,
        );
        let served = *store_stats.lock().expect("store stats lock");
        (run, served)
    }

    /// Checks a finished run of this scenario and builds its report; a panic in either is
    /// a harness failure.
    pub fn check(&self, trace: &Trace, end: &RunEnd) -> Result<Report, HarnessFailure> {
        let flags = self.options.mutant_flags();
        let scenario = self.scenario().map_err(|e| self.failure(e.to_string()))?;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let (invariants, trace_hash) =
                checks_and_hash(scenario, self.seed, trace, end, HASH_APART_FROM_EVENTS);
            let mut report = report::build(
                scenario, self.file, self.seed, trace, end, invariants, trace_hash,
            );
            report.repro.push_str(&flags);
            // Which torch ran, as its host said when the plane was probed before the run.
            report.torch = self
                .options
                .torch
                .as_ref()
                .and_then(|plane| crate::torch_plane::probe(plane).ok());
            report
        }))
        .map_err(|payload| {
            self.failure(format!(
                "the checks panicked: {}",
                world::panic_message(&payload)
            ))
        })
    }

    /// Runs the seed twice and insists both runs are the same; returns the first run.
    ///
    /// Differing traces (or, with equal traces, differing reports) are a harness failure
    /// whose message shows the first diverging event of each run.
    pub fn deterministic(&self) -> Result<(Report, Trace), HarnessFailure> {
        self.deterministic_told()
            .map(|told| (told.report, told.trace))
    }

    /// [`Run::deterministic`], with the first run's story; the two runs' stories must be
    /// equal too.
    pub fn deterministic_told(&self) -> Result<Told, HarnessFailure> {
        let told = self.told()?;
        let again = self.told()?;
        self.same_runs((&told.report, &told.trace), (&again.report, &again.trace))?;
        if told.story != again.story {
            return Err(self.failure(format!(
                "the run is not deterministic: equal traces ({}) told different stories \
                 (rendezvous steps {} and {})",
                told.report.trace_hash,
                told.story.rendezvous.len(),
                again.story.rendezvous.len()
            )));
        }
        Ok(told)
    }

    /// A harness failure unless two runs of the seed gave the same trace and report.
    fn same_runs(
        &self,
        (first, first_trace): (&Report, &Trace),
        (second, second_trace): (&Report, &Trace),
    ) -> Result<(), HarnessFailure> {
        if first.trace_hash != second.trace_hash {
            let message = match first_divergence(first_trace, second_trace) {
                Some(d) => format!(
                    "the run is not deterministic: trace hashes {} and {} differ; the traces \
                     first diverge at event {}:\n  first run:  {}\n  second run: {}",
                    first.trace_hash, second.trace_hash, d.index, d.first, d.second
                ),
                // Equal events but a different hash can only come from a changed hash
                // function.
                None => format!(
                    "the run is not deterministic: trace hashes {} and {} differ over equal \
                     events",
                    first.trace_hash, second.trace_hash
                ),
            };
            return Err(self.failure(message));
        }
        if first != second {
            return Err(self.failure(format!(
                "the run is not deterministic: equal traces ({}) gave different reports:\n  \
                 first run:  {}\n  second run: {}",
                first.trace_hash,
                first.to_json_line(),
                second.to_json_line()
            )));
        }
        Ok(())
    }

    /// A harness failure of this run; its repro line names the run's mutants, so it replays
    /// the same run whichever step failed.
    fn failure(&self, message: String) -> HarnessFailure {
        HarnessFailure {
            seed: self.seed,
            message,
            repro: report::repro_line(self.file, self.seed) + &self.options.mutant_flags(),
        }
    }
}

/// Where two traces of the same seed first differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// Index of the first differing event (0-based).
    pub index: usize,
    /// That event's canonical line in the first trace, or `<end of trace>`.
    pub first: String,
    /// That event's canonical line in the second trace, or `<end of trace>`.
    pub second: String,
}

/// The first event at which `a` and `b` differ, or `None` when they hold equal events.
pub fn first_divergence(a: &Trace, b: &Trace) -> Option<Divergence> {
    let (a, b) = (a.canonical_lines(), b.canonical_lines());
    let index = a
        .iter()
        .zip(&b)
        .position(|(x, y)| x != y)
        .or_else(|| (a.len() != b.len()).then(|| a.len().min(b.len())))?;
    let line = |lines: &[String]| {
        lines
            .get(index)
            .cloned()
            .unwrap_or_else(|| "<end of trace>".to_owned())
    };
    Some(Divergence {
        index,
        first: line(&a),
        second: line(&b),
    })
}

/// Traces of at least this many events are hashed on a second thread while the invariants
/// are judged: the hash (every event as JSON, through SHA-256) is about a fifth of checking
/// a long run. Shorter traces, such as fuzz cases, whose campaigns already use every core,
/// stay on one thread.
const HASH_APART_FROM_EVENTS: usize = 50_000;

/// The invariants' verdicts and the trace's hash, hashed on a second thread from
/// `apart_from_events` events on.
fn checks_and_hash(
    scenario: &Scenario,
    seed: u64,
    trace: &Trace,
    end: &RunEnd,
    apart_from_events: usize,
) -> (Vec<check::InvariantResult>, String) {
    if trace.events.len() < apart_from_events {
        return (
            check::check_all(scenario, seed, trace, end),
            trace.hash_hex(),
        );
    }
    std::thread::scope(|scope| {
        let hashing = scope.spawn(|| trace.hash_hex());
        let invariants = check::check_all(scenario, seed, trace, end);
        let trace_hash = hashing
            .join()
            .unwrap_or_else(|payload| std::panic::resume_unwind(payload));
        (invariants, trace_hash)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Event, EventKind};

    #[test]
    fn hashing_on_a_second_thread_gives_the_same_report() {
        let text = std::fs::read_to_string("scenarios/worker_crash_restart.toml").unwrap();
        let scenario = crate::scenario::parse(&text, "worker_crash_restart.toml").unwrap();
        let run = Run::of(&scenario, "worker_crash_restart.toml")
            .simulate()
            .unwrap();
        let one = checks_and_hash(&scenario, 1, &run.trace, &run.end, usize::MAX);
        let two = checks_and_hash(&scenario, 1, &run.trace, &run.end, 0);
        assert_eq!(format!("{one:?}"), format!("{two:?}"));
        assert_eq!(one.1, run.trace.hash_hex());
    }

    fn trace(steps: &[u64]) -> Trace {
        Trace {
            events: steps
                .iter()
                .map(|&step| Event {
                    at: crate::sim_time::SimInstant::from_us(step * 10),
                    node: Some(crate::trace::TraceNode::node(0)),
                    kind: EventKind::Step {
                        pid: 1,
                        round: 0,
                        step,
                        epoch: 0,
                        samples: 0,
                        trained: Default::default(),
                        run: Default::default(),
                    },
                })
                .collect(),
            truncated: false,
        }
    }

    #[test]
    fn a_run_draws_its_failures_once_for_the_seed_it_is_given() {
        let text = std::fs::read_to_string("scenarios/failure_process_kills_replaced.toml")
            .expect("the scenario is shipped");
        let file = "failure_process_kills_replaced.toml";
        let scenario = crate::scenario::parse(&text, file).expect("it parses");
        let draws_before = failure_draw::draws_on_this_thread();
        let run = Run::of(&scenario, file).seed(7);
        let drawn = run.scenario().expect("seed 7 draws").faults.clone();
        assert_eq!(run.scenario().expect("seed 7 draws").faults, drawn);
        assert_eq!(
            failure_draw::draws_on_this_thread() - draws_before,
            1,
            "Run::of(..).seed(7) and two reads of its scenario draw once"
        );
        let expected = failure_draw::expand(&scenario, 7).expect("seed 7 draws");
        assert_eq!(drawn, expected.faults);
        let file_seed = Run::of(&scenario, file);
        assert_ne!(
            file_seed.scenario().expect("seed 0 draws").faults,
            drawn,
            "the drawn faults depend on the seed"
        );
    }

    #[test]
    fn a_run_with_a_failure_process_ends_with_its_job() {
        let text = std::fs::read_to_string("scenarios/failure_process_kills_replaced.toml")
            .expect("the scenario is shipped");
        let file = "failure_process_kills_replaced.toml";
        let scenario = crate::scenario::parse(&text, file).expect("it parses");
        assert!(
            scenario.end_with_job,
            "on by default with a failure process"
        );
        let run = Run::of(&scenario, file);
        let simulated = run.simulate().expect("the run finishes");
        let agent_ends = simulated.trace.events.iter().filter(|e| {
            matches!(
                e.kind,
                EventKind::AgentExited { .. } | EventKind::AgentKilled { .. }
            )
        });
        let last_end_us = agent_ends
            .map(|e| e.at.as_us())
            .max()
            .expect("agents ended");
        let end_us = simulated.end.ended_at.as_us();
        assert!(
            end_us - last_end_us < 1_000,
            "the run ends at {end_us} us, with its last agent at {last_end_us} us"
        );
        let drawn = run.scenario().expect("seed 0 draws");
        assert!(
            drawn
                .faults
                .iter()
                .any(|f| f.at.as_us() > end_us + 3_600_000_000),
            "the draw holds failures for long after the job ended, never applied"
        );
    }

    #[test]
    fn the_first_divergence_names_the_index_and_both_lines() {
        assert_eq!(first_divergence(&trace(&[1, 2]), &trace(&[1, 2])), None);
        let d = first_divergence(&trace(&[1, 2, 3]), &trace(&[1, 5, 3])).expect("differ");
        assert_eq!(d.index, 1);
        assert!(d.first.contains("\"step\":2") && d.second.contains("\"step\":5"));
        let d = first_divergence(&trace(&[1]), &trace(&[1, 2])).expect("differ");
        assert_eq!((d.index, d.first.as_str()), (1, "<end of trace>"));
    }
}
