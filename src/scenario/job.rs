//! Validation of `[job]` (with its dataset and sampler) and `[reader]`.

use super::limits::*;
use super::locate::FieldPath;
use super::model::{
    Backend, CheckKind, Complexity, Dataset, EvalConfig, JobConfig, ReaderSection, SamplerConfig,
    SamplerKind, NEVER,
};
use super::raw::{RawComplexity, RawEval, RawJob, RawReader, RawSampler};
use super::units::Duration;
use super::values::*;
use crate::fixes::ReaderFix;
use crate::sim_time::SimDuration;
use std::collections::BTreeSet;
use strum::VariantArray;

/// The keys each complexity `dist` takes besides `dist` itself.
pub const DIST_FIELDS: &[(&str, &[&str])] = &[
    ("constant", &["value"]),
    ("uniform", &["min", "max"]),
    ("lognormal", &["median", "sigma"]),
    ("list", &["values"]),
];

/// `[job]`.
pub fn job(raw: &Option<RawJob>) -> Check<JobConfig> {
    let p = FieldPath::root().key("job");
    let j = raw.clone().unwrap_or_default();
    let steps = in_range(&p.key("steps"), j.steps.unwrap_or(500), 1, STEPS_MAX)?;
    let step_time = duration_or(
        &p.key("step_time"),
        j.step_time,
        SimDuration::from_ms(200),
        1..=STEP_TIME_US_MAX,
    )?;
    let model_size_bytes = quantity_or(
        &p.key("model_size"),
        j.model_size,
        1 << 30,
        1..=MODEL_SIZE_BYTES_MAX,
    )?;
    let checkpoint_every = in_range(
        &p.key("checkpoint_every"),
        j.checkpoint_every.unwrap_or(50),
        1,
        STEPS_MAX,
    )?;
    let backend = j.backend.unwrap_or_default();
    let collective_timeout =
        collective_timeout(&p.key("collective_timeout"), j.collective_timeout, backend)?;
    let worker_start_time = phase_time(&p.key("worker_start_time"), j.worker_start_time)?;
    let worker_start_jitter = phase_time(&p.key("worker_start_jitter"), j.worker_start_jitter)?;
    let worker_exit_time = duration_or(
        &p.key("worker_exit_time"),
        j.worker_exit_time,
        WORKER_EXIT_TIME_DEFAULT,
        0..=STEP_TIME_US_MAX,
    )?;
    let checkpoint_save_time = phase_time(&p.key("checkpoint_save_time"), j.checkpoint_save_time)?;
    let checkpoint_load_time = phase_time(&p.key("checkpoint_load_time"), j.checkpoint_load_time)?;
    let nccl_peer_exit_detection = nccl_peer_exit_detection(
        &p.key("nccl_peer_exit_detection"),
        j.nccl_peer_exit_detection.as_deref(),
        backend,
    )?;
    let dataset = dataset(
        &p.key("dataset"),
        j.dataset.as_ref().map(|d| (d.len, &d.complexity)),
    )?;
    let sampler = sampler(&p.key("sampler"), &j.sampler.unwrap_or_default())?;
    let script_master_port =
        script_master_port(&p.key("script_master_port"), j.script_master_port)?;
    let eval = eval(&p.key("eval"), j.eval.as_ref())?;
    Ok(JobConfig {
        steps,
        step_time,
        model_size_bytes,
        checkpoint_every,
        collective_timeout,
        worker_start_time,
        worker_start_jitter,
        worker_exit_time,
        checkpoint_save_time,
        checkpoint_load_time,
        backend,
        nccl_peer_exit_detection,
        dataset,
        sampler,
        set_epoch: j.set_epoch.unwrap_or_default(),
        checkpoint_on_signal: j.checkpoint_on_signal,
        init_method: j.init_method.unwrap_or_default(),
        script_master_port,
        eval,
    })
}

