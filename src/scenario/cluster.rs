//! Validation of `[cluster]`, `[network]`, `[rendezvous]` and `[agent]`, with torch's
//! defaults, and the built-in GPU profiles.

use super::limits::*;
use super::locate::FieldPath;
use super::model::{
    AgentConfig, Cluster, GpuProfile, Network, RendezvousConfig, Signal, StoreHost,
    RELAUNCH_DELAY_CAP, SIGNALS_HANDLED_BY_DEFAULT,
};
use super::raw::{RawAgent, RawCluster, RawGpuProfile, RawNetwork, RawRendezvous};
use super::torch_defaults::*;
use super::units::{Bandwidth, Duration};
use super::values::*;
use crate::sim_time::SimDuration;
use std::collections::{BTreeMap, BTreeSet};
use strum::VariantArray;

/// The built-in GPU profile called `name`, if there is one.
pub fn builtin_gpu(name: &str) -> Option<GpuProfile> {
    // Datasheet figures: PCIe Gen5/Gen4 x16 for host-to-device, NVLink 4/3 for
    // device-to-device; compute speed from dense BF16 throughput (989 vs 312 TFLOPS).
    let (memory_bytes, h2d, d2d, compute_speed) = match name {
        "h100" => (80u64 << 30, 512_000_000_000u64, 7_200_000_000_000u64, 1.0),
        "a100" => (80 << 30, 256_000_000_000, 4_800_000_000_000, 0.32),
        _ => return None,
    };
    Some(GpuProfile {
        name: name.to_string(),
        memory_bytes,
        h2d_bits_per_sec: h2d,
        d2d_bits_per_sec: d2d,
        compute_speed,
    })
}

/// Names of the built-in GPU profiles.
pub const BUILTIN_GPUS: &[&str] = &["h100", "a100"];

/// `[cluster]`.
/// `top_profile` is the top-level `[gpu_profile]`; `[cluster.gpu_profile]` is its alias.
pub fn cluster(raw: &Option<RawCluster>, top_profile: &Option<RawGpuProfile>) -> Check<Cluster> {
    let p = FieldPath::root().key("cluster");
    let c = raw.clone().unwrap_or_default();
    let nodes = in_range(&p.key("nodes"), c.nodes.unwrap_or(1), 1, NODES_MAX)?;
    let spare_nodes = c.spare_nodes.unwrap_or(0);
    if spare_nodes > NODES_MAX - nodes {
        let msg = format!(
            "nodes + spare_nodes must be at most {NODES_MAX} (got {nodes} + {spare_nodes})"
        );
        return Err(issue(&p.key("spare_nodes"), msg));
    }
    let gpus_per_node = in_range(
        &p.key("gpus_per_node"),
        c.gpus_per_node.unwrap_or(8),
        1,
        GPUS_PER_NODE_MAX,
    )?;
    let (profile_path, profile) = match (top_profile, &c.gpu_profile) {
        (Some(_), Some(_)) => {
            let msg = "a custom GPU is described twice: keep [gpu_profile] and drop [cluster.gpu_profile]";
            return Err(issue(&p.key("gpu_profile"), msg));
        }
        (Some(top), None) => (FieldPath::root().key("gpu_profile"), Some(top.clone())),
        (None, alias) => (p.key("gpu_profile"), alias.clone()),
    };
    let gpu = gpu(&p, &c.gpu, &profile_path, &profile)?;
    let store = store(&p.key("store"), &c.store, nodes, nodes + spare_nodes)?;
    let mut clock_skew_us = BTreeMap::new();
    for (name, offset) in c.clock_skew.iter().flatten() {
        let at = p.key("clock_skew").key(name);
        let node = node_index(&at, name, nodes + spare_nodes)?;
        clock_skew_us.insert(node, offset_in(&at, *offset, CLOCK_SKEW_US_MAX)?);
    }
    let tcp_retries2 = in_range(
        &p.key("tcp_retries2"),
        c.tcp_retries2.unwrap_or(TCP_RETRIES2_DEFAULT),
        0,
        TCP_RETRIES2_MAX,
    )?;
    let store_cost_scale = float_in(
        &p.key("store_cost_scale"),
        c.store_cost_scale.unwrap_or(1.0),
        0.0,
        STORE_COST_SCALE_MAX,
    )?;
    Ok(Cluster {
        nodes,
        spare_nodes,
        gpus_per_node,
        gpu,
        store,
        clock_skew_us,
        tcp_retries2,
        store_cost_scale,
        one_machine: c.one_machine.unwrap_or(false),
    })
}

