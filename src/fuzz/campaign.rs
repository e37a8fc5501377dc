//! A fuzz campaign: runs every case of a range over a thread pool, buckets findings by
//! signature, triages the first case of each signature, shrinks it when new, writes its repro,
//! and counts coverage situations. Case `i` draws from a generator seeded by (seed, i)
//! alone, and results are combined in case order, so the summary is the same for any
//! `--jobs` and on every machine. With a corpus, cases run in batches of [`BATCH`]: a
//! batch mutates the corpus as it stood after the batches before it.

use super::corpus;
use super::minimal::{self, Origin};
use super::signature::{self, judge, needed_faults, Signature};
use super::strategy::Case;
use super::summary::{empty_coverage, SignatureEntry, Summary};
use super::triage::{self, Known};
use super::{parallel, FuzzTarget};
use crate::mutant::Mutant;
use crate::scenario::model::TorchSection;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::PathBuf;

/// Cases per batch when a corpus feeds the campaign.
pub const BATCH: u64 = 64;

/// Most shrink steps for a signature's first case; a count, not a time, so the repro is
/// the same on every machine.
pub const CAMPAIGN_SHRINK_ITERS: u32 = 64;

/// What `--known` asks for, named as the summary records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum KnownMode {
    /// Known signatures are listed, labelled with their fix and issue.
    #[default]
    Report,
    /// Known signatures are left out of the summary (and not shrunk or written).
    Skip,
}

/// A campaign to run.
#[derive(Debug, Clone)]
pub struct Campaign {
    pub target: FuzzTarget,
    pub cases: Range<u64>,
    pub seed: u64,
    pub jobs: usize,
    pub mutant: Option<Mutant>,
    pub known: KnownMode,
    /// The corpus directory, when one is kept.
    pub corpus: Option<PathBuf>,
    /// Where repro files go (`DIR/repro/`).
    pub out: PathBuf,
    /// Write violations into `expect.violations` instead of leaving replay failing.
    pub as_known_bug: bool,
    /// The command line, for repro headers.
    pub command: String,
    /// The control plane every case runs on, as each case's `[torch]` table (absolute
    /// paths); `None` runs the Rust model. A case carries it in its scenario, so every
    /// rerun (reduction, triage, shrinking) and the repro file use the same torch.
    pub torch: Option<TorchSection>,
}

/// Progress so far, for a progress bar.
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    pub done: u64,
    pub failing: u64,
    pub signatures: u64,
    /// Signatures triaged (and shrunk) after every case ran.
    pub triaged: u64,
}

/// What one case did.
#[derive(Debug, Clone)]
struct CaseResult {
    index: u64,
    mutated: bool,
    situations: BTreeSet<usize>,
    /// The reduced case and its signature, when it is a finding.
    finding: Option<(Case, Signature)>,
}

fn proptest_config() -> Config {
    Config {
        failure_persistence: None,
        max_shrink_iters: CAMPAIGN_SHRINK_ITERS,
        max_shrink_time: 0,
        fork: false,
        timeout: 0,
        ..Config::default()
    }
}

/// The generator of case `index`: seeded by (seed, index) alone.
pub fn case_rng(seed: u64, index: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&index.to_le_bytes());
    bytes[16..24].copy_from_slice(b"fuzzcase");
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// Case `index`'s fresh draw, as a value tree that can shrink.
pub fn draw(target: FuzzTarget, seed: u64, index: u64) -> Box<dyn ValueTree<Value = Case>> {
    let mut runner = TestRunner::new_with_rng(proptest_config(), case_rng(seed, index));
    Box::new(
        target
            .strategy()
            .new_tree(&mut runner)
            .expect("the strategies reject nothing"),
    )
}

/// Case `index`: a mutant of a corpus case for a share of cases once the corpus has any,
/// else the fresh draw. Returns the case and whether it is a mutant.
fn case_at(c: &Campaign, corpus: &[Case], index: u64) -> (Case, bool) {
    let mut rng = corpus::mutation_rng(c.seed, index);
    let (num, den) = corpus::MUTATED_SHARE;
    if !corpus.is_empty() && rng.gen_ratio(num, den) {
        let parent = &corpus[rng.gen_range(0..corpus.len())];
        if let Some(m) = corpus::mutate(parent, &mut rng) {
            return (m, true);
        }
    }
    (draw(c.target, c.seed, index).current(), false)
}

fn run_case(c: &Campaign, corpus: &[Case], index: u64) -> CaseResult {
    let (case, mutated) = case_at(c, corpus, index);
    let case = on_plane(c, case);
    let mutant = c.mutant;
    let (verdict, trace) = judge(&case.scenario, case.seed, mutant);
    let situations = trace
        .as_ref()
        .map(|t| super::coverage::reached(&case.scenario, t))
        .unwrap_or_default();
    let finding = verdict.fails().then(|| {
        let (reduced, t) = needed_faults(&case, &verdict, mutant, trace);
        let sig = signature::signature(&reduced, &verdict, t.as_ref());
        (reduced, sig)
    });
    CaseResult {
        index,
        mutated,
        situations,
        finding,
    }
}

