//! Writes a `Scenario` back as a scenario file that parses to an equal `Scenario`: every
//! value explicit, quantities in their largest exact unit, faults in time order.

use super::cluster::builtin_gpu;
use super::limits::TCP_RETRIES2_DEFAULT;
use super::model::*;
use super::raw::*;
use super::units::{Bandwidth, Duration, Offset, Size};

/// The scenario as TOML text. A scenario that did not come from `parse` (e.g. one a fuzzer
/// drew) must still respect the bounds, or the text will not parse back; a value TOML
/// cannot hold (a seed above `i64::MAX`) gives a file whose first line says so.
pub fn to_toml(s: &Scenario) -> String {
    match toml::to_string(&to_raw(s)) {
        Ok(text) => text,
        Err(e) => format!("# this scenario cannot be written as TOML: {e}\n"),
    }
}

/// `[failures]` with every key spelled out.
fn failures(p: &FailureProcess) -> RawFailures {
    RawFailures {
        rate_per_node_day: Some(p.rate_per_node_day),
        weibull_shape: Some(p.weibull_shape),
        kinds: Some(p.kinds.iter().copied().collect()),
        after: Some(p.after),
        repair_time: Some(Duration::of_span(p.repair_time)),
        replace_delay: Some(Duration::of_span(p.replace_delay)),
        preemption_grace: Some(Duration::of_span(p.preemption_grace)),
        from: Some(Duration::of_span(p.from.since_start())),
        until: Some(Duration::of_span(p.until.since_start())),
    }
}

/// The raw form of a scenario, with every key spelled out.
pub fn to_raw(s: &Scenario) -> RawScenario {
    RawScenario {
        name: Some(s.name.clone()),
        description: (!s.description.is_empty()).then(|| s.description.clone()),
        seed: Some(s.seed),
        time_limit: Some(Duration::of_span(s.time_limit)),
        end_with_job: Some(s.end_with_job),
        cluster: Some(cluster(&s.cluster)),
        network: Some(RawNetwork {
            latency: Some(vec![
                Duration::of_span(s.network.latency_min),
                Duration::of_span(s.network.latency_max),
            ]),
            loss: Some(s.network.loss),
            bandwidth: Some(Bandwidth::from_bits_per_sec(
                s.network.bandwidth_bits_per_sec,
            )),
            store_host_bandwidth: (s.network.store_host_bandwidth_bits_per_sec
                != s.network.bandwidth_bits_per_sec)
                .then(|| Bandwidth::from_bits_per_sec(s.network.store_host_bandwidth_bits_per_sec)),
        }),
        rendezvous: Some(rendezvous(&s.rendezvous)),
        agent: Some(RawAgent {
            nproc_per_node: Some(s.agent.nproc_per_node),
            max_restarts: Some(s.agent.max_restarts),
            monitor_interval: Some(Duration::of_span(s.agent.monitor_interval)),
            exit_barrier_timeout: Some(Duration::of_span(s.agent.exit_barrier_timeout)),
            start_time: Some(Duration::of_span(s.agent.start_time)),
            start_time_jitter: Some(Duration::of_span(s.agent.start_time_jitter)),
            relaunch: Some(s.agent.relaunch),
            relaunch_delay: Some(Duration::of_span(s.agent.relaunch_delay)),
            relaunch_max: Some(s.agent.relaunch_max),
            share_store: Some(s.agent.share_store),
            // Written only when on, so files without it read back as they were written.
            worker_identical: s.agent.worker_identical.then_some(true),
            signals_to_handle: (s.agent.signals_to_handle != SIGNALS_HANDLED_BY_DEFAULT)
                .then(|| names(&s.agent.signals_to_handle)),
            fixes: Some(names(&s.agent.fixes)),
        }),
        job: Some(job(&s.job)),
        reader: s.reader.as_ref().map(reader),
        gpu_profile: gpu_profile(&s.cluster),
        faults: s.faults.iter().map(fault).collect(),
        failures: s.failures.as_ref().map(failures),
        expect: expect(&s.expect),
        torch: s.torch.as_ref().map(|t| RawTorch {
            python: Some(t.python.clone()),
            elastic_src: t.elastic_src.clone(),
        }),
    }
}

fn node(i: u32) -> String {
    node_name(i)
}

fn cluster(c: &Cluster) -> RawCluster {
    let builtin = builtin_gpu(&c.gpu.name).is_some_and(|b| b == c.gpu);
    RawCluster {
        nodes: Some(c.nodes),
        spare_nodes: Some(c.spare_nodes),
        gpus_per_node: Some(c.gpus_per_node),
        gpu: builtin.then(|| c.gpu.name.clone()),
        store: Some(match c.store {
            StoreHost::Node(i) => node(i),
            StoreHost::Dedicated => "dedicated".to_string(),
        }),
        clock_skew: (!c.clock_skew_us.is_empty()).then(|| {
            c.clock_skew_us
                .iter()
                .map(|(n, us)| (node(*n), Offset::from_us(*us)))
                .collect()
        }),
        gpu_profile: None,
        tcp_retries2: (c.tcp_retries2 != TCP_RETRIES2_DEFAULT).then_some(c.tcp_retries2),
        store_cost_scale: (c.store_cost_scale != 1.0).then_some(c.store_cost_scale),
        one_machine: c.one_machine.then_some(true),
    }
}

