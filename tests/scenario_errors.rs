//! Every kind of scenario error names the file, line, column and field, with a sentence.

use trainsim::scenario::{self, parse, ScenarioError};

const FILE: &str = "scenarios/bad.toml";

/// Parses `text`, expecting an error; checks that its display has every part.
fn error(text: &str) -> ScenarioError {
    let e = parse(text, FILE).expect_err("the scenario should be refused");
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!("{FILE}:{}:{}: {}: ", e.line, e.column, e.field)),
        "{shown}"
    );
    assert!(e.line >= 1 && e.column >= 1, "{shown}");
    assert!(!e.field.is_empty() && !e.message.is_empty(), "{shown}");
    e
}

/// Asserts where an error points and that its message says `words`.
fn assert_at(e: &ScenarioError, line: usize, column: usize, field: &str, words: &str) {
    assert_eq!(
        (e.line, e.column, e.field.as_str()),
        (line, column, field),
        "{e}"
    );
    assert!(e.message.contains(words), "{e}");
}

#[test]
fn contract_syntax_error() {
    let e = error("name = \"bad\"\nseed = 1\n[cluster\nnodes = 2\n");
    assert_at(&e, 3, 9, "syntax", "invalid table header");
}

#[test]
fn contract_unknown_key_in_a_table() {
    let e = error("name = \"bad\"\nseed = 1\n[cluster]\nnodes = 2\ngpus = 3\n");
    assert_at(&e, 5, 1, "cluster.gpus", "unknown field `gpus`");
}

#[test]
fn contract_min_above_max() {
    let e = error("name = \"bad\"\nseed = 1\n[rendezvous]\nmin_nodes = 3\nmax_nodes = 2\n");
    assert_at(&e, 4, 13, "rendezvous.min_nodes", "greater than max_nodes");
}

#[test]
fn contract_unknown_node_in_a_fault() {
    let e = error(
        "name = \"bad\"\nseed = 1\n[[faults]]\nat = \"5s\"\nkind = \"kill\"\nnode = \"node-99\"\n",
    );
    assert_at(&e, 6, 8, "faults[0].node", "`node-99` is not a node");
}

#[test]
fn unknown_key_at_top_level() {
    let e = error("name = \"bad\"\nseeds = 1\n");
    assert_at(&e, 2, 1, "seeds", "unknown field `seeds`");
}

#[test]
fn unknown_key_in_a_fault() {
    let e = error(
        "name = \"x\"\n[[faults]]\nat = \"5s\"\nkind = \"kill\"\nnode = \"node-0\"\nnodes = 1\n",
    );
    assert_at(&e, 6, 1, "faults[0].nodes", "unknown field `nodes`");
}

#[test]
fn key_of_another_fault_kind() {
    let e = error(
        "name = \"x\"\n[[faults]]\nat = \"5s\"\nkind = \"kill\"\nnode = \"node-0\"\ngpu = 1\n",
    );
    assert_at(
        &e,
        6,
        7,
        "faults[0].gpu",
        "does not apply to a `kill` fault",
    );
}

#[test]
fn missing_fault_key_points_at_the_fault() {
    let e = error("name = \"x\"\n[[faults]]\nat = \"5s\"\nkind = \"kill\"\n");
    assert_at(&e, 2, 1, "faults[0]", "needs `node`");
}

#[test]
fn unknown_key_in_a_dist() {
    let e = error(
        "name = \"x\"\n[job.dataset]\ncomplexity = { dist = \"constant\", value = 1, mean = 2 }\n",
    );
    assert_at(
        &e,
        3,
        46,
        "job.dataset.complexity.mean",
        "unknown field `mean`",
    );
}

#[test]
fn wrong_type() {
    let e = error("name = \"x\"\n[cluster]\nnodes = \"two\"\n");
    assert_at(&e, 3, 9, "cluster.nodes", "invalid type");
    let e = error("name = \"x\"\n[job.sampler]\nshuffle = 1\n");
    assert_at(&e, 3, 11, "job.sampler.shuffle", "invalid type");
}

#[test]
fn fault_after_time_limit() {
    let e = error(
        "name = \"x\"\ntime_limit = \"1m\"\n[[faults]]\nat = \"2m\"\nkind = \"store_crash\"\n",
    );
    assert_at(&e, 4, 6, "faults[0].at", "not before time_limit");
}