/// Runs the campaign; `progress` sees each finished case on the calling thread.
pub fn run(c: &Campaign, mut progress: impl FnMut(Progress)) -> Result<Summary, String> {
    let mut corpus_cases = match &c.corpus {
        Some(dir) => corpus::load(dir)?,
        None => Vec::new(),
    };
    let batch = if c.corpus.is_some() { BATCH } else { u64::MAX };
    let mut results: Vec<CaseResult> = Vec::new();
    let mut reached: BTreeSet<usize> = BTreeSet::new();
    let mut p = Progress::default();
    let mut seen_sigs: BTreeSet<Signature> = BTreeSet::new();
    let mut start = c.cases.start;
    while start < c.cases.end {
        let end = start.saturating_add(batch).min(c.cases.end);
        let indices: Vec<u64> = (start..end).collect();
        let snapshot = corpus_cases.clone();
        let batch_results = parallel::map(
            &indices,
            c.jobs,
            |&i| run_case(c, &snapshot, i),
            |r: &CaseResult| {
                p.done += 1;
                if let Some((_, s)) = &r.finding {
                    p.failing += 1;
                    seen_sigs.insert(s.clone());
                    p.signatures = seen_sigs.len() as u64;
                }
                progress(p);
            },
        );
        for r in &batch_results {
            if !r.situations.is_subset(&reached) {
                reached.extend(r.situations.iter().copied());
                if let Some(dir) = &c.corpus {
                    let (case, _) = case_at(c, &snapshot, r.index);
                    corpus::save(dir, c.seed, r.index, &case)
                        .map_err(|e| format!("cannot write to corpus {}: {e}", dir.display()))?;
                    corpus_cases.push(case);
                }
            }
        }
        results.extend(batch_results);
        start = end;
    }
    summarize(c, &results, |triaged| {
        p.triaged = triaged;
        progress(p);
    })
}

/// The failing cases of one signature: how many, and the first of them with only the
/// faults it needs.
struct Bucket {
    signature: Signature,
    cases: u64,
    first_case: u64,
    first_reduced: Case,
}

/// Buckets, triages, shrinks and writes; the coverage table.
fn summarize(
    c: &Campaign,
    results: &[CaseResult],
    mut progress: impl FnMut(u64),
) -> Result<Summary, String> {
    let mut buckets: BTreeMap<String, Bucket> = BTreeMap::new();
    for r in results {
        if let Some((reduced, sig)) = &r.finding {
            let bucket = buckets.entry(sig.key()).or_insert_with(|| Bucket {
                signature: sig.clone(),
                cases: 0,
                first_case: r.index,
                first_reduced: reduced.clone(),
            });
            bucket.cases += 1;
        }
    }
    let firsts: Vec<(String, Bucket)> = buckets.into_iter().collect();
    let mutated: BTreeSet<u64> = results
        .iter()
        .filter(|r| r.mutated)
        .map(|r| r.index)
        .collect();
    let mut triaged = 0;
    let entries = parallel::map(
        &firsts,
        c.jobs,
        |(key, b)| bucket(c, key, b, &mutated),
        |_| {
            triaged += 1;
            progress(triaged);
        },
    );
    let mut coverage = empty_coverage();
    for r in results {
        for &s in &r.situations {
            coverage[s].cases += 1;
        }
    }
    let mut summary = Summary {
        target: c.target.name().to_owned(),
        seed: c.seed,
        mutant: c.mutant.map(|m| m.name().to_owned()),
        known: <&str>::from(c.known).to_owned(),
        corpus: c.corpus.is_some(),
        cases_start: c.cases.start,
        cases_end: c.cases.end,
        failing_cases: results.iter().filter(|r| r.finding.is_some()).count() as u64,
        mutated_cases: mutated.len() as u64,
        skipped_known_cases: 0,
        signatures: Vec::new(),
        coverage,
        torch: c.torch.as_ref().map(|t| t.python.clone()),
        torch_elastic_src: c.torch.as_ref().and_then(|t| t.elastic_src.clone()),
    };
    for e in entries {
        let e = e?;
        if c.known == KnownMode::Skip && e.known.is_some() {
            summary.skipped_known_cases += e.count;
        } else {
            summary.signatures.push(e);
        }
    }
    Ok(summary)
}