/// The contract's top-level `[gpu_profile]` for a custom GPU; none for a built-in one.
fn gpu_profile(c: &Cluster) -> Option<RawGpuProfile> {
    let builtin = builtin_gpu(&c.gpu.name).is_some_and(|b| b == c.gpu);
    (!builtin).then(|| RawGpuProfile {
        name: Some(c.gpu.name.clone()),
        memory: Some(Size::from_bytes(c.gpu.memory_bytes)),
        h2d_bandwidth: Some(Bandwidth::from_bits_per_sec(c.gpu.h2d_bits_per_sec)),
        d2d_bandwidth: Some(Bandwidth::from_bits_per_sec(c.gpu.d2d_bits_per_sec)),
        compute_speed: Some(c.gpu.compute_speed),
    })
}

fn rendezvous(r: &super::model::RendezvousConfig) -> RawRendezvous {
    RawRendezvous {
        min_nodes: Some(r.min_nodes),
        max_nodes: Some(r.max_nodes),
        join_timeout: Some(Duration::of_span(r.join_timeout)),
        last_call_timeout: Some(Duration::of_span(r.last_call_timeout)),
        close_timeout: Some(Duration::of_span(r.close_timeout)),
        heartbeat_timeout: Some(Duration::of_span(r.heartbeat_timeout)),
        keep_alive_interval: Some(Duration::of_span(r.keep_alive_interval)),
        keep_alive_max_attempt: Some(r.keep_alive_max_attempt),
        cas_backoff_max: (!r.cas_backoff_max.is_zero())
            .then(|| Duration::of_span(r.cas_backoff_max)),
        // Written only when not torch's default, so files without it read back as written.
        read_timeout: (r.read_timeout != super::limits::READ_TIMEOUT_DEFAULT)
            .then(|| Duration::of_span(r.read_timeout)),
        // In name order, as the set of names was written before it held the fixes.
        fixes: Some({
            let mut fixes = names(&r.fixes);
            fixes.sort_unstable();
            fixes
        }),
    }
}

fn job(j: &JobConfig) -> RawJob {
    let mut c = RawComplexity::default();
    match &j.dataset.complexity {
        Complexity::Constant { value } => {
            (c.dist, c.value) = (Some("constant".into()), Some(*value))
        }
        Complexity::Uniform { min, max } => {
            (c.dist, c.min, c.max) = (Some("uniform".into()), Some(*min), Some(*max))
        }
        Complexity::Lognormal { median, sigma } => {
            (c.dist, c.median, c.sigma) = (Some("lognormal".into()), Some(*median), Some(*sigma))
        }
        Complexity::List { values } => {
            (c.dist, c.values) = (Some("list".into()), Some(values.clone()))
        }
    }
    let s = &j.sampler;
    RawJob {
        steps: Some(j.steps),
        step_time: Some(Duration::of_span(j.step_time)),
        model_size: Some(Size::from_bytes(j.model_size_bytes)),
        checkpoint_every: Some(j.checkpoint_every),
        collective_timeout: Some(Duration::of_span(j.collective_timeout)),
        worker_start_time: Some(Duration::of_span(j.worker_start_time)),
        worker_start_jitter: Some(Duration::of_span(j.worker_start_jitter)),
        worker_exit_time: Some(Duration::of_span(j.worker_exit_time)),
        checkpoint_save_time: Some(Duration::of_span(j.checkpoint_save_time)),
        checkpoint_load_time: Some(Duration::of_span(j.checkpoint_load_time)),
        backend: Some(j.backend),
        nccl_peer_exit_detection: match (j.backend, j.nccl_peer_exit_detection) {
            (Backend::Gloo, _) => None,
            (Backend::Nccl, None) => Some(NEVER.into()),
            (Backend::Nccl, Some(span)) => Some(Duration::of_span(span).to_string()),
        },
        dataset: Some(RawDataset {
            len: Some(j.dataset.len),
            complexity: Some(c),
        }),
        sampler: Some(RawSampler {
            kind: Some(s.kind),
            shuffle: Some(s.shuffle),
            seed: Some(s.seed),
            drop_last: Some(s.drop_last),
            random_level: Some(s.random_level),
            batch_size: Some(s.batch_size),
        }),
        // Written only when a scenario sets them, so files that never did stay as they were.
        set_epoch: (j.set_epoch != SetEpoch::default()).then_some(j.set_epoch),
        checkpoint_on_signal: j.checkpoint_on_signal,
        init_method: (j.init_method != InitMethod::default()).then_some(j.init_method),
        script_master_port: j.script_master_port.map(u64::from),
        eval: j.eval.map(|e| RawEval {
            len: Some(e.len),
            drop_last: Some(e.drop_last),
        }),
    }
}

