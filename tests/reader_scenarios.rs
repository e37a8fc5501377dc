//! The reader scenarios end to end: the batch-size sequences node-0's collector hands out
//! match what HugeCTR's code yields (worked out in tests/reader_model.rs), each quirk
//! violates its invariant or fails the job and its fix removes it, and the double-publish
//! canary replays.

use trainsim::report::Report;
use trainsim::runner::{Run, RunOptions};
use trainsim::trace::EventKind;

fn run(file: &str) -> Report {
    let scenario = trainsim::scenario::load(std::path::Path::new(file)).expect("scenario loads");
    Run::of(&scenario, file)
        .report()
        .expect("the harness runs it")
}

fn seq(parts: &[(u64, usize)]) -> Vec<u64> {
    parts
        .iter()
        .flat_map(|&(size, n)| std::iter::repeat_n(size, n))
        .collect()
}

fn epoch_sizes(report: &Report, epoch: usize) -> Vec<u64> {
    report.reader.as_ref().expect("a reader section").epochs[epoch]
        .batch_sizes
        .clone()
}

fn status(report: &Report, name: &str) -> String {
    let result = report.invariants.iter().find(|i| i.name == name).unwrap();
    result.status.as_str().to_owned()
}

#[test]
fn hugectrs_unit_test_case_gives_23_batches_of_32_then_4_each_epoch() {
    let report = run("scenarios/reader_hugectr_unit_case.toml");
    assert!(report.passed(), "{}", report.to_text());
    assert_eq!(epoch_sizes(&report, 0), seq(&[(32, 23), (4, 1)]));
    // The next epoch, after set_source, starts the same sequence again.
    assert!(epoch_sizes(&report, 1).iter().all(|&s| s == 32));
    let reader = report.reader.as_ref().unwrap();
    assert_eq!(reader.epochs[0].records_delivered, 740);
    // Parsing and copying the first batch is not hidden behind any compute.
    assert!(reader.stall_us > 0);
    assert_eq!(status(&report, "reader.exactly_once"), "held");
}

#[test]
fn three_workers_give_hugectrs_round_robin_sequence() {
    let report = run("scenarios/reader_workers_not_dividing.toml");
    assert!(report.passed(), "{}", report.to_text());
    assert_eq!(
        epoch_sizes(&report, 0),
        seq(&[(32, 19), (30, 2), (32, 2), (8, 1)])
    );
}

#[test]
fn each_quirk_violates_its_invariant_and_its_fix_removes_it() {
    for (quirk, fixed, invariant) in [
        (
            "reader_train_drops_incomplete",
            "reader_hugectr_unit_case",
            "reader.exactly_once",
        ),
        (
            "reader_broken_read",
            "reader_broken_read_fixed",
            "reader.exactly_once",
        ),
        (
            "reader_worker_dies",
            "reader_worker_dies_fixed",
            "reader.terminates",
        ),
    ] {
        let q = run(&format!("scenarios/{quirk}.toml"));
        let f = run(&format!("scenarios/{fixed}.toml"));
        assert!(q.passed() && f.passed(), "{}\n{}", q.to_text(), f.to_text());
        assert_eq!(status(&q, invariant), "violated", "{quirk}");
        assert_eq!(status(&f, invariant), "held", "{fixed}");
    }
    // The broken read loses exactly file 4's last record: 740 - 34 cut - 1 lost.
    let q = run("scenarios/reader_broken_read.toml");
    assert_eq!(epoch_sizes(&q, 0), seq(&[(32, 22), (1, 1)]));
    let f = run("scenarios/reader_broken_read_fixed.toml");
    assert_eq!(epoch_sizes(&f, 0), seq(&[(32, 22), (2, 1)]));
}