/// One signature's entry: triage the first case's reduced form; unless skipped, shrink
/// the first case and write its repro.
fn bucket(
    c: &Campaign,
    key: &str,
    b: &Bucket,
    mutated: &BTreeSet<u64>,
) -> Result<SignatureEntry, String> {
    let (sig, count, first, reduced) = (&b.signature, &b.cases, &b.first_case, &b.first_reduced);
    let mutant = c.mutant;
    let (verdict, _) = judge(&reduced.scenario, reduced.seed, mutant);
    // With a mutant every counted violation is the mutant's (the case without it does not
    // violate it), so triage against torch's fixes would only blur the canary.
    let known = match mutant {
        Some(_) => None,
        None => triage::triage(reduced, &verdict, mutant),
    };
    let mut entry = SignatureEntry {
        signature: key.to_owned(),
        invariants: sig.invariants.clone(),
        faults: sig.faults.clone(),
        count: *count,
        first_case: *first,
        repro: None,
        status: if known.is_some() { "known" } else { "new" }.to_owned(),
        known: known.clone(),
        kinds: sig.kinds.clone(),
        first_cause: super::first_cause::first_cause(reduced, &verdict.counted, mutant),
    };
    if c.known == KnownMode::Skip && known.is_some() {
        return Ok(entry);
    }
    // A known signature's repro is its first case with only the faults it needs; a new
    // one's is shrunk further (a mutated case has no value tree to shrink).
    let shrunk = if known.is_some() || mutated.contains(first) {
        reduced.clone()
    } else {
        shrink(c, *first, sig)
    };
    // Shrinking keeps the violated invariants but may land on a known behaviour (a new
    // liveness finding shrinking to pytorch#111646): then the reduced first case is the
    // repro, so replay still shows what is new.
    let shrunk = match mutant {
        None if known.is_none() => {
            let (v, _) = judge(&shrunk.scenario, shrunk.seed, None);
            match triage::triage(&shrunk, &v, None) {
                Some(_) => reduced.clone(),
                None => shrunk,
            }
        }
        _ => shrunk,
    };
    let name = format!("fuzz-{}-seed{}-case{}.toml", c.target.name(), c.seed, first);
    let rel = format!("repro/{name}");
    write_repro(c, &shrunk, sig, *first, known.as_ref(), &rel)?;
    entry.repro = Some(rel);
    Ok(entry)
}

/// Shrinks case `index`'s fresh draw while it shows the signature's kinds of violation,
/// then drops the fault units it no longer needs.
pub fn shrink(c: &Campaign, index: u64, sig: &Signature) -> Case {
    let mutant = c.mutant;
    let fails = |case: &Case| judge(&case.scenario, case.seed, mutant).0.counted == sig.kinds;
    let mut tree = draw(c.target, c.seed, index);
    let mut best = on_plane(c, tree.current());
    let mut iters = 0;
    let mut more = tree.simplify();
    while more && iters < CAMPAIGN_SHRINK_ITERS {
        iters += 1;
        let candidate = on_plane(c, tree.current());
        if fails(&candidate) {
            best = candidate;
            more = tree.simplify();
        } else {
            more = tree.complicate();
        }
    }
    let (verdict, trace) = judge(&best.scenario, best.seed, mutant);
    if verdict.counted != sig.kinds {
        return best;
    }
    needed_faults(&best, &verdict, mutant, trace).0
}

/// `case` on the campaign's control plane: its `[torch]` table is the campaign's, whatever a
/// corpus file said, so a corpus serves torch and model campaigns alike.
fn on_plane(c: &Campaign, mut case: Case) -> Case {
    case.scenario.torch = c.torch.clone();
    case
}

fn write_repro(
    c: &Campaign,
    case: &Case,
    sig: &Signature,
    index: u64,
    known: Option<&Known>,
    rel: &str,
) -> Result<(), String> {
    let mut s = case.scenario.clone();
    // The repro replays on the torch that found it: `trainsim run FILE` alone suffices.
    s.torch = c.torch.clone();
    s.seed = case.seed;
    s.name = format!("fuzz {} seed {} case {}", c.target.name(), c.seed, index);
    s.description = String::new();
    if c.as_known_bug {
        let (verdict, _) = judge(&s, s.seed, c.mutant);
        s.expect.violations = verdict
            .all
            .into_iter()
            .filter(|n| n != signature::HARNESS)
            .collect();
    }
    let origin = Origin {
        command: c.command.clone(),
        campaign_seed: c.seed,
        case_index: index,
        signature: sig.key(),
        status: known.map_or_else(|| "new".to_owned(), Known::label),
        mutant: c.mutant.map(|m| m.name().to_owned()),
    };
    let path = c.out.join(rel);
    let text = minimal::repro_text(&s, &origin, &path.to_string_lossy());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot write to {}: {e}", dir.display()))?;
    }
    crate::files::write_atomically(&path, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Runs only the case loop (draw, judge, coverage, signature) of cases `cases` on `jobs`
/// threads, with no corpus and nothing written; returns how many cases failed. `trainsim
/// bench`'s fuzz line times it.
pub fn run_cases_only(target: FuzzTarget, seed: u64, cases: Range<u64>, jobs: usize) -> u64 {
    run_cases_on(target, seed, cases, jobs, None)
}

/// [`run_cases_only`] on a control plane: the model (`None`) or torch's own code.
pub fn run_cases_on(
    target: FuzzTarget,
    seed: u64,
    cases: Range<u64>,
    jobs: usize,
    torch: Option<TorchSection>,
) -> u64 {
    let c = Campaign {
        target,
        cases: cases.clone(),
        seed,
        jobs,
        mutant: None,
        known: KnownMode::Report,
        corpus: None,
        out: PathBuf::new(),
        as_known_bug: false,
        command: String::new(),
        torch,
    };
    let indices: Vec<u64> = cases.collect();
    let results = parallel::map(&indices, jobs, |&i| run_case(&c, &[], i), |_| {});
    results.iter().filter(|r| r.finding.is_some()).count() as u64
}