fn reader(r: &ReaderSection) -> RawReader {
    RawReader {
        workers: Some(r.workers),
        files: Some(r.files),
        records_per_file: Some(r.records_per_file),
        batch_size: Some(r.batch_size),
        repeat: Some(r.repeat),
        check: Some(r.check),
        broken_files: Some(r.broken_files.clone()),
        corrupt_records: Some(r.corrupt_records.clone()),
        truncated_files: Some(r.truncated_files.clone()),
        parse_time: Some(Duration::of_span(r.parse_time)),
        record_size: Some(Size::from_bytes(r.record_size_bytes)),
        fixes: Some(names(&r.fixes)),
    }
}

fn fault(f: &Fault) -> RawFault {
    let mut r = RawFault {
        at: Some(Duration::of_span(f.at.since_start())),
        kind: Some(f.kind.name().to_string()),
        ..RawFault::default()
    };
    set_kind_keys(&mut r, &f.kind);
    if let Some(role) = f.role {
        r.node = Some(role.to_string());
    }
    r
}

/// Sets the keys of `r` that say what the fault `kind` does, besides `at` and `kind`.
fn set_kind_keys(r: &mut RawFault, kind: &FaultKind) {
    match kind {
        FaultKind::Kill { node: n }
        | FaultKind::PowerOff { node: n }
        | FaultKind::Stop { node: n }
        | FaultKind::Restart { node: n }
        | FaultKind::Start { node: n }
        | FaultKind::Pause { node: n }
        | FaultKind::Resume { node: n } => r.node = Some(node(*n)),
        FaultKind::Signal { node: n, signal } => {
            (r.node, r.signal) = (Some(node(*n)), Some(signal.to_string()));
        }
        FaultKind::Partition { groups } => {
            r.groups = Some(
                groups
                    .iter()
                    .map(|g| g.iter().map(|n| node(*n)).collect())
                    .collect(),
            )
        }
        FaultKind::Heal | FaultKind::StoreCrash => {}
        FaultKind::ClogLink { from, to } | FaultKind::UnclogLink { from, to } => {
            (r.from, r.to) = (Some(node(*from)), Some(node(*to)));
        }
        FaultKind::Latency {
            latency_min,
            latency_max,
            duration,
        } => {
            r.latency = Some(vec![
                Duration::of_span(*latency_min),
                Duration::of_span(*latency_max),
            ]);
            r.duration = duration.map(Duration::of_span);
        }
        FaultKind::Loss {
            probability,
            duration,
        } => (r.probability, r.duration) = (Some(*probability), duration.map(Duration::of_span)),
        FaultKind::ClockSkew { node: n, offset_us } => {
            (r.node, r.offset) = (Some(node(*n)), Some(Offset::from_us(*offset_us)))
        }
        FaultKind::GpuSlow {
            node: n,
            gpu,
            factor,
            duration,
        } => {
            (r.node, r.gpu, r.factor, r.duration) = (
                Some(node(*n)),
                Some(*gpu),
                Some(*factor),
                Some(Duration::of_span(*duration)),
            );
        }
        FaultKind::GpuFail { node: n, gpu } => (r.node, r.gpu) = (Some(node(*n)), Some(*gpu)),
        FaultKind::WorkerCrash {
            node: n,
            local_rank,
            exit_code,
        } => {
            (r.node, r.local_rank, r.exit_code) =
                (Some(node(*n)), Some(*local_rank), Some(*exit_code));
        }
    }
}

fn expect(e: &Expect) -> Option<RawExpect> {
    if *e == Expect::default() {
        return None;
    }
    Some(RawExpect {
        outcome: e.outcome,
        rounds: e.rounds.map(|(min, max)| {
            if min == max {
                RawRounds::Exact(min)
            } else {
                RawRounds::Range {
                    min: Some(min),
                    max: Some(max),
                }
            }
        }),
        restarts: (!e.restarts.is_empty())
            .then(|| e.restarts.iter().map(|(n, c)| (node(*n), *c)).collect()),
        final_world_size: e.final_world_size,
        final_participants: e
            .final_participants
            .as_ref()
            .map(|nodes| nodes.iter().map(|&n| node(n)).collect()),
        violations: (!e.violations.is_empty()).then(|| e.violations.clone()),
    })
}

/// The names of `fixes`, in their order.
fn names<'a, F>(fixes: impl IntoIterator<Item = &'a F>) -> Vec<String>
where
    F: Copy + Into<&'static str> + 'a,
{
    fixes
        .into_iter()
        .map(|&f| Into::<&'static str>::into(f).to_owned())
        .collect()
}