#[test]
fn a_refused_set_source_fails_the_worker_until_the_restarts_are_spent() {
    let q = run("scenarios/reader_empty_batch_collides.toml");
    assert!(q.passed(), "{}", q.to_text());
    assert_eq!(q.outcome, "failed");
    let agent = &q.agents[0];
    assert_eq!((agent.restarts, agent.final_state.as_str()), (2, "FAILED"));
    assert!(
        agent.exit_reason.contains("IllegalCall"),
        "{}",
        agent.exit_reason
    );
    // Every group read its two full batches before set_source threw; nothing hung.
    assert_eq!(q.job.steps_done, 2);
    // Three processes (the first and two restarts) each exit with 1 on the exception.
    let file = "scenarios/reader_empty_batch_collides.toml";
    let scenario = trainsim::scenario::load(std::path::Path::new(file)).unwrap();
    let (_, trace) = Run::of(&scenario, file).traced().unwrap();
    let exits: Vec<i32> = trace
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::WorkerFailed {
                exit_code, reason, ..
            } if reason.contains("IllegalCall") => Some(*exit_code),
            _ => None,
        })
        .collect();
    assert_eq!(exits, vec![1, 1, 1]);
    assert_eq!(status(&q, "reader.terminates"), "held");
    let f = run("scenarios/reader_empty_batch_collides_fixed.toml");
    assert!(f.passed(), "{}", f.to_text());
    assert_eq!(f.outcome, "succeeded");
    assert_eq!(f.agents[0].restarts, 0);
}

#[test]
fn the_double_publish_mutant_is_caught_by_exactly_once() {
    let file = "scenarios/reader_workers_not_dividing.toml";
    let scenario = trainsim::scenario::load(std::path::Path::new(file)).unwrap();
    let options = RunOptions::with_mutants(&["reader-double-publish"]).unwrap();
    let report = Run::of(&scenario, file).options(options).report().unwrap();
    assert_eq!(status(&report, "reader.exactly_once"), "violated");
    assert!(report.repro.ends_with("--mutant reader-double-publish"));
}

/// A global batch that does not split over every GPU of every node is a valid scenario, and
/// HugeCTR's `DataReader` refuses it when the training script builds it: every worker group
/// fails at once, before a step, and the job fails.
#[test]
fn a_batch_that_does_not_split_over_every_gpu_fails_the_workers() {
    let text = |batch: u32| {
        format!(
            "name = \"r\"\ntime_limit = \"10m\"\n[cluster]\nnodes = 2\ngpus_per_node = 4\n\
             [rendezvous]\nmin_nodes = 2\nmax_nodes = 2\n[job]\nsteps = 20\n\
             [reader]\nworkers = 2\nbatch_size = {batch}\n"
        )
    };
    // 12 splits over the 2 nodes but not over their 8 GPUs.
    let bad = trainsim::scenario::parse(&text(12), "r.toml").expect("valid input");
    let report = Run::of(&bad, "r.toml")
        .seed(1)
        .report()
        .expect("the harness runs it");
    assert_eq!(report.outcome, "failed");
    assert_eq!(report.job.steps_done, 0);
    for agent in &report.agents {
        assert!(
            agent
                .exit_reason
                .contains("batch_size 12 does not split evenly over the 8 GPUs"),
            "{}",
            agent.exit_reason
        );
    }
    let good = trainsim::scenario::parse(&text(24), "r.toml").expect("valid input");
    let report = Run::of(&good, "r.toml")
        .seed(1)
        .report()
        .expect("the harness runs it");
    assert_eq!(report.job.steps_done, 20, "{:?}", report.agents);
}

#[test]
fn in_repeat_mode_a_worker_given_up_under_the_fix_leaves_the_trainer_waiting() {
    // The only reader worker's only file cannot be opened; with `worker-failure-is-end-of-data`
    // it sends its end marker. Repeat mode calls no `set_source`: the trainer asks for the
    // next batch, which never comes.
    let text = r#"
        name = "repeat mode, the only worker given up"
        seed = 1
        time_limit = "5m"
        [cluster]
        gpus_per_node = 1
        [agent]
        nproc_per_node = 1
        [job]
        steps = 10
        step_time = "10ms"
        [reader]
        batch_size = 1
        files = 1
        records_per_file = 1
        workers = 1
        broken_files = [0]
        repeat = true
        fixes = ["worker-failure-is-end-of-data"]
    "#;
    let scenario = trainsim::scenario::parse(text, "repeat.toml").expect("the scenario is valid");
    let report = Run::of(&scenario, "repeat.toml")
        .report()
        .expect("the harness runs it");
    assert_eq!(status(&report, "reader.terminates"), "violated");
    let violation = &report
        .invariants
        .iter()
        .find(|i| i.name == "reader.terminates")
        .unwrap()
        .violations[0]
        .message;
    assert!(
        violation.contains("the trainer waits for the broadcast buffer"),
        "{violation}"
    );
}
