//! trainsim: a deterministic simulation and testing harness for elastic training's control plane.
//!
//! Data flows one way: scenario → world → subsystems → trace → checks → report.
//!
//! - [`scenario`]: the scenario file schema, validation and located errors.
//! - [`world`]: the only code that touches madsim: runtime, nodes, network, clocks, faults.
//! - [`store`]: the c10d-like key-value store (pure semantics plus its server and client).
//! - [`rendezvous`]: torch's dynamic rendezvous: pure decisions plus the async handler.
//! - [`agent`]: the elastic agent: rank assignment and the per-node run loop.
//! - [`torch_plane`]: torch's own elastic Python as the control plane, inside the same world.
//! - [`sampler`]: torch's RNG, `DistributedSampler` and Bagua's load-balancing samplers.
//! - [`reader`]: HugeCTR's Norm data reader: workers, buffers, collector (a pure model).
//! - [`job`]: the simulated training job (a timer-driven step counter until GPUs arrive).
//! - [`trace`]: typed events, the recorder and the canonical trace hash.
//! - [`check`]: named invariants over the trace.
//! - [`fuzz`]: proptest strategies over whole scenarios, mutants, shrunk repro files.
//! - [`report`]: the JSON and text reports and `expect` checking.
//! - [`parity`]: runs the parity vectors against the models.
//! - [`conform`]: the same scenario on real torchrun and in the simulator, compared.
//! - [`cli`]: the subcommands behind the `trainsim` binary.
//! - [`runner`]: one run end to end: scenario in, report out, panics caught.
//! - [`shared_list`]: lists many simulated processes hold equal copies of, kept once.
//! - [`invariant`]: the contract's invariants, named once with their meaning (ground floor).
//! - [`fixes`]: the opt-in named fixes the scenario format names (ground floor).
//! - [`mutant`]: the planted bugs the command line switches on (ground floor).
//! - [`record_check`]: how the reader's records are checked, a scenario word (ground floor).
//! - [`files`]: atomic file writes for every command.
//! - [`memo`]: process-wide, bounded memos of costly pure results (dealt epochs).

pub mod agent;
pub mod bench;
pub mod check;
pub mod cli;
pub mod conform;
pub mod files;
pub mod fixes;
pub mod fuzz;
pub mod invariant;
pub mod job;
pub mod memo;
pub mod mutant;
pub mod parity;
pub mod reader;
pub mod record_check;
pub mod rendezvous;
pub mod report;
pub mod rng;
pub mod runner;
pub mod sampler;
pub mod scenario;
pub mod shared_list;
pub mod sim_time;
pub mod store;
pub mod torch_plane;
pub mod trace;
pub mod world;
