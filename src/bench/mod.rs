//! `trainsim bench`'s fixed workloads and the figures each one prints: the
//! reference job, rendezvous fuzzing, rendezvous rounds at scale with their fitted growth,
//! torch's `randperm` at 10M, and the reference job's epochs' `randperm`s.
//!
//! This is the one place that reads the host clock, to time the workloads; no time read here
//! reaches a simulation, a trace or a report.

mod goodput;
pub mod torch;
pub mod workloads;

use crate::fuzz;
use crate::runner::{Run, RunOptions};
use crate::sampler::TorchGenerator;
use crate::world::{self, bare_madsim_floor};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{json, Map, Value};

/// Every workload name, in the order `trainsim bench` runs them. `scale` is the growth fit
/// over the `scale-N` lines and needs them all.
pub const WORKLOADS: &[&str] = &[
    "reference",
    "fuzz",
    "scale-64",
    "scale-256",
    "scale-1024",
    "scale-4096",
    "scale",
    "scale-64-backoff",
    "scale-256-backoff",
    "scale-1024-backoff",
    "scale-4096-backoff",
    "randperm-10m",
    "randperm-epochs",
    "goodput-model",
    "goodput-batch",
    "week-256",
];

/// torch's `cas_backoff_max_seconds` in the `scale-N-backoff` lines.
pub const SCALE_BACKOFF_MAX: &str = "1s";

/// Node counts of the scale workloads.
pub const SCALE_NODES: [u32; 4] = [64, 256, 1024, 4096];
/// Cases of the fixed-shape fuzz workload (`fuzz_workload_cases`).
pub const FUZZ_CASES: u32 = 12;

/// Cases the `fuzz` line runs: `trainsim fuzz --target rendezvous`'s case loop (draw, run,
/// coverage, signature of failures) on all cores, as a campaign runs them.
pub const FUZZ_CAMPAIGN_CASES: u64 = 400;
/// The seed every workload runs with.
pub const BENCH_SEED: u64 = 1;
/// Simulator events one scale workload may cost. The 1024-node round costs about 0.75
/// million; the 4096-node one about 49 million (torch's compare-and-sets grow faster than
/// nodes², see docs/performance.md). Past the bound a line says how far its round got.
pub const SCALE_SIM_EVENTS_MAX: u64 = 60_000_000;
/// Items `randperm-10m` permutes.
pub const RANDPERM_ITEMS: u64 = 10_000_000;
/// `randperm-epochs`: this many epochs' permutations of a dataset of `RANDPERM_EPOCH_ITEMS`
/// samples, each drawn as `DistributedSampler` draws it (a generator seeded with the
/// epoch, 32-bit values): the reference job's dataset and about its count of epochs.
pub const RANDPERM_EPOCHS: u64 = 500;
pub const RANDPERM_EPOCH_ITEMS: u32 = 100_000;

/// One workload's figures: `workload` first, then its fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    pub workload: String,
    pub fields: Map<String, Value>,
}

