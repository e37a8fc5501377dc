//! Validation of `[[faults]]`: per-kind keys, node names and roles, GPU and rank indices,
//! times inside the time limit, and the order rules for spare nodes.

use super::limits::*;
use super::locate::FieldPath;
use super::model::ROLE_STANDIN_NODE;
use super::model::{Fault, FaultKind, FaultName, NodeIndex, NodeRole, StoreHost};
use super::raw::RawFault;
use super::units::Duration;
use super::values::*;
use crate::sim_time::{SimDuration, SimInstant};
use std::collections::{BTreeMap, BTreeSet};
use strum::VariantArray;

/// The keys a fault of kind `name` takes besides `at` and `kind`: the ones it needs, and the
/// optional ones. Exhaustive, so a new kind must say what it takes.
pub fn fault_fields(name: FaultName) -> (&'static [&'static str], &'static [&'static str]) {
    match name {
        FaultName::Kill
        | FaultName::PowerOff
        | FaultName::Stop
        | FaultName::Restart
        | FaultName::Start
        | FaultName::Pause
        | FaultName::Resume => (&["node"], &[]),
        FaultName::Partition => (&["groups"], &[]),
        FaultName::Heal | FaultName::StoreCrash => (&[], &[]),
        FaultName::ClogLink | FaultName::UnclogLink => (&["from", "to"], &[]),
        FaultName::Latency => (&["latency"], &["duration"]),
        FaultName::Loss => (&["probability"], &["duration"]),
        FaultName::ClockSkew => (&["node", "offset"], &[]),
        FaultName::Signal => (&["node", "signal"], &[]),
        FaultName::GpuSlow => (&["node", "gpu", "factor", "duration"], &[]),
        FaultName::GpuFail => (&["node", "gpu"], &[]),
        FaultName::WorkerCrash => (&["node", "local_rank"], &["exit_code"]),
    }
}

/// A `signal` fault's `signal`: a user signal (SIGTERM is the `stop` fault).
fn user_signal(p: &FieldPath, name: &str) -> Check<super::model::Signal> {
    match name.parse::<super::model::Signal>() {
        Ok(signal) if signal.is_user() => Ok(signal),
        Ok(_) => Err(issue(
            p,
            format!(
                "`{name}` is not a user signal (SIGUSR1 or SIGUSR2; SIGTERM is the `stop` fault)"
            ),
        )),
        Err(_) => Err(issue(
            p,
            format!("`{name}` is not a signal a `signal` fault sends (SIGUSR1 or SIGUSR2)"),
        )),
    }
}

/// What a fault may refer to.
pub struct FaultContext {
    /// Nodes that start at t = 0.
    pub nodes: u32,
    /// Started and spare nodes.
    pub total_nodes: u32,
    pub gpus_per_node: u32,
    pub nproc_per_node: u32,
    pub time_limit: SimDuration,
    /// Where the c10d store runs: a `store_host` fault needs a node that hosts it.
    pub store: StoreHost,
}

/// All faults, in file order, each with its index in the file.
pub fn faults(list: &[RawFault], ctx: &FaultContext) -> Check<Vec<(usize, Fault)>> {
    let p = FieldPath::root().key("faults");
    list_len(&p, list, FAULTS_MAX)?;
    let mut out = Vec::with_capacity(list.len());
    for (i, raw) in list.iter().enumerate() {
        out.push((i, fault(&p.index(i), raw, ctx)?));
    }
    check_spare_order(&p, &out, ctx)?;
    Ok(out)
}