#[test]
fn over_a_bound() {
    let e = error("name = \"x\"\n[cluster]\nnodes = 5000\n");
    assert_at(&e, 3, 9, "cluster.nodes", "at most 4096");
    let e = error("name = \"x\"\n[rendezvous]\ncas_backoff_max = \"25h\"\n");
    assert_at(&e, 3, 19, "rendezvous.cas_backoff_max", "at most");
    let e = error("name = \"x\"\n[rendezvous]\nread_timeout = \"0s\"\n");
    assert_at(&e, 3, 16, "rendezvous.read_timeout", "at least");
    let e = error("name = \"x\"\n[cluster]\ntcp_retries2 = 61\n");
    assert_at(&e, 3, 16, "cluster.tcp_retries2", "at most 60");
    let e = error("name = \"x\"\n[cluster]\nstore_cost_scale = 101.0\n");
    assert_at(&e, 3, 20, "cluster.store_cost_scale", "at most 100");
    let e = error("name = \"x\"\n[cluster]\nstore_cost_scale = -1.0\n");
    assert_at(&e, 3, 20, "cluster.store_cost_scale", "at least 0");
    let e = error("name = \"x\"\n[network]\nstore_host_bandwidth = \"0Gbps\"\n");
    assert_at(&e, 3, 24, "network.store_host_bandwidth", "at least");
    let e = error("name = \"x\"\n[network]\nstore_host_bandwidth = \"fast\"\n");
    assert_at(&e, 3, 24, "network.store_host_bandwidth", "");
    let e = error(
        "name = \"x\"\n[cluster]\nnodes = 3\n[expect]\nfinal_participants = [\"node-0\", \"node-9\"]\n",
    );
    assert_at(&e, 5, 33, "expect.final_participants[1]", "not a node");
    let e = error(
        "name = \"x\"\n[cluster]\nnodes = 3\n[expect]\nfinal_participants = [\"node-0\", \"node-0\"]\n",
    );
    assert_at(&e, 5, 33, "expect.final_participants[1]", "listed twice");
    let e = error("name = \"x\"\n[agent]\nstart_time = \"2h\"\n");
    assert_at(&e, 3, 14, "agent.start_time", "at most");
    let e = error("name = \"x\"\n[agent]\nstart_time_jitter = \"soon\"\n");
    assert_at(&e, 3, 21, "agent.start_time_jitter", "");
    let e = error("name = \"x\"\n[job]\nworker_start_time = \"-1s\"\n");
    assert_at(&e, 3, 21, "job.worker_start_time", "");
    let e = error("name = \"x\"\n[job]\nworker_start_jitter = \"61m\"\n");
    assert_at(&e, 3, 23, "job.worker_start_jitter", "at most");
    let e = error("name = \"x\"\ntime_limit = \"8d\"\n");
    assert_at(&e, 2, 14, "time_limit", "not a duration unit");
    let e = error("name = \"x\"\ntime_limit = \"200h\"\n");
    assert_at(&e, 2, 14, "time_limit", "at most 168h");
    let e = error("name = \"x\"\n[job]\nsteps = 99999999999\n");
    assert_at(&e, 3, 9, "job.steps", "at most 10000000");
}

#[test]
fn a_model_larger_than_the_gpu_memory_is_refused() {
    let e = error("name = \"x\"\n[job]\nmodel_size = \"100GiB\"\n");
    assert_at(
        &e,
        3,
        14,
        "job.model_size",
        "must fit in the memory of one `h100` GPU",
    );
}

#[test]
fn every_contract_v1_feature_is_built() {
    let gpu =
        "name = \"x\"\n[[faults]]\nat = \"1s\"\nkind = \"gpu_fail\"\nnode = \"node-0\"\ngpu = 0\n";
    assert!(scenario::parse(gpu, FILE).is_ok());
    let slow = "name = \"x\"\n[[faults]]\nat = \"1s\"\nkind = \"gpu_slow\"\nnode = \"node-0\"\ngpu = 0\nfactor = 2.0\nduration = \"1s\"\n";
    assert!(scenario::parse(slow, FILE).is_ok());
    // The reader pipeline is built: its section parses under the checked parse.
    assert!(scenario::parse("name = \"x\"\n\n[reader]\nworkers = 2\n", FILE).is_ok());
}

