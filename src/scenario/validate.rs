//! The one place a raw scenario becomes a `Scenario`: defaults filled in, units resolved,
//! every rule and bound checked, and features not built yet refused.

use super::limits::*;
use super::locate::FieldPath;
use super::model::{Expect, Scenario, TorchSection};
use super::raw::{RawExpect, RawRounds, RawScenario, RawTorch};
use super::values::*;
use super::{cluster, failures, faults, job};
use crate::invariant::Invariant;
use crate::sim_time::SimDuration;
use std::collections::{BTreeMap, BTreeSet};

/// Default simulated time budget: 2 hours.
pub const TIME_LIMIT_US_DEFAULT: u64 = SimDuration::from_secs(2 * 3_600).as_us();

/// Checks a raw scenario and builds the model.
pub fn validate(raw: &RawScenario) -> Check<Scenario> {
    let root = FieldPath::root();
    let name = required(&root.key("name"), &raw.name)?;
    let name_chars = name.chars().count();
    if name.trim().is_empty() || name_chars > NAME_CHARS_MAX {
        return Err(issue(
            &root.key("name"),
            format!("must have 1 to {NAME_CHARS_MAX} characters, not only spaces"),
        ));
    }
    let description = raw.description.clone().unwrap_or_default();
    if description.chars().count() > DESCRIPTION_CHARS_MAX {
        return Err(issue(
            &root.key("description"),
            format!("must have at most {DESCRIPTION_CHARS_MAX} characters"),
        ));
    }
    let seed = in_range(&root.key("seed"), raw.seed.unwrap_or(0), 0, SEED_MAX)?;
    let time_limit = duration_or(
        &root.key("time_limit"),
        raw.time_limit,
        SimDuration::from_us(TIME_LIMIT_US_DEFAULT),
        1..=TIME_LIMIT_US_MAX,
    )?;
    let cluster = cluster::cluster(&raw.cluster, &raw.gpu_profile)?;
    let network = cluster::network(&raw.network)?;
    let rendezvous = cluster::rendezvous(&raw.rendezvous, &cluster)?;
    let agent = cluster::agent(&raw.agent, &cluster)?;
    let job = job::job(&raw.job)?;
    if job.model_size_bytes > cluster.gpu.memory_bytes {
        let msg = format!(
            "the gradients ({} bytes) must fit in the memory of one `{}` GPU ({} bytes)",
            job.model_size_bytes, cluster.gpu.name, cluster.gpu.memory_bytes
        );
        return Err(issue(&root.key("job").key("model_size"), msg));
    }
    let reader = job::reader(&raw.reader)?;
    let ctx = faults::FaultContext {
        nodes: cluster.nodes,
        total_nodes: cluster.total_nodes(),
        gpus_per_node: cluster.gpus_per_node,
        nproc_per_node: agent.nproc_per_node,
        time_limit,
        store: cluster.store,
    };
    let mut indexed = faults::faults(&raw.faults, &ctx)?;
    let expect = expect(&raw.expect, cluster.total_nodes())?;
    let failures = failures::failures(&raw.failures, &cluster, time_limit)?;
    let torch = raw.torch.as_ref().map(torch).transpose()?;
    // Stable: faults at the same time keep their file order.
    indexed.sort_by_key(|(_, f)| f.at);
    let faults = indexed.into_iter().map(|(_, f)| f).collect();
    Ok(Scenario {
        name,
        description,
        seed,
        time_limit,
        end_with_job: raw.end_with_job.unwrap_or(raw.failures.is_some()),
        cluster,
        network,
        rendezvous,
        agent,
        job,
        reader,
        faults,
        failures,
        expect,
        torch,
    })
}

/// `[torch]`: `python` is required; each path is kept as written (the command line
/// resolves a relative one against the file's directory), but must be a usable string.
fn torch(raw: &RawTorch) -> Check<TorchSection> {
    let p = FieldPath::root().key("torch");
    let path = |key: &str, value: &str| -> Check<String> {
        let chars = value.chars().count();
        if value.trim().is_empty() || chars > TORCH_PATH_CHARS_MAX {
            let msg = format!(
                "must be a path of 1 to {TORCH_PATH_CHARS_MAX} characters, not only spaces"
            );
            return Err(issue(&p.key(key), msg));
        }
        if value.contains('\0') {
            return Err(issue(&p.key(key), "must not hold a NUL character"));
        }
        Ok(value.to_owned())
    };
    let python = path("python", &required(&p.key("python"), &raw.python)?)?;
    let elastic_src = match &raw.elastic_src {
        Some(src) => Some(path("elastic_src", src)?),
        None => None,
    };
    Ok(TorchSection {
        python,
        elastic_src,
    })
}

/// `expect.rounds`: an exact count or a `{ min, max }` range, as (min, max).
fn expected_rounds(p: &FieldPath, raw: Option<RawRounds>) -> Check<Option<(u64, u64)>> {
    Ok(match raw {
        None => None,
        Some(RawRounds::Exact(n)) => Some((in_range(&p.key("rounds"), n, 0, ROUNDS_MAX)?, n)),
        Some(RawRounds::Range { min, max }) => {
            let min = in_range(&p.key("rounds").key("min"), min.unwrap_or(0), 0, ROUNDS_MAX)?;
            let max = in_range(
                &p.key("rounds").key("max"),
                max.unwrap_or(ROUNDS_MAX),
                0,
                ROUNDS_MAX,
            )?;
            if min > max {
                return Err(issue(
                    &p.key("rounds").key("min"),
                    format!("min ({min}) is greater than max ({max})"),
                ));
            }
            Some((min, max))
        }
    })
}

/// `[expect]`.
fn expect(raw: &Option<RawExpect>, total_nodes: u32) -> Check<Expect> {
    let Some(e) = raw else {
        return Ok(Expect::default());
    };
    let p = FieldPath::root().key("expect");
    let outcome = e.outcome;
    let rounds = expected_rounds(&p, e.rounds)?;
    let mut restarts = BTreeMap::new();
    for (name, count) in e.restarts.iter().flatten() {
        let at = p.key("restarts").key(name);
        let node = node_index(&at, name, total_nodes)?;
        restarts.insert(node, in_range(&at, *count, 0, EXPECT_RESTARTS_MAX)?);
    }
    let final_world_size = e
        .final_world_size
        .map(|w| in_range(&p.key("final_world_size"), w, 0, NODES_MAX))
        .transpose()?;
    let final_participants = match &e.final_participants {
        None => None,
        Some(names) => {
            let path = p.key("final_participants");
            let nodes = node_list(&path, names, total_nodes, "is listed twice")?;
            Some(nodes.into_iter().map(|(_, node)| node).collect())
        }
    };
    let violations = e.violations.clone().unwrap_or_default();
    list_len(
        &p.key("violations"),
        &violations,
        <Invariant as strum::VariantArray>::VARIANTS.len(),
    )?;
    let mut seen = BTreeSet::new();
    for (i, v) in violations.iter().enumerate() {
        let at = p.key("violations").index(i);
        if v.parse::<Invariant>().is_err() {
            return Err(issue(
                &at,
                format!(
                    "`{v}` is not an invariant (one of: {})",
                    Invariant::names().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        if !seen.insert(v.as_str()) {
            return Err(issue(&at, format!("`{v}` is listed twice")));
        }
    }
    Ok(Expect {
        outcome,
        rounds,
        restarts,
        final_world_size,
        final_participants,
        violations,
    })
}