/// A spare node starts once, by `start`, and only a started spare can be restarted.
fn check_spare_order(p: &FieldPath, faults: &[(usize, Fault)], ctx: &FaultContext) -> Check<()> {
    // A fault aimed at a role hits a node that has started by then (or nothing).
    let mut by_time: Vec<&(usize, Fault)> =
        faults.iter().filter(|(_, f)| f.role.is_none()).collect();
    by_time.sort_by_key(|(_, f)| f.at);
    let mut started: BTreeMap<u32, usize> = BTreeMap::new();
    for (i, f) in by_time {
        match f.kind {
            FaultKind::Start { node } => {
                if let Some(first) = started.insert(node, *i) {
                    let msg = format!(
                        "{} is already started by faults[{first}]; use `restart` after a kill",
                        NodeIndex(node)
                    );
                    return Err(issue(&p.index(*i).key("node"), msg));
                }
            }
            FaultKind::Restart { node } if node >= ctx.nodes && !started.contains_key(&node) => {
                let msg = format!(
                    "{} is a spare node that no earlier `start` fault starts",
                    NodeIndex(node)
                );
                return Err(issue(&p.index(*i).key("node"), msg));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The keys a raw fault spells out, besides `at` and `kind`.
fn present_keys(f: &RawFault) -> Vec<&'static str> {
    let flags = [
        ("node", f.node.is_some()),
        ("groups", f.groups.is_some()),
        ("from", f.from.is_some()),
        ("to", f.to.is_some()),
        ("latency", f.latency.is_some()),
        ("probability", f.probability.is_some()),
        ("duration", f.duration.is_some()),
        ("offset", f.offset.is_some()),
        ("gpu", f.gpu.is_some()),
        ("factor", f.factor.is_some()),
        ("local_rank", f.local_rank.is_some()),
        ("exit_code", f.exit_code.is_some()),
        ("signal", f.signal.is_some()),
    ];
    flags
        .iter()
        .filter(|(_, on)| *on)
        .map(|(k, _)| *k)
        .collect()
}

fn fault(p: &FieldPath, f: &RawFault, ctx: &FaultContext) -> Check<Fault> {
    let kind = required(&p.key("kind"), &f.kind)?;
    let Ok(name) = kind.parse::<FaultName>() else {
        let kinds: Vec<&str> = FaultName::VARIANTS.iter().map(|n| n.into()).collect();
        return Err(issue(
            &p.key("kind"),
            format!(
                "`{kind}` is not a fault kind (one of: {})",
                kinds.join(", ")
            ),
        ));
    };
    let (needs, optional) = fault_fields(name);
    let present = present_keys(f);
    for key in &present {
        if !needs.contains(key) && !optional.contains(key) {
            let takes: Vec<&str> = needs.iter().chain(optional.iter()).copied().collect();
            let takes = if takes.is_empty() {
                "no other keys".to_string()
            } else {
                takes.join(", ")
            };
            return Err(issue(
                &p.key(key),
                format!("does not apply to a `{kind}` fault (it takes: {takes})"),
            ));
        }
    }
    if let Some(key) = needs.iter().find(|k| !present.contains(k)) {
        return Err(issue(p, format!("a `{kind}` fault needs `{key}`")));
    }
    let at = required(&p.key("at"), &f.at)?;
    if at.span() >= ctx.time_limit {
        let limit = Duration::of_span(ctx.time_limit);
        return Err(issue(
            &p.key("at"),
            format!("{at} is not before time_limit ({limit}); the run ends there"),
        ));
    }
    let role = role(p, name, f, ctx)?;
    Ok(Fault {
        at: SimInstant::from_start(at.span()),
        kind: fault_kind(p, name, f, ctx, role.is_some())?,
        role,
    })
}

/// The role a fault's `node` names instead of a node (`rank0`, `store_host`), if it does.
fn role(
    p: &FieldPath,
    name: FaultName,
    f: &RawFault,
    ctx: &FaultContext,
) -> Check<Option<NodeRole>> {
    let Some(role) = f.node.as_deref().and_then(|n| n.parse::<NodeRole>().ok()) else {
        return Ok(None);
    };
    let at = p.key("node");
    if name == FaultName::Start {
        let msg = format!(
            "`start` brings up a spare node, named by its name; `{role}` names a node that has already started"
        );
        return Err(issue(&at, msg));
    }
    if role == NodeRole::StoreHost && ctx.store == StoreHost::Dedicated {
        let msg = "`store_host` names the node hosting the c10d store, but cluster.store is \
                   \"dedicated\": no node of the cluster hosts it";
        return Err(issue(&at, msg));
    }
    Ok(Some(role))
}

fn fault_kind(
    p: &FieldPath,
    name: FaultName,
    f: &RawFault,
    ctx: &FaultContext,
    aimed_at_role: bool,
) -> Check<FaultKind> {
    let node_name = f.node.as_deref().unwrap_or("");
    let node = || match aimed_at_role {
        true => Ok(ROLE_STANDIN_NODE),
        false => node_index(&p.key("node"), node_name, ctx.total_nodes).map_err(|mut e| {
            if node_name.parse::<NodeIndex>().is_err() {
                e.message.push_str(", or a role: rank0, store_host");
            }
            e
        }),
    };
    Ok(match name {
        FaultName::Kill => FaultKind::Kill { node: node()? },
        FaultName::PowerOff => FaultKind::PowerOff { node: node()? },
        FaultName::Stop => FaultKind::Stop { node: node()? },
        FaultName::Signal => FaultKind::Signal {
            node: node()?,
            signal: user_signal(&p.key("signal"), f.signal.as_deref().unwrap_or(""))?,
        },
        FaultName::Restart => FaultKind::Restart { node: node()? },
        FaultName::Start => FaultKind::Start {
            node: spare(p, node()?, ctx)?,
        },
        FaultName::Pause => FaultKind::Pause { node: node()? },
        FaultName::Resume => FaultKind::Resume { node: node()? },
        FaultName::Partition => FaultKind::Partition {
            groups: groups(&p.key("groups"), f.groups.as_deref().unwrap_or(&[]), ctx)?,
        },
        FaultName::Heal => FaultKind::Heal,
        FaultName::ClogLink | FaultName::UnclogLink => link(p, name, f, ctx)?,
        FaultName::Latency => {
            let (min, max) = latency_range(&p.key("latency"), f.latency.as_deref().unwrap_or(&[]))?;
            FaultKind::Latency {
                latency_min: min,
                latency_max: max,
                duration: fault_duration(p, f.duration)?,
            }
        }
        FaultName::Loss => FaultKind::Loss {
            probability: probability(&p.key("probability"), f.probability.unwrap_or(0.0))?,
            duration: fault_duration(p, f.duration)?,
        },
        FaultName::ClockSkew => FaultKind::ClockSkew {
            node: node()?,
            offset_us: offset_in(
                &p.key("offset"),
                f.offset.unwrap_or_default(),
                CLOCK_SKEW_US_MAX,
            )?,
        },
        FaultName::GpuSlow => gpu_slow(p, f, ctx, node()?)?,
        FaultName::GpuFail => FaultKind::GpuFail {
            node: node()?,
            gpu: gpu(p, f.gpu.unwrap_or(0), ctx)?,
        },
        FaultName::WorkerCrash => FaultKind::WorkerCrash {
            node: node()?,
            local_rank: local_rank(p, f, ctx)?,
            exit_code: exit_code(p, f)?,
        },
        FaultName::StoreCrash => FaultKind::StoreCrash,
    })
}

/// `gpu_slow` on `node` (checked first, so its error is the one reported): which GPU, how
/// many times slower, for how long.
fn gpu_slow(p: &FieldPath, f: &RawFault, ctx: &FaultContext, node: u32) -> Check<FaultKind> {
    Ok(FaultKind::GpuSlow {
        node,
        gpu: gpu(p, f.gpu.unwrap_or(0), ctx)?,
        factor: float_in(
            &p.key("factor"),
            f.factor.unwrap_or(1.0),
            1.0,
            GPU_SLOW_FACTOR_MAX,
        )?,
        duration: fault_duration(p, f.duration)?.unwrap_or(SimDuration::ZERO),
    })
}

/// A fault's optional `duration`, when it gives one.
fn fault_duration(p: &FieldPath, duration: Option<Duration>) -> Check<Option<SimDuration>> {
    duration
        .map(|d| duration_in(&p.key("duration"), d, 1..=TIME_LIMIT_US_MAX))
        .transpose()
}

fn link(p: &FieldPath, name: FaultName, f: &RawFault, ctx: &FaultContext) -> Check<FaultKind> {
    let from = node_index(
        &p.key("from"),
        f.from.as_deref().unwrap_or(""),
        ctx.total_nodes,
    )?;
    let to = node_index(&p.key("to"), f.to.as_deref().unwrap_or(""), ctx.total_nodes)?;
    if from == to {
        return Err(issue(&p.key("to"), "a link joins two different nodes"));
    }
    Ok(if name == FaultName::ClogLink {
        FaultKind::ClogLink { from, to }
    } else {
        FaultKind::UnclogLink { from, to }
    })
}

fn spare(p: &FieldPath, node: u32, ctx: &FaultContext) -> Check<u32> {
    if node < ctx.nodes {
        let (first, node) = (NodeIndex(ctx.nodes), NodeIndex(node));
        let msg =
            format!("`start` brings up a spare node ({first} and above); {node} starts at t = 0");
        return Err(issue(&p.key("node"), msg));
    }
    Ok(node)
}

fn gpu(p: &FieldPath, gpu: u32, ctx: &FaultContext) -> Check<u32> {
    if gpu >= ctx.gpus_per_node {
        let msg = format!(
            "GPU {gpu} does not exist (cluster.gpus_per_node is {})",
            ctx.gpus_per_node
        );
        return Err(issue(&p.key("gpu"), msg));
    }
    Ok(gpu)
}

fn local_rank(p: &FieldPath, f: &RawFault, ctx: &FaultContext) -> Check<u32> {
    let rank = f.local_rank.unwrap_or(0);
    if rank >= ctx.nproc_per_node {
        let msg = format!(
            "local rank {rank} does not exist (agent.nproc_per_node is {})",
            ctx.nproc_per_node
        );
        return Err(issue(&p.key("local_rank"), msg));
    }
    Ok(rank)
}

fn exit_code(p: &FieldPath, f: &RawFault) -> Check<i32> {
    // torch treats any non-zero exit as a failed worker; 1 is what an uncaught Python
    // exception gives, so it is the default.
    let code = f.exit_code.unwrap_or(1);
    if code == 0 {
        return Err(issue(
            &p.key("exit_code"),
            "must be non-zero (a worker exiting 0 has succeeded)",
        ));
    }
    Ok(code)
}

fn groups(p: &FieldPath, groups: &[Vec<String>], ctx: &FaultContext) -> Check<Vec<Vec<u32>>> {
    if groups.is_empty() {
        return Err(issue(p, "must list at least one group of nodes"));
    }
    list_len(p, groups, ctx.total_nodes as usize)?;
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(groups.len());
    for (g, group) in groups.iter().enumerate() {
        if group.is_empty() {
            return Err(issue(&p.index(g), "a group cannot be empty"));
        }
        let twice = "is in more than one place";
        let nodes = node_list(&p.index(g), group, ctx.total_nodes, twice)?;
        for &(i, node) in &nodes {
            if !seen.insert(node) {
                let (name, entry) = (NodeIndex(node).to_string(), &group[i]);
                let from = match *entry == name {
                    true => String::new(),
                    false => format!(" (in `{entry}`)"),
                };
                let msg = format!("`{name}`{from} {twice}");
                return Err(issue(&p.index(g).index(i), msg));
            }
        }
        out.push(nodes.into_iter().map(|(_, node)| node).collect());
    }
    Ok(out)
}