#[test]
fn bad_duration_strings() {
    let e = error("name = \"x\"\n[rendezvous]\njoin_timeout = \"10\"\n");
    assert_at(&e, 3, 16, "rendezvous.join_timeout", "has no unit");
    let e = error("name = \"x\"\n[agent]\nmonitor_interval = \"0.5us\"\n");
    assert_at(
        &e,
        3,
        20,
        "agent.monitor_interval",
        "whole number of microseconds",
    );
    let e = error("name = \"x\"\n[rendezvous]\nclose_timeout = \"0s\"\n");
    assert_at(&e, 3, 17, "rendezvous.close_timeout", "at least 1us");
    let e = error("name = \"x\"\n[network]\nlatency = [\"5ms\", \"1ms\"]\n");
    assert_at(&e, 3, 11, "network.latency", "above the maximum");
}

#[test]
fn bad_quantities_are_located_at_their_value() {
    let e = error("name = \"x\"\ntime_limit = 5\n");
    assert_at(&e, 2, 14, "time_limit", "expected a duration string");
    let e = error("name = \"x\"\n[cluster]\nnodes = 2\nclock_skew = { node-1 = \"2d\" }\n");
    assert_at(
        &e,
        4,
        25,
        "cluster.clock_skew.node-1",
        "`d` is not a duration unit",
    );
    let e = error("name = \"x\"\n[[faults]]\nat = \"1s\"\nkind = \"loss\"\nprobability = 0.5\nduration = \"1q\"\n");
    assert_at(&e, 6, 12, "faults[0].duration", "not a duration unit");
    let e = error("name = \"x\"\n[network]\nlatency = [\"1ms\", \"1GiB\"]\n");
    assert_at(
        &e,
        3,
        19,
        "network.latency[1]",
        "`GiB` is not a duration unit",
    );
    let e = error("name = \"x\"\n[job]\nmodel_size = \"0.5B\"\n");
    assert_at(&e, 3, 14, "job.model_size", "not a whole number of bytes");
    let e = error("name = \"x\"\n[network]\nbandwidth = \"0bps\"\n");
    assert_at(&e, 3, 13, "network.bandwidth", "at least 1bps (got 0bps)");
}

#[test]
fn missing_name() {
    assert_at(&error("seed = 1\n"), 1, 1, "name", "is required");
}

#[test]
fn node_rules() {
    let e = error("name = \"x\"\n[cluster]\nnodes = 2\nspare_nodes = 1\nstore = \"node-2\"\n");
    assert_at(&e, 5, 9, "cluster.store", "spare node");
    let start = "name = \"x\"\n[cluster]\nnodes = 2\n[[faults]]\nat = \"1s\"\nkind = \"start\"\nnode = \"node-1\"\n";
    assert_at(&error(start), 7, 8, "faults[0].node", "spare node");
    let restart = "name = \"x\"\n[cluster]\nspare_nodes = 1\n[[faults]]\nat = \"1s\"\nkind = \"restart\"\nnode = \"node-1\"\n";
    assert_at(
        &error(restart),
        7,
        8,
        "faults[0].node",
        "no earlier `start`",
    );
    let part = "name = \"x\"\n[cluster]\nnodes = 3\n[[faults]]\nat = \"1s\"\nkind = \"partition\"\ngroups = [[\"node-0\"], [\"node-1\", \"node-0\"]]\n";
    assert_at(
        &error(part),
        7,
        34,
        "faults[0].groups[1][1]",
        "more than one place",
    );
    let rank = "name = \"x\"\n[agent]\nnproc_per_node = 2\n[[faults]]\nat = \"1s\"\nkind = \"worker_crash\"\nnode = \"node-0\"\nlocal_rank = 2\n";
    assert_at(
        &error(rank),
        8,
        14,
        "faults[0].local_rank",
        "does not exist",
    );
    let e = error("name = \"x\"\n[expect]\nrestarts = { node-1 = 1 }\n");
    assert_at(&e, 3, 23, "expect.restarts.node-1", "not a node");
}