fn store(path: &FieldPath, raw: &Option<String>, nodes: u32, total: u32) -> Check<StoreHost> {
    match raw.as_deref() {
        None => Ok(StoreHost::Node(0)),
        Some("dedicated") => Ok(StoreHost::Dedicated),
        Some(name) => {
            let index = node_index(path, name, total)
                .map_err(|e| issue(path, format!("{} (or \"dedicated\")", e.message)))?;
            if index >= nodes {
                let msg = format!(
                    "`{name}` is a spare node; the store must live on a node that starts at t = 0"
                );
                return Err(issue(path, msg));
            }
            Ok(StoreHost::Node(index))
        }
    }
}

fn gpu(
    cluster: &FieldPath,
    name: &Option<String>,
    profile_path: &FieldPath,
    profile: &Option<RawGpuProfile>,
) -> Check<GpuProfile> {
    let Some(raw) = profile else {
        let name = name.as_deref().unwrap_or("h100");
        let known = BUILTIN_GPUS.join(", ");
        let msg = format!(
            "`{name}` is not a built-in GPU (built-in: {known}); describe others in [gpu_profile]"
        );
        return builtin_gpu(name).ok_or_else(|| issue(&cluster.key("gpu"), msg));
    };
    let p = profile_path.clone();
    let profile_name = required(&p.key("name"), &raw.name)?;
    let name_chars = profile_name.chars().count();
    if name_chars == 0 || name_chars > GPU_NAME_CHARS_MAX {
        return Err(issue(
            &p.key("name"),
            format!("must have 1 to {GPU_NAME_CHARS_MAX} characters"),
        ));
    }
    if BUILTIN_GPUS.contains(&profile_name.as_str()) {
        let msg = format!("`{profile_name}` is a built-in profile; give yours another name or use gpu = \"{profile_name}\"");
        return Err(issue(&p.key("name"), msg));
    }
    if let Some(name) = name {
        if *name != profile_name {
            let msg = format!("names `{name}` but [gpu_profile] is `{profile_name}`; leave gpu out or make them agree");
            return Err(issue(&cluster.key("gpu"), msg));
        }
    }
    let memory = required(&p.key("memory"), &raw.memory)?;
    let memory_bytes = quantity_in(&p.key("memory"), memory, 1..=GPU_MEMORY_BYTES_MAX)?;
    let bandwidth = |key: &str, value: &Option<Bandwidth>| {
        let value = required(&p.key(key), value)?;
        quantity_in(&p.key(key), value, 1..=BANDWIDTH_BITS_PER_SEC_MAX)
    };
    let h2d_bits_per_sec = bandwidth("h2d_bandwidth", &raw.h2d_bandwidth)?;
    let d2d_bits_per_sec = bandwidth("d2d_bandwidth", &raw.d2d_bandwidth)?;
    let speed = required(&p.key("compute_speed"), &raw.compute_speed)?;
    let compute_speed = float_in(
        &p.key("compute_speed"),
        speed,
        f64::MIN_POSITIVE,
        GPU_COMPUTE_SPEED_MAX,
    )?;
    Ok(GpuProfile {
        name: profile_name,
        memory_bytes,
        h2d_bits_per_sec,
        d2d_bits_per_sec,
        compute_speed,
    })
}

/// `[network]`.
pub fn network(raw: &Option<RawNetwork>) -> Check<Network> {
    let p = FieldPath::root().key("network");
    let n = raw.clone().unwrap_or_default();
    let (latency_min, latency_max) = match &n.latency {
        Some(pair) => latency_range(&p.key("latency"), pair)?,
        None => (SimDuration::from_ms(1), SimDuration::from_ms(5)),
    };
    let loss = probability(&p.key("loss"), n.loss.unwrap_or(0.0))?;
    let bandwidth_bits_per_sec = quantity_or(
        &p.key("bandwidth"),
        n.bandwidth,
        100_000_000_000,
        1..=BANDWIDTH_BITS_PER_SEC_MAX,
    )?;
    let store_host_bandwidth_bits_per_sec = quantity_or(
        &p.key("store_host_bandwidth"),
        n.store_host_bandwidth,
        bandwidth_bits_per_sec,
        1..=BANDWIDTH_BITS_PER_SEC_MAX,
    )?;
    Ok(Network {
        latency_min,
        latency_max,
        loss,
        bandwidth_bits_per_sec,
        store_host_bandwidth_bits_per_sec,
    })
}