/// `collective_timeout`: its default is the backend's own (NCCL's and Gloo's differ).
fn collective_timeout(
    p: &FieldPath,
    raw: Option<Duration>,
    backend: Backend,
) -> Check<SimDuration> {
    duration_or(
        p,
        raw,
        SimDuration::from_us(match backend {
            Backend::Nccl => COLLECTIVE_TIMEOUT_US_DEFAULT,
            Backend::Gloo => GLOO_COLLECTIVE_TIMEOUT_US_DEFAULT,
        }),
        1..=TIMEOUT_US_MAX,
    )
}

/// `job.script_master_port`: a port below the simulated hosts' ephemeral range (where
/// agents and rank-0 workers take free ports), and not the rendezvous store's.
fn script_master_port(p: &FieldPath, raw: Option<u64>) -> Check<Option<u16>> {
    let Some(port) = raw else {
        return Ok(None);
    };
    let port = in_range(p, port, 1, u64::from(SCRIPT_MASTER_PORT_MAX))?;
    if port == u64::from(RENDEZVOUS_STORE_PORT) {
        return Err(issue(
            p,
            format!("{port} is the rendezvous store's port (torchrun's --rdzv-endpoint)"),
        ));
    }
    Ok(Some(
        u16::try_from(port).expect("at most SCRIPT_MASTER_PORT_MAX"),
    ))
}

/// A worker's start or checkpoint phase: none by default, and no longer than a step may be.
fn phase_time(p: &FieldPath, raw: Option<Duration>) -> Check<SimDuration> {
    duration_or(p, raw, SimDuration::ZERO, 0..=STEP_TIME_US_MAX)
}

/// `[job.eval]`, when present: the evaluation set's size (required: there is no evaluation
/// set to assume) and its sampler's `drop_last`.
fn eval(p: &FieldPath, e: Option<&RawEval>) -> Check<Option<EvalConfig>> {
    let Some(e) = e else {
        return Ok(None);
    };
    let len = required(&p.key("len"), &e.len)?;
    let len = in_range(&p.key("len"), len, 1, DATASET_LEN_MAX)?;
    Ok(Some(EvalConfig {
        len,
        drop_last: e.drop_last.unwrap_or(false),
    }))
}

/// `job.nccl_peer_exit_detection`: a duration, or `"never"` (the watchdog's timeout decides);
/// NCCL's default when absent, and nothing to say for gloo.
fn nccl_peer_exit_detection(
    p: &FieldPath,
    text: Option<&str>,
    backend: Backend,
) -> Check<Option<SimDuration>> {
    let Some(text) = text else {
        let default = SimDuration::from_us(NCCL_PEER_EXIT_DETECTION_US_DEFAULT);
        return Ok((backend == Backend::Nccl).then_some(default));
    };
    if backend != Backend::Nccl {
        return Err(issue(
            p,
            "applies only to backend = \"nccl\" (gloo raises at once when a peer's \
             connection closes)",
        ));
    }
    if text.trim() == NEVER {
        return Ok(None);
    }
    let duration: Duration = text.parse().map_err(|e: String| {
        issue(
            p,
            format!("{e} (or \"{NEVER}\": wait for the collective timeout)"),
        )
    })?;
    duration_in(p, duration, 0..=TIMEOUT_US_MAX).map(Some)
}

fn dataset(p: &FieldPath, raw: Option<(Option<u64>, &Option<RawComplexity>)>) -> Check<Dataset> {
    let (len, complexity) = raw.unwrap_or((None, &None));
    let len = in_range(&p.key("len"), len.unwrap_or(100_000), 1, DATASET_LEN_MAX)?;
    let complexity = match complexity {
        Some(c) => self::complexity(&p.key("complexity"), c, len)?,
        None => Complexity::Constant { value: 1 },
    };
    Ok(Dataset { len, complexity })
}