#[test]
fn expectations_and_fixes() {
    let e =
        error("name = \"x\"\n[expect]\nviolations = [\"job.progress\", \"rendezvous.agreemnt\"]\n");
    assert_at(&e, 3, 31, "expect.violations[1]", "not an invariant");
    let e = error("name = \"x\"\n[rendezvous]\nfixes = [\"keep_alive_race\"]\n");
    assert_at(&e, 3, 10, "rendezvous.fixes[0]", "not a known fix");
    let e = error(
        "name = \"x\"\n[agent]\nfixes = [\"shared-restart-count\", \"dead-participant-rejoin\"]\n",
    );
    assert_at(&e, 3, 34, "agent.fixes[1]", "not a known fix");
    assert!(e.message.contains("count-rejoined-failures"), "{e}");
    let e = error(
        "name = \"x\"\n[agent]\nfixes = [\"shared-restart-count\", \"shared-restart-count\"]\n",
    );
    assert_at(&e, 3, 34, "agent.fixes[1]", "listed twice");
    let e = error("name = \"x\"\n[expect]\nrounds = { min = 3, max = 1 }\n");
    assert_at(&e, 3, 18, "expect.rounds.min", "greater than max");
}

#[test]
fn missing_file_is_an_error() {
    let e = scenario::load(std::path::Path::new("/nonexistent/missing.toml")).unwrap_err();
    assert_eq!((e.line, e.file.as_str()), (0, "/nonexistent/missing.toml"));
    assert!(e.message.starts_with("cannot read"), "{e}");
}

#[test]
fn nccl_peer_exit_detection_is_located() {
    let job = |lines: &str| format!("name = \"x\"\n[job]\n{lines}");
    let e = error(&job("nccl_peer_exit_detection = \"soon\"\n"));
    assert_at(&e, 3, 28, "job.nccl_peer_exit_detection", "\"never\"");
    let e = error(&job("nccl_peer_exit_detection = \"25h\"\n"));
    assert_at(&e, 3, 28, "job.nccl_peer_exit_detection", "at most");
    let e = error(&job(
        "backend = \"gloo\"\nnccl_peer_exit_detection = \"1s\"\n",
    ));
    assert_at(
        &e,
        4,
        28,
        "job.nccl_peer_exit_detection",
        "applies only to backend",
    );
    let e = error(&job("nccl_peer_exit_detection = 5\n"));
    assert_at(&e, 3, 28, "job.nccl_peer_exit_detection", "string");
}

#[test]
fn collective_timeouts_default_per_backend() {
    let parsed = |text: &str| parse(text, FILE).expect("a valid scenario").job;
    let nccl = parsed("name = \"x\"\n");
    let us = trainsim::sim_time::SimDuration::from_us;
    assert_eq!(nccl.collective_timeout, us(600_000_000));
    assert_eq!(nccl.nccl_peer_exit_detection, Some(us(1_400_000)));
    let gloo = parsed("name = \"x\"\n[job]\nbackend = \"gloo\"\n");
    assert_eq!(gloo.collective_timeout, us(1_800_000_000));
    assert_eq!(gloo.nccl_peer_exit_detection, None);
    let never = parsed("name = \"x\"\n[job]\nnccl_peer_exit_detection = \"never\"\n");
    assert_eq!(never.nccl_peer_exit_detection, None);
}

#[test]
fn failures_need_a_rate() {
    let e = error("name = \"bad\"\n[failures]\nafter = \"replace\"\n");
    assert_eq!(e.field, "failures.rate_per_node_day", "{e}");
    assert!(e.message.contains("is required"), "{e}");
}

#[test]
fn failure_shares_must_add_up_to_one() {
    let e = error(
        "name = \"bad\"\n[failures]\nrate_per_node_day = 0.01\nkinds = { kill = 0.5, gpu_fail = 0.4 }\n",
    );
    assert_at(&e, 4, 9, "failures.kinds", "must add up to 1");
}

#[test]
fn an_unknown_failure_kind_is_named() {
    let e =
        error("name = \"bad\"\n[failures]\nrate_per_node_day = 0.01\nkinds = { meteor = 1.0 }\n");
    assert!(e.field.starts_with("failures.kinds"), "{e}");
    assert!(e.message.contains("meteor"), "{e}");
}