/// `[rendezvous]`: torch's `DynamicRendezvousHandler` defaults; node bounds as torchrun's
/// `--nnodes` (absent: the cluster's starting nodes; one given: the other equals it). The
/// result is the settings every agent's handler takes as they are, with the run id all
/// agents share and no mutants.
pub fn rendezvous(raw: &Option<RawRendezvous>, cluster: &Cluster) -> Check<RendezvousConfig> {
    let p = FieldPath::root().key("rendezvous");
    let r = raw.clone().unwrap_or_default();
    let (min_nodes, max_nodes) = match (r.min_nodes, r.max_nodes) {
        (None, None) => (cluster.nodes, cluster.nodes),
        (Some(min), None) => (min, min),
        (None, Some(max)) => (max, max),
        (Some(min), Some(max)) => (min, max),
    };
    in_range(&p.key("min_nodes"), min_nodes, 1, NODES_MAX)?;
    in_range(&p.key("max_nodes"), max_nodes, 1, NODES_MAX)?;
    if min_nodes > max_nodes {
        let msg = format!("min_nodes ({min_nodes}) is greater than max_nodes ({max_nodes})");
        return Err(issue(&p.key("min_nodes"), msg));
    }
    let t = |key: &str, v: Option<Duration>, default_us: u64| {
        duration_or(
            &p.key(key),
            v,
            SimDuration::from_us(default_us),
            1..=TIMEOUT_US_MAX,
        )
    };
    let attempts = r
        .keep_alive_max_attempt
        .unwrap_or(DEFAULT_KEEP_ALIVE_MAX_ATTEMPT);
    Ok(RendezvousConfig {
        min_nodes,
        max_nodes,
        join_timeout: t("join_timeout", r.join_timeout, DEFAULT_JOIN_TIMEOUT_US)?,
        last_call_timeout: t(
            "last_call_timeout",
            r.last_call_timeout,
            DEFAULT_LAST_CALL_TIMEOUT_US,
        )?,
        close_timeout: t("close_timeout", r.close_timeout, DEFAULT_CLOSE_TIMEOUT_US)?,
        heartbeat_timeout: t(
            "heartbeat_timeout",
            r.heartbeat_timeout,
            DEFAULT_HEARTBEAT_TIMEOUT_US,
        )?,
        keep_alive_interval: t(
            "keep_alive_interval",
            r.keep_alive_interval,
            DEFAULT_KEEP_ALIVE_INTERVAL_US,
        )?,
        keep_alive_max_attempt: in_range(
            &p.key("keep_alive_max_attempt"),
            attempts,
            1,
            KEEP_ALIVE_MAX_ATTEMPT_MAX,
        )?,
        cas_backoff_max: duration_or(
            &p.key("cas_backoff_max"),
            r.cas_backoff_max,
            SimDuration::ZERO,
            0..=TIMEOUT_US_MAX,
        )?,
        read_timeout: duration_or(
            &p.key("read_timeout"),
            r.read_timeout,
            super::limits::READ_TIMEOUT_DEFAULT,
            1_000_000..=TIMEOUT_US_MAX,
        )?,
        fixes: fixes(&p.key("fixes"), r.fixes.as_deref().unwrap_or(&[]))?
            .into_iter()
            .collect(),
    })
}