impl Figures {
    fn new(workload: &str, fields: Value) -> Self {
        let fields = match fields {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        Figures {
            workload: workload.to_owned(),
            fields,
        }
    }

    /// The JSON line: `{"workload": …, <fields>}`, `workload` first.
    pub fn to_json_line(&self) -> String {
        let mut line = format!("{{\"workload\":{}", Value::String(self.workload.clone()));
        for (key, value) in &self.fields {
            line.push_str(&format!(",{}:{value}", Value::String(key.clone())));
        }
        line.push('}');
        line
    }

    /// The text line: `workload  key=value …`.
    pub fn to_text_line(&self) -> String {
        let fields: Vec<String> = self
            .fields
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{:<14} {}", self.workload, fields.join(" "))
    }
}

/// Microseconds `work` takes on the host clock, and its result.
fn timed<T>(work: impl FnOnce() -> T) -> (u64, T) {
    // The benchmark's own stopwatch: it measures the harness and is never simulated.
    #[allow(clippy::disallowed_methods)]
    let started = std::time::Instant::now();
    let out = work();
    (started.elapsed().as_micros().max(1) as u64, out)
}

/// Runs one workload other than `scale`. `Err` names what failed (a harness failure).
pub fn run(workload: &str) -> Result<Figures, String> {
    match workload {
        "reference" => reference(),
        "fuzz" => fuzz_cases(),
        "randperm-10m" => Ok(randperm()),
        "randperm-epochs" => Ok(randperm_epochs()),
        "goodput-model" => goodput::goodput_model(),
        "goodput-batch" => goodput::goodput_batch(),
        "week-256" => goodput::week_256(),
        _ => {
            let (nodes, backoff) = match workload.strip_suffix("-backoff") {
                Some(plain) => (plain.strip_prefix("scale-"), true),
                None => (workload.strip_prefix("scale-"), false),
            };
            match nodes.and_then(|n| n.parse::<u32>().ok()) {
                Some(nodes) if SCALE_NODES.contains(&nodes) => scale(nodes, backoff),
                _ => Err(format!("unknown workload `{workload}`")),
            }
        }
    }
}

fn reference() -> Result<Figures, String> {
    let scenario = workloads::reference();
    let one = Run::of(&scenario, workloads::REFERENCE_FILE).seed(BENCH_SEED);
    // What `Run::traced` does, in its two halves, keeping the run's stats beside its trace:
    // the checks re-deal every step's samples, so their share is worth seeing apart.
    let (simulate_wall_us, run) = timed(|| one.simulate());
    let run = run.map_err(|e| e.to_string())?;
    let (check_wall_us, report) = timed(|| one.check(&run.trace, &run.end));
    let report = report.map_err(|e| e.to_string())?;
    let stats = run.stats;
    let wall_us = simulate_wall_us + check_wall_us;
    // The floor runs as many simulator events (sleeps and message timers) as the run cost.
    let (floor_wall_us, _) =
        timed(|| bare_madsim_floor::timers_and_messages(stats.sim_events, BENCH_SEED));
    // Events per second of each over the same count: the ratio of their wall times.
    let floor_ratio = floor_wall_us as f64 / wall_us as f64;
    Ok(Figures::new(
        "reference",
        json!({
            "sim_time_us": report.sim_time_us,
            "wall_us": wall_us,
            "simulate_wall_us": simulate_wall_us,
            "check_wall_us": check_wall_us,
            "speedup": round2(report.sim_time_us as f64 / wall_us as f64),
            "events": report.events,
            "sim_events": stats.sim_events,
            // What the simulation costs per second it simulates, whatever the machine.
            "sim_events_per_sim_sec": round2(
                stats.sim_events as f64 / (report.sim_time_us.max(1) as f64 / 1e6)
            ),
            "floor_wall_us": floor_wall_us,
            "floor_ratio": round2(floor_ratio),
            "outcome": report.outcome,
        }),
    ))
}

fn fuzz_cases() -> Result<Figures, String> {
    let jobs = fuzz::parallel::default_jobs();
    let target = fuzz::FuzzTarget::Rendezvous;
    let (wall_us, failing) =
        timed(|| fuzz::campaign::run_cases_only(target, BENCH_SEED, 0..FUZZ_CAMPAIGN_CASES, jobs));
    Ok(Figures::new(
        "fuzz",
        json!({
            "cases": FUZZ_CAMPAIGN_CASES,
            "jobs": jobs,
            "failing": failing,
            "wall_us": wall_us,
            "cases_per_s": round2(FUZZ_CAMPAIGN_CASES as f64 * 1e6 / wall_us as f64),
        }),
    ))
}

/// The fuzz workload's cases: drawn by the fuzzer's strategy with the bench's fixed seed.
pub fn fuzz_workload_cases() -> Vec<fuzz::strategy::Case> {
    let strategy = fuzz::strategy::case_of_shape(
        workloads::FUZZ_NODES,
        workloads::FUZZ_SPARES,
        workloads::FUZZ_STEPS,
    );
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&BENCH_SEED.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    (0..FUZZ_CASES)
        .map(|_| {
            strategy
                .new_tree(&mut runner)
                .expect("the strategy never rejects")
                .current()
        })
        .collect()
}

/// One rendezvous round of `nodes` joining at once, with torch's backoff after a lost
/// compare-and-set or without: how long it takes in simulated time, what it costs the store
/// (bytes on its link per simulated second, its busiest second, its event loop's busy
/// share), and what it costs the simulator.
fn scale(nodes: u32, backoff: bool) -> Result<Figures, String> {
    let scenario = workloads::scale(nodes, backoff.then_some(SCALE_BACKOFF_MAX));
    let file = "bench-scale.toml";
    let bounded = RunOptions {
        sim_events_max: Some(SCALE_SIM_EVENTS_MAX),
        ..RunOptions::default()
    };
    let one = Run::of(&scenario, file).seed(BENCH_SEED).options(bounded);
    let (wall_us, (run, store)) = timed(|| {
        let (run, store) = one.simulate_measured();
        (
            run.map(|run| (one.check(&run.trace, &run.end), run.stats)),
            store,
        )
    });
    let mut fields = json!({ "nodes": nodes, "wall_us": wall_us });
    if backoff {
        fields["cas_backoff_max"] = json!(SCALE_BACKOFF_MAX);
    }
    match run {
        Ok((report, stats)) => {
            let report = report.map_err(|e| e.to_string())?;
            let round = report.rounds.first();
            fields["completed"] = json!(true);
            fields["outcome"] = json!(report.outcome.as_str());
            fields["sim_time_us"] = json!(report.sim_time_us);
            fields["round_world_size"] = json!(round.map(|r| r.world_size).unwrap_or(0));
            fields["round_completed_at_us"] = json!(round.map(|r| r.completed_at_us));
            fields["events"] = json!(report.events);
            fields["sim_events"] = json!(stats.sim_events);
            let sim_s = report.sim_time_us.max(1) as f64 / 1e6;
            fields["store_wire_bytes_per_sim_s"] = json!((store.wire_bytes as f64 / sim_s).round());
            fields["store_busy_share"] = json!(round2(store.busy_ns as f64 / 1e9 / sim_s));
        }
        // Stopped at the bound: how far it got is the figure.
        Err(world::HarnessError::SimEventsOverBound { max }) => {
            fields["completed"] = json!(false);
            fields["stopped_at_sim_events"] = json!(max);
        }
        Err(e) => return Err(e.to_string()),
    }
    fields["cas_attempts"] = json!(store.compare_sets);
    fields["cas_landed"] = json!(store.compare_sets_landed);
    fields["store_value_bytes_sent"] = json!(store.value_bytes_sent);
    fields["store_wire_bytes"] = json!(store.wire_bytes);
    fields["store_busiest_second"] = json!(store.busiest_second);
    fields["store_busiest_second_wire_bytes"] = json!(store.busiest_second_wire_bytes);
    let per_cas_ns = wall_us as f64 * 1000.0 / store.compare_sets.max(1) as f64;
    fields["wall_ns_per_cas"] = json!(per_cas_ns.round());
    let suffix = if backoff { "-backoff" } else { "" };
    Ok(Figures::new(&format!("scale-{nodes}{suffix}"), fields))
}

/// The `scale` line, from the `scale-N` lines: the growth exponents (least-squares slopes in
/// log-log) of wall time and of the protocol's compare-and-sets over the rounds that
/// completed, and their difference, which is what the simulator adds on top of torch's
/// protocol.
pub fn scale_fit(lines: &[Figures]) -> Figures {
    let completed: Vec<&Figures> = lines
        .iter()
        .filter(|f| !f.workload.ends_with("-backoff"))
        .filter(|f| f.fields.get("completed") == Some(&Value::Bool(true)))
        .collect();
    let points = |field: &str| -> Vec<(u32, u64)> {
        completed
            .iter()
            .filter_map(|f| {
                let nodes = f.fields.get("nodes")?.as_u64()?;
                Some((u32::try_from(nodes).ok()?, f.fields.get(field)?.as_u64()?))
            })
            .collect()
    };
    let wall = growth_exponent(&points("wall_us"));
    let cas = growth_exponent(&points("cas_attempts"));
    Figures::new(
        "scale",
        json!({
            "exponent": round2(wall),
            "cas_attempts_exponent": round2(cas),
            "wall_per_cas_exponent": round2(wall - cas),
            "points": completed.len(),
            "stopped_at_bound": lines.len() - completed.len(),
        }),
    )
}

/// The slope of the least-squares line through `(ln n, ln wall)`; 0 with fewer than 2 points.
pub fn growth_exponent(points: &[(u32, u64)]) -> f64 {
    if points.len() < 2 {
        return 0.0;
    }
    let xs: Vec<f64> = points.iter().map(|(n, _)| f64::from(*n).ln()).collect();
    let ys: Vec<f64> = points.iter().map(|(_, w)| (*w as f64).ln()).collect();
    let count = xs.len() as f64;
    let (mean_x, mean_y) = (
        xs.iter().sum::<f64>() / count,
        ys.iter().sum::<f64>() / count,
    );
    let covariance: f64 = xs
        .iter()
        .zip(&ys)
        .map(|(x, y)| (x - mean_x) * (y - mean_y))
        .sum();
    let variance: f64 = xs.iter().map(|x| (x - mean_x).powi(2)).sum();
    covariance / variance
}

fn randperm() -> Figures {
    let (wall_us, perm) = timed(|| TorchGenerator::new(42).randperm(RANDPERM_ITEMS));
    let items = perm.map(|p| p.len()).unwrap_or(0);
    Figures::new(
        "randperm-10m",
        json!({ "items": items, "wall_us": wall_us }),
    )
}

fn randperm_epochs() -> Figures {
    let (wall_us, items) = timed(|| {
        (0..RANDPERM_EPOCHS)
            .filter_map(|epoch| {
                TorchGenerator::new(epoch)
                    .randperm_u32(RANDPERM_EPOCH_ITEMS)
                    .ok()
            })
            .map(|perm| std::hint::black_box(perm).len() as u64)
            .sum::<u64>()
    });
    Figures::new(
        "randperm-epochs",
        json!({
            "epochs": RANDPERM_EPOCHS,
            "items": items,
            "wall_us": wall_us,
            "us_per_epoch": round2(wall_us as f64 / RANDPERM_EPOCHS as f64),
        }),
    )
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exponent_of_a_power_law_is_its_power() {
        let points: Vec<(u32, u64)> = [64u32, 256, 1024]
            .iter()
            .map(|&n| (n, u64::from(n) * u64::from(n)))
            .collect();
        assert!((growth_exponent(&points) - 2.0).abs() < 1e-9);
        assert_eq!(growth_exponent(&points[..1]), 0.0);
    }

    fn scale_line(nodes: u64, completed: bool, wall_us: u64, cas_attempts: u64) -> Figures {
        Figures::new(
            &format!("scale-{nodes}"),
            json!({"nodes": nodes, "completed": completed, "wall_us": wall_us,
                   "cas_attempts": cas_attempts}),
        )
    }

    #[test]
    fn the_scale_fit_uses_completed_rounds_and_splits_protocol_from_simulator() {
        let lines = [
            // wall = nodes², compare-and-sets = nodes^1.5.
            scale_line(64, true, 64 * 64, 64 * 8),
            scale_line(256, true, 256 * 256, 256 * 16),
            scale_line(4096, false, 5, 5),
        ];
        let fit = scale_fit(&lines).fields;
        assert_eq!(fit["exponent"], json!(2.0));
        assert_eq!(fit["cas_attempts_exponent"], json!(1.5));
        assert_eq!(fit["wall_per_cas_exponent"], json!(0.5));
        assert_eq!(
            (fit["points"].clone(), fit["stopped_at_bound"].clone()),
            (json!(2), json!(1))
        );
    }

    /// A 64-node round forms, and every node's join is a compare-and-set that landed.
    #[test]
    fn a_small_scale_round_completes_and_counts_its_protocol() {
        let line = scale(64, false).expect("the round runs");
        assert_eq!(line.workload, "scale-64");
        let f = line.fields;
        assert_eq!(f["completed"], json!(true));
        assert_eq!(f["round_world_size"], json!(64));
        let landed = f["cas_landed"].as_u64().expect("a count");
        assert!(landed >= 64, "{f:?}");
        assert!(f["cas_attempts"].as_u64().expect("a count") >= landed);
    }

    #[test]
    fn fuzz_cases_have_the_bench_shape_and_are_fixed() {
        let cases = fuzz_workload_cases();
        assert_eq!(cases.len(), FUZZ_CASES as usize);
        assert_eq!(cases, fuzz_workload_cases());
        for case in &cases {
            assert_eq!(
                case.scenario.cluster.total_nodes(),
                workloads::FUZZ_NODES + workloads::FUZZ_SPARES
            );
            assert_eq!(case.scenario.job.steps, workloads::FUZZ_STEPS);
        }
    }

    #[test]
    fn a_backoff_line_is_named_for_its_workload_and_left_out_of_the_fit() {
        let line = run("scale-64-backoff").expect("the round runs");
        assert_eq!(line.workload, "scale-64-backoff");
        assert_eq!(line.fields["cas_backoff_max"], json!(SCALE_BACKOFF_MAX));
        let fit = scale_fit(&[line]).fields;
        assert_eq!(fit["points"], json!(0));
    }

    #[test]
    fn lines_start_with_the_workload() {
        let f = Figures::new("x", json!({"wall_us": 3}));
        assert_eq!(f.to_json_line(), r#"{"workload":"x","wall_us":3}"#);
        assert!(f.to_text_line().starts_with("x "));
        assert!(run("nope").is_err());
    }
}