#[test]
fn a_failure_process_past_the_faults_bound_is_refused() {
    let e = error(
        "name = \"bad\"\ntime_limit = \"168h\"\n[cluster]\nnodes = 4096\n[rendezvous]\nmin_nodes = 1\nmax_nodes = 4096\n[failures]\nrate_per_node_day = 1.0\n",
    );
    assert_at(&e, 9, 21, "failures.rate_per_node_day", "may be expected");
}

#[test]
fn job_eval_needs_a_bounded_len() {
    let e = error("name = \"bad\"\nseed = 1\n[job.eval]\ndrop_last = true\n");
    assert_at(&e, 3, 1, "job.eval.len", "is required");
    let e = error("name = \"bad\"\nseed = 1\n[job.eval]\nlen = 0\n");
    assert_at(&e, 4, 7, "job.eval.len", "at least 1");
    let e = error("name = \"bad\"\nseed = 1\n[job.eval]\nlen = 99999999999\n");
    assert_at(&e, 4, 7, "job.eval.len", "at most");
    let e = error("name = \"bad\"\nseed = 1\n[job.eval]\nlen = 10\nshuffle = true\n");
    assert_at(&e, 5, 1, "job.eval.shuffle", "unknown field `shuffle`");
}

#[test]
fn job_set_epoch_names_a_known_pattern() {
    let e = error("name = \"bad\"\nseed = 1\n[job]\nset_epoch = \"sometimes\"\n");
    assert_eq!((e.line, e.field.as_str()), (4, "job.set_epoch"), "{e}");
    assert!(
        e.message.contains("start") && e.message.contains("late"),
        "{e}"
    );
}

#[test]
fn job_set_epoch_and_eval_round_trip() {
    let text = "name = \"ok\"\nseed = 1\n[job]\nset_epoch = \"late\"\n[job.eval]\nlen = 10\n";
    let s = parse(text, FILE).expect("a valid scenario");
    assert_eq!(s.job.set_epoch, scenario::model::SetEpoch::Late);
    let eval = s.job.eval.expect("an eval pass");
    assert_eq!((eval.len, eval.drop_last), (10, false));
    let again = parse(&scenario::to_toml(&s), FILE).expect("its TOML reads back");
    assert_eq!(again.job, s.job);
}

#[test]
fn job_init_method_and_script_master_port_are_located() {
    let e = error("name = \"bad\"\n[job]\ninit_method = \"file\"\n");
    assert_eq!((e.line, e.field.as_str()), (3, "job.init_method"), "{e}");
    assert!(
        e.message.contains("env") && e.message.contains("tcp"),
        "{e}"
    );
    let e = error("name = \"bad\"\n[job]\nscript_master_port = 40000\n");
    assert_at(&e, 3, 22, "job.script_master_port", "at most 32767");
    let e = error("name = \"bad\"\n[job]\nscript_master_port = 0\n");
    assert_at(&e, 3, 22, "job.script_master_port", "at least 1");
    let e = error("name = \"bad\"\n[job]\nscript_master_port = 29400\n");
    assert_at(
        &e,
        3,
        22,
        "job.script_master_port",
        "rendezvous store's port",
    );
    let text = "name = \"ok\"\n[job]\ninit_method = \"tcp\"\nscript_master_port = 12355\n";
    let s = parse(text, FILE).expect("a valid scenario");
    assert_eq!(s.job.init_method, scenario::model::InitMethod::Tcp);
    assert_eq!(s.job.script_master_port, Some(12355));
    let again = parse(&scenario::to_toml(&s), FILE).expect("its TOML reads back");
    assert_eq!(again.job, s.job);
}

/// A partition of a 16-node cluster with `groups` (one line, line 7).
fn partition(groups: &str) -> String {
    format!("name = \"x\"\n[cluster]\nnodes = 16\n[[faults]]\nat = \"1s\"\nkind = \"partition\"\ngroups = {groups}\n")
}