/// The keys present in a raw complexity, in declaration order.
fn present_dist_keys(c: &RawComplexity) -> Vec<&'static str> {
    let flags = [
        ("value", c.value.is_some()),
        ("min", c.min.is_some()),
        ("max", c.max.is_some()),
        ("median", c.median.is_some()),
        ("sigma", c.sigma.is_some()),
        ("values", c.values.is_some()),
    ];
    flags
        .iter()
        .filter(|(_, on)| *on)
        .map(|(k, _)| *k)
        .collect()
}

fn complexity(p: &FieldPath, c: &RawComplexity, len: u64) -> Check<Complexity> {
    let dist = required(&p.key("dist"), &c.dist)?;
    let names: Vec<&str> = DIST_FIELDS.iter().map(|(d, _)| *d).collect();
    let Some((_, takes)) = DIST_FIELDS.iter().find(|(d, _)| *d == dist) else {
        let msg = format!(
            "`{dist}` is not a distribution (one of: {})",
            names.join(", ")
        );
        return Err(issue(&p.key("dist"), msg));
    };
    for key in present_dist_keys(c) {
        if !takes.contains(&key) {
            let msg = format!(
                "does not apply to dist = \"{dist}\" (it takes: {})",
                takes.join(", ")
            );
            return Err(issue(&p.key(key), msg));
        }
    }
    let need = |key: &str| issue(p, format!("dist = \"{dist}\" needs `{key}`"));
    let value = |path: &FieldPath, v: u64| in_range(path, v, 1, COMPLEXITY_MAX);
    match dist.as_str() {
        "constant" => Ok(Complexity::Constant {
            value: value(&p.key("value"), c.value.ok_or_else(|| need("value"))?)?,
        }),
        "uniform" => {
            let min = value(&p.key("min"), c.min.ok_or_else(|| need("min"))?)?;
            let max = value(&p.key("max"), c.max.ok_or_else(|| need("max"))?)?;
            if min > max {
                return Err(issue(
                    &p.key("min"),
                    format!("min ({min}) is greater than max ({max})"),
                ));
            }
            Ok(Complexity::Uniform { min, max })
        }
        "lognormal" => {
            let median = c.median.ok_or_else(|| need("median"))?;
            let median = float_in(
                &p.key("median"),
                median,
                f64::MIN_POSITIVE,
                COMPLEXITY_MAX as f64,
            )?;
            let sigma = float_in(
                &p.key("sigma"),
                c.sigma.ok_or_else(|| need("sigma"))?,
                0.0,
                COMPLEXITY_SIGMA_MAX,
            )?;
            Ok(Complexity::Lognormal { median, sigma })
        }
        _ => list(
            &p.key("values"),
            c.values.as_ref().ok_or_else(|| need("values"))?,
            len,
        ),
    }
}

/// A `dist = "list"`: one complexity per sample.
fn list(p: &FieldPath, values: &[u64], len: u64) -> Check<Complexity> {
    if len > COMPLEXITY_LIST_LEN_MAX {
        let msg = format!(
            "a list is limited to {COMPLEXITY_LIST_LEN_MAX} samples, but job.dataset.len is {len}"
        );
        return Err(issue(p, msg));
    }
    if values.len() as u64 != len {
        let msg = format!(
            "has {} values but job.dataset.len is {len}; a list gives one per sample",
            values.len()
        );
        return Err(issue(p, msg));
    }
    for (i, v) in values.iter().enumerate() {
        in_range(&p.index(i), *v, 1, COMPLEXITY_MAX)?;
    }
    Ok(Complexity::List {
        values: values.to_vec(),
    })
}