/// `rendezvous.fixes` and `agent.fixes`: non-empty, distinct names of fixes of kind `F`
/// (`RendezvousFix`, `AgentFix`), read into them in the file's order.
/// `agent.signals_to_handle`: known names, each once, SIGTERM among them (the `stop` fault is
/// torchrun's SIGTERM handling); kept in the order of [`Signal`].
fn signals_to_handle(path: &FieldPath, names: Option<&[String]>) -> Check<Vec<Signal>> {
    let Some(names) = names else {
        return Ok(SIGNALS_HANDLED_BY_DEFAULT.to_vec());
    };
    list_len(path, names, Signal::VARIANTS.len())?;
    let mut signals = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let at = path.index(i);
        let Ok(signal) = name.parse::<Signal>() else {
            let known: Vec<&str> = Signal::VARIANTS.iter().map(|&s| s.into()).collect();
            return Err(issue(
                &at,
                format!(
                    "`{name}` is not a signal torchrun can handle (known: {})",
                    known.join(", ")
                ),
            ));
        };
        if signals.contains(&signal) {
            return Err(issue(&at, format!("`{name}` is listed twice")));
        }
        signals.push(signal);
    }
    if !signals.contains(&Signal::Term) {
        return Err(issue(
            path,
            "SIGTERM must be handled: the `stop` fault is torchrun's SIGTERM handling",
        ));
    }
    signals.sort();
    Ok(signals)
}

pub fn fixes<F>(path: &FieldPath, names: &[String]) -> Check<Vec<F>>
where
    F: Copy + std::str::FromStr + strum::VariantArray + Into<&'static str>,
{
    list_len(path, names, FIXES_MAX)?;
    let mut seen = BTreeSet::new();
    let mut fixes = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let at = path.index(i);
        if name.trim().is_empty() {
            return Err(issue(&at, "a fix name cannot be empty"));
        }
        if !seen.insert(name.as_str()) {
            return Err(issue(&at, format!("`{name}` is listed twice")));
        }
        let Ok(fix) = name.parse::<F>() else {
            let known: Vec<&str> = F::VARIANTS.iter().map(|&f| f.into()).collect();
            return Err(issue(
                &at,
                format!(
                    "`{name}` is not a known fix (known fixes: {})",
                    known.join(", ")
                ),
            ));
        };
        fixes.push(fix);
    }
    Ok(fixes)
}

/// `[agent]`: `LocalElasticAgent` / torchrun defaults.
pub fn agent(raw: &Option<RawAgent>, cluster: &Cluster) -> Check<AgentConfig> {
    let p = FieldPath::root().key("agent");
    let a = raw.clone().unwrap_or_default();
    let nproc = a.nproc_per_node.unwrap_or(cluster.gpus_per_node);
    Ok(AgentConfig {
        nproc_per_node: in_range(&p.key("nproc_per_node"), nproc, 1, NPROC_PER_NODE_MAX)?,
        max_restarts: in_range(
            &p.key("max_restarts"),
            a.max_restarts.unwrap_or(0),
            0,
            MAX_RESTARTS_MAX,
        )?,
        monitor_interval: duration_or(
            &p.key("monitor_interval"),
            a.monitor_interval,
            SimDuration::from_ms(100),
            1..=TIMEOUT_US_MAX,
        )?,
        exit_barrier_timeout: duration_or(
            &p.key("exit_barrier_timeout"),
            a.exit_barrier_timeout,
            SimDuration::from_ms(300_000),
            1..=TIMEOUT_US_MAX,
        )?,
        start_time: duration_or(
            &p.key("start_time"),
            a.start_time,
            SimDuration::ZERO,
            0..=STEP_TIME_US_MAX,
        )?,
        start_time_jitter: duration_or(
            &p.key("start_time_jitter"),
            a.start_time_jitter,
            SimDuration::ZERO,
            0..=STEP_TIME_US_MAX,
        )?,
        share_store: a.share_store.unwrap_or(true),
        worker_identical: a.worker_identical.unwrap_or(false),
        signals_to_handle: signals_to_handle(
            &p.key("signals_to_handle"),
            a.signals_to_handle.as_deref(),
        )?,
        fixes: fixes(&p.key("fixes"), a.fixes.as_deref().unwrap_or(&[]))?,
        relaunch: a.relaunch.unwrap_or_default(),
        relaunch_delay: duration_or(
            &p.key("relaunch_delay"),
            a.relaunch_delay,
            SimDuration::from_ms(10_000),
            0..=RELAUNCH_DELAY_CAP.as_us(),
        )?,
        relaunch_max: in_range(
            &p.key("relaunch_max"),
            a.relaunch_max.unwrap_or(6),
            0,
            MAX_RESTARTS_MAX,
        )?,
    })
}