#[test]
fn node_ranges_expand_in_node_lists() {
    let s = parse(
        &partition("[[\"node-0..=node-7\"], [\"node-8\", \"node-9..=node-15\"]]"),
        FILE,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let trainsim::scenario::model::FaultKind::Partition { groups } = &s.faults[0].kind else {
        panic!("a partition: {:?}", s.faults[0]);
    };
    assert_eq!(
        groups,
        &vec![(0..=7).collect::<Vec<u32>>(), (8..=15).collect()]
    );
    let text = "name = \"x\"\n[cluster]\nnodes = 12\n[expect]\nfinal_participants = [\"node-0\", \"node-10..=node-11\", \"node-2..=node-3\"]\n";
    let s = parse(text, FILE).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.expect.final_participants, Some(vec![0, 10, 11, 2, 3]));
}

#[test]
fn bad_node_ranges_are_located_errors() {
    // Line 7 is `groups = [["node-0", "<entry>"]]`: the entry starts at column 22.
    let bad = |entry: &str| error(&partition(&format!("[[\"node-0\", \"{entry}\"]]")));
    let reversed = bad("node-15..=node-12");
    assert_at(&reversed, 7, 22, "faults[0].groups[0][1]", "reversed");
    let half_open = bad("node-1..node-4");
    assert_at(&half_open, 7, 22, "faults[0].groups[0][1]", "`..=`");
    let past_the_end = bad("node-12..=node-16");
    assert_at(
        &past_the_end,
        7,
        22,
        "faults[0].groups[0][1]",
        "reaches node-16, which is not a node of this cluster (it has node-0 .. node-15)",
    );
    let malformed = bad("node-1..=");
    assert_at(
        &malformed,
        7,
        22,
        "faults[0].groups[0][1]",
        "not a node name or range",
    );
    let overlapping = bad("node-0..=node-3");
    assert_at(
        &overlapping,
        7,
        22,
        "faults[0].groups[0][1]",
        "`node-0` (in `node-0..=node-3`) is in more than one place",
    );
    // Two groups whose ranges overlap: the second group's range is at column 33.
    let across = error(&partition(
        "[[\"node-0..=node-7\"], [\"node-7..=node-15\"]]",
    ));
    assert_at(
        &across,
        7,
        33,
        "faults[0].groups[1][0]",
        "`node-7` (in `node-7..=node-15`) is in more than one place",
    );
    let twice = "name = \"x\"\n[cluster]\nnodes = 4\n[expect]\nfinal_participants = [\"node-0..=node-2\", \"node-1\"]\n";
    assert_at(
        &error(twice),
        5,
        42,
        "expect.final_participants[1]",
        "`node-1` is listed twice",
    );
}

/// A `kind` fault on `node` in a 3-node cluster whose store is `store` (line 8).
fn aimed(kind: &str, node: &str, store: &str) -> String {
    format!("name = \"x\"\n[cluster]\nnodes = 3\nspare_nodes = 1\nstore = \"{store}\"\n[[faults]]\nat = \"1s\"\nkind = \"{kind}\"\nnode = \"{node}\"\n")
}

#[test]
fn a_fault_may_aim_at_a_role() {
    use trainsim::scenario::model::{FaultKind, NodeRole};
    let s = parse(&aimed("kill", "rank0", "node-0"), FILE).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.faults[0].role, Some(NodeRole::Rank0));
    assert_eq!(s.faults[0].kind.node(), None, "resolved only when it fires");
    assert!(matches!(s.faults[0].kind, FaultKind::Kill { .. }));
    let s = parse(&aimed("pause", "store_host", "node-2"), FILE).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.faults[0].role, Some(NodeRole::StoreHost));
    // The role is written back as the file spelled it.
    let back = trainsim::scenario::to_toml(&s);
    assert!(back.contains("node = \"store_host\""), "{back}");
    assert_eq!(parse(&back, FILE).unwrap_or_else(|e| panic!("{e}")), s);
}

#[test]
fn roles_that_name_no_node_are_located_errors() {
    let e = error(&aimed("kill", "store_host", "dedicated"));
    assert_at(
        &e,
        9,
        8,
        "faults[0].node",
        "no node of the cluster hosts it",
    );
    let e = error(&aimed("start", "rank0", "node-0"));
    assert_at(&e, 9, 8, "faults[0].node", "`start` brings up a spare node");
    let e = error(&aimed("kill", "leader", "node-0"));
    assert_at(&e, 9, 8, "faults[0].node", "or a role: rank0, store_host");
}