fn sampler(p: &FieldPath, s: &RawSampler) -> Check<SamplerConfig> {
    let kind = s.kind.unwrap_or(SamplerKind::Distributed);
    let random_level = probability(&p.key("random_level"), s.random_level.unwrap_or(0.0))?;
    if random_level != 0.0 && kind != SamplerKind::LoadBalancing {
        return Err(issue(
            &p.key("random_level"),
            "applies only to kind = \"load_balancing\"",
        ));
    }
    Ok(SamplerConfig {
        kind,
        shuffle: s.shuffle.unwrap_or(true),
        seed: s.seed.unwrap_or(0),
        drop_last: s.drop_last.unwrap_or(false),
        random_level,
        batch_size: in_range(
            &p.key("batch_size"),
            s.batch_size.unwrap_or(32),
            1,
            BATCH_SIZE_MAX,
        )?,
    })
}

/// `[reader]`'s shape: workers, files, records per file and the global batch.
fn reader_shape(p: &FieldPath, r: &RawReader) -> Check<(u32, u32, u64, u64)> {
    let workers = in_range(
        &p.key("workers"),
        r.workers.unwrap_or(4),
        1,
        READER_WORKERS_MAX,
    )?;
    let files = in_range(&p.key("files"), r.files.unwrap_or(12), 1, READER_FILES_MAX)?;
    if workers > files {
        // HugeCTR's `FileSource` refuses a worker that would have no file (from v3.4.1 on,
        // the version the model follows).
        let msg = format!("{workers} workers need at least as many files (files = {files})");
        return Err(issue(&p.key("workers"), msg));
    }
    let per_file = r.records_per_file.unwrap_or(740);
    let records_per_file = in_range(
        &p.key("records_per_file"),
        per_file,
        1,
        READER_RECORDS_PER_FILE_MAX,
    )?;
    if u64::from(files) * records_per_file > READER_RECORDS_MAX {
        let msg = format!("files × records_per_file must be at most {READER_RECORDS_MAX}");
        return Err(issue(&p.key("records_per_file"), msg));
    }
    let batch_size = in_range(
        &p.key("batch_size"),
        r.batch_size.unwrap_or(1024),
        1,
        BATCH_SIZE_MAX,
    )?;
    Ok((workers, files, records_per_file, batch_size))
}

/// `[reader]`, when present. A batch that does not split over every GPU is valid input:
/// HugeCTR's `DataReader` refuses it when the training script builds it, so the workers
/// fail (see `job::reader_feed`).
pub fn reader(raw: &Option<RawReader>) -> Check<Option<ReaderSection>> {
    let Some(r) = raw else { return Ok(None) };
    let p = FieldPath::root().key("reader");
    let (workers, files, records_per_file, batch_size) = reader_shape(&p, r)?;
    let broken = broken_files(
        &p.key("broken_files"),
        r.broken_files.as_deref().unwrap_or(&[]),
        files,
    )?;
    let corrupt = corrupt_records(
        &p.key("corrupt_records"),
        r.corrupt_records.as_deref().unwrap_or(&[]),
        files,
        records_per_file,
    )?;
    let truncated = truncated_files(
        &p.key("truncated_files"),
        r.truncated_files.as_deref().unwrap_or(&[]),
        files,
        records_per_file,
    )?;
    let check = r.check.unwrap_or(CheckKind::Sum);
    let repeat = r.repeat.unwrap_or(false);
    let parse_time = duration_or(
        &p.key("parse_time"),
        r.parse_time,
        SimDuration::from_us(READER_PARSE_TIME_US_DEFAULT),
        0..=READER_PARSE_TIME_US_MAX,
    )?;
    let record_size_bytes = quantity_or(
        &p.key("record_size"),
        r.record_size,
        READER_RECORD_SIZE_BYTES_DEFAULT,
        1..=READER_RECORD_SIZE_BYTES_MAX,
    )?;
    let fixes = reader_fixes(&p.key("fixes"), r.fixes.as_deref().unwrap_or(&[]))?;
    Ok(Some(ReaderSection {
        workers,
        files,
        records_per_file,
        batch_size,
        repeat,
        check,
        broken_files: broken,
        corrupt_records: corrupt,
        truncated_files: truncated,
        parse_time,
        record_size_bytes,
        fixes,
    }))
}

/// Default `reader.parse_time`: one microsecond per record and worker thread, the order of
/// a Criteo-style record's parse (a label, 13 dense floats, 26 sparse keys).
pub const READER_PARSE_TIME_US_DEFAULT: u64 = 1;

/// Default `reader.record_size`: a Criteo-style record as the collector copies it (label
/// and 13 dense floats, 26 slots of one 8-byte key with its 4-byte count).
pub const READER_RECORD_SIZE_BYTES_DEFAULT: u64 = 368;

/// `reader.fixes`: distinct names of the reader model's fixes, read in the file's order.
fn reader_fixes(path: &FieldPath, names: &[String]) -> Check<Vec<ReaderFix>> {
    let known = ReaderFix::VARIANTS;
    list_len(path, names, known.len())?;
    let mut seen = BTreeSet::new();
    let mut fixes = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let at = path.index(i);
        let Ok(fix) = name.parse::<ReaderFix>() else {
            let known: Vec<&str> = known.iter().map(|&f| f.into()).collect();
            let msg = format!(
                "`{name}` is not a known reader fix (known: {})",
                known.join(", ")
            );
            return Err(issue(&at, msg));
        };
        if !seen.insert(fix) {
            return Err(issue(&at, format!("`{name}` is listed twice")));
        }
        fixes.push(fix);
    }
    Ok(fixes)
}

/// `reader.broken_files`: existing files, each once.
fn broken_files(p: &FieldPath, broken: &[u32], files: u32) -> Check<Vec<u32>> {
    list_len(p, broken, files as usize)?;
    let mut seen = BTreeSet::new();
    for (i, f) in broken.iter().enumerate() {
        let at = p.index(i);
        if *f >= files {
            return Err(issue(
                &at,
                format!("file {f} does not exist (files are 0 .. {})", files - 1),
            ));
        }
        if !seen.insert(*f) {
            return Err(issue(&at, format!("file {f} is listed twice")));
        }
    }
    Ok(broken.to_vec())
}

/// `reader.truncated_files`: `[file, records on disk]` for existing files, each once, cut
/// no later than the file's end.
fn truncated_files(
    p: &FieldPath,
    truncated: &[(u32, u64)],
    files: u32,
    per_file: u64,
) -> Check<Vec<(u32, u64)>> {
    list_len(p, truncated, files as usize)?;
    let mut seen = BTreeSet::new();
    for (i, (f, kept)) in truncated.iter().enumerate() {
        let at = p.index(i);
        if *f >= files {
            let msg = format!("file {f} does not exist (files are 0 .. {})", files - 1);
            return Err(issue(&at, msg));
        }
        if *kept > per_file {
            let msg = format!("file {f} cannot keep {kept} records: it has {per_file}");
            return Err(issue(&at, msg));
        }
        if !seen.insert(*f) {
            return Err(issue(&at, format!("file {f} is listed twice")));
        }
    }
    Ok(truncated.to_vec())
}

/// `reader.corrupt_records`: existing `[file, record]` pairs, each once.
fn corrupt_records(
    p: &FieldPath,
    corrupt: &[(u32, u64)],
    files: u32,
    per_file: u64,
) -> Check<Vec<(u32, u64)>> {
    list_len(p, corrupt, READER_CORRUPT_RECORDS_MAX)?;
    let mut seen = BTreeSet::new();
    for (i, (f, rec)) in corrupt.iter().enumerate() {
        let at = p.index(i);
        if *f >= files || *rec >= per_file {
            let msg = format!(
                "[{f}, {rec}] is not a record (files 0 .. {}, records 0 .. {})",
                files - 1,
                per_file - 1
            );
            return Err(issue(&at, msg));
        }
        if !seen.insert((*f, *rec)) {
            return Err(issue(&at, format!("[{f}, {rec}] is listed twice")));
        }
    }
    Ok(corrupt.to_vec())
}
