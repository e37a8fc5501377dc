//! Tests of the `--explain` event log: what it tells, what it leaves out, and its bound.

use super::*;
use crate::check::testkit::*;
use crate::trace::AgentState;

#[test]
fn clock_reads_minutes_seconds_and_milliseconds() {
    assert_eq!(clock(SimInstant::from_us(0)), "00:00.000");
    assert_eq!(clock(SimInstant::from_us(62_923_237)), "01:02.923");
    assert_eq!(clock(SimInstant::from_us(3_599_999_999)), "59:59.999");
    assert_eq!(
        clock(SimInstant::from_us(3_600_000_000 + 61_500_000)),
        "1:01:01.500"
    );
}

#[test]
fn a_run_is_told_round_by_round_with_who_joined_and_left() {
    let mut events = round_zero(3);
    events.push(e(40, "node-2", fault("kill")));
    events.push(e(40, "node-2", killed(102)));
    events.push(e(45, "node-0", restart(100, false, 0)));
    for i in [0, 1] {
        events.push(e(
            50,
            &format!("node-{i}"),
            completed(100 + i, 1, i, &[0, 1]),
        ));
    }
    events.push(e(51, "node-3", started(103)));
    events.push(e(60, "node-0", checkpoint(100, 5)));
    events.push(e(60, "node-1", checkpoint(101, 5)));
    events.push(e(70, "node-0", exited(100, AgentState::Failed)));
    let lines = lines(&trace(events), 10);
    let told: Vec<&str> = lines.iter().map(String::as_str).collect();
    assert_eq!(
        told,
        vec![
            "00:00.000  node-0: agent process started (pid 100)",
            "00:00.000  node-1: agent process started (pid 101)",
            "00:00.000  node-2: agent process started (pid 102)",
            "00:02.000  rendezvous round 0 complete: world size 3 (node-0 node-1 node-2)",
            "00:40.000  node-2: fault kill: ",
            "00:40.000  node-2: agent process killed (SIGKILL or power loss)",
            "00:45.000  node-0: agent restarts its workers for a membership change (free): membership_change",
            "00:50.000  rendezvous round 1 complete: world size 2 (node-0 node-1); left: node-2",
            "00:51.000  node-3: agent process started (pid 103)",
            "01:00.000  checkpoint of step 5 written",
            "01:10.000  node-0: agent exited FAILED: test",
        ]
    );
}

#[test]
fn the_job_end_is_told_once_and_steps_are_left_out() {
    let lines = lines(&trace(happy_run(3, 10)), 10);
    let finished: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("training finished"))
        .collect();
    assert_eq!(finished.len(), 1, "{lines:#?}");
    assert!(finished[0].ends_with("training finished: step 10 of 10 done"));
    assert!(!lines.iter().any(|l| l.contains("step 3 ")), "{lines:#?}");
    let written = |l: &&String| l.contains("checkpoint of step") && l.ends_with(" written");
    assert_eq!(lines.iter().filter(written).count(), 2, "{lines:#?}");
    let fresh = lines
        .iter()
        .filter(|l| l.ends_with("training starts from step 0"))
        .count();
    assert_eq!(fresh, 3, "{lines:#?}");
}

#[test]
fn a_long_log_keeps_its_head_and_tail_and_says_where_the_rest_is() {
    let all: Vec<String> = (0..1_000).map(|i| format!("line {i}")).collect();
    let text = render(&all, "trainsim run x.toml --seed 1");
    let shown: Vec<&str> = text.lines().collect();
    assert_eq!(shown.len(), 1 + HEAD_LINES_MAX + 1 + TAIL_LINES_MAX);
    assert_eq!(shown[1], "  line 0");
    assert_eq!(shown.last(), Some(&"  line 999"));
    let skipped = 1_000 - HEAD_LINES_MAX - TAIL_LINES_MAX;
    assert_eq!(
        shown[1 + HEAD_LINES_MAX],
        format!(
            "  ... {skipped} more lines; every event is in the Perfetto trace: \
             trainsim run x.toml --seed 1 --trace run.json"
        )
    );
    let short = render(&all[..3], "r");
    assert_eq!(short, "what happened\n  line 0\n  line 1\n  line 2\n");
}

mod rendezvous {
    use super::super::*;
    use crate::trace::story::{
        ListSizes, Member, RendezvousAction as A, RendezvousLists, RendezvousOp as Op,
        RendezvousStep,
    };

    fn m(i: u32) -> Member {
        Member {
            node: NodeIndex(i),
            pid: 100 + i,
        }
    }

    /// What a step left: participants, wait list and redundancy list by node number.
    struct After<'a> {
        round: u64,
        complete: bool,
        lists: [&'a [u32]; 3],
    }

    fn step(at_ms: u64, who: u32, op: Op, action: A, after: After<'_>) -> RendezvousStep {
        let [participants, waiting, redundant] = after
            .lists
            .map(|l| l.iter().map(|&i| m(i)).collect::<Vec<_>>());
        let lists = RendezvousLists {
            participants,
            wait_list: waiting,
            redundancy_list: redundant,
        };
        RendezvousStep {
            at: SimInstant::from_us(at_ms * 1_000),
            node: NodeIndex(who),
            pid: 100 + who,
            op,
            action,
            store_incarnation: 1,
            round: after.round,
            complete: after.complete,
            closed: false,
            dropped: Vec::new(),
            sizes: lists.sizes(),
            lists: Some(lists),
        }
    }

    fn open(round: u64, lists: [&[u32]; 3]) -> After<'_> {
        After {
            round,
            complete: false,
            lists,
        }
    }

    fn done(round: u64, lists: [&[u32]; 3]) -> After<'_> {
        After {
            round,
            complete: true,
            lists,
        }
    }

    /// Two nodes at max_nodes = 2 restarting `rounds` times: in each round one node's
    /// workers fail first (the two take turns), it leaves and waits, the other leaves and
    /// opens the next round, and both join again.
    fn restart_loop(rounds: u64) -> Story {
        let mut steps = vec![
            step(
                10,
                0,
                Op::Join,
                A::AddToParticipants,
                open(0, [&[0], &[], &[]]),
            ),
            step(
                20,
                1,
                Op::Join,
                A::AddToParticipants,
                done(0, [&[0, 1], &[], &[]]),
            ),
        ];
        for r in 0..rounds {
            let t = 30_000 * (r + 1);
            let (first, second) = if r % 2 == 0 { (0, 1) } else { (1, 0) };
            steps.extend([
                step(
                    t,
                    first,
                    Op::Exit,
                    A::RemoveFromParticipants,
                    done(r, [&[second], &[], &[]]),
                ),
                step(
                    t + 5,
                    first,
                    Op::Join,
                    A::AddToWaitList,
                    done(r, [&[second], &[first], &[]]),
                ),
                step(
                    t + 400,
                    second,
                    Op::Exit,
                    A::RemoveFromParticipants,
                    open(r + 1, [&[], &[first], &[]]),
                ),
                step(
                    t + 405,
                    second,
                    Op::Join,
                    A::AddToParticipants,
                    open(r + 1, [&[second], &[first], &[]]),
                ),
                step(
                    t + 1_000,
                    first,
                    Op::Join,
                    A::AddToParticipants,
                    done(r + 1, [&[0, 1], &[], &[]]),
                ),
            ]);
        }
        Story::of_steps(steps)
    }

    #[test]
    fn a_restart_loop_of_a_hundred_rounds_reads_in_a_few_lines() {
        let lines = rendezvous_lines(&restart_loop(100));
        assert!(
            lines.len() <= 16,
            "{} lines:\n{}",
            lines.len(),
            lines.join("\n")
        );
        assert!(
            lines.contains(
                &"rounds 2-99 (98 rounds) went as round 1 did, until 50:00.005".to_owned()
            ),
            "{lines:#?}"
        );
        assert_eq!(
            lines[0],
            "round 0: participants node-0 node-1, marked complete at 00:00.020; waited: node-0"
        );
        assert_eq!(
            lines[1],
            "  00:00.010-00:00.020  node-0 node-1: ADD_TO_PARTICIPANTS (join), round complete"
        );
        assert!(
            lines.contains(
                &"  00:30.400  node-1: REMOVE_FROM_PARTICIPANTS (exit), round 1 opens".to_owned()
            ),
            "{lines:#?}"
        );
        // A short loop is told round by round.
        let short = rendezvous_lines(&restart_loop(2));
        let rounds = short.iter().filter(|l| l.starts_with("round ")).count();
        assert_eq!(rounds, 3, "{short:#?}");
        assert!(
            !short.iter().any(|l| l.contains("went as round")),
            "{short:#?}"
        );
    }

    #[test]
    fn a_node_beyond_max_nodes_is_told_as_redundant() {
        let full: &[u32] = &[1, 2, 3];
        let story = Story::of_steps(vec![
            step(
                100,
                1,
                Op::Join,
                A::AddToParticipants,
                open(0, [&[1], &[], &[]]),
            ),
            step(
                150,
                3,
                Op::Join,
                A::AddToParticipants,
                open(0, [&[1, 3], &[], &[]]),
            ),
            step(
                200,
                2,
                Op::Join,
                A::AddToParticipants,
                done(0, [full, &[], &[]]),
            ),
            step(
                250,
                0,
                Op::Join,
                A::AddToRedundancyList,
                done(0, [full, &[], &[0]]),
            ),
            step(260, 1, Op::Join, A::Finish, done(0, [full, &[], &[0]])),
        ]);
        let lines = rendezvous_lines(&story);
        assert_eq!(
            lines,
            [
                "round 0: participants node-1 node-2 node-3, marked complete at 00:00.200; redundant: node-0",
                "  00:00.100-00:00.200  node-1 node-3 node-2: ADD_TO_PARTICIPANTS (join), round complete",
                "  00:00.250  node-0: ADD_TO_REDUNDANCY_LIST (join)",
            ]
        );
        assert!(rendezvous_lines(&Story::default()).is_empty());
    }

    #[test]
    fn expired_nodes_and_old_processes_are_named() {
        let mut leave = step(
            5_000,
            1,
            Op::KeepAlive,
            A::KeepAlive,
            open(1, [&[], &[], &[]]),
        );
        leave.dropped = vec![
            m(0),
            Member {
                node: NodeIndex(0),
                pid: 7,
            },
        ];
        leave.lists = None;
        leave.sizes = ListSizes::default();
        let story = Story::of_steps(vec![
            step(
                10,
                0,
                Op::Join,
                A::AddToParticipants,
                done(0, [&[0], &[], &[]]),
            ),
            leave,
        ]);
        let lines = rendezvous_lines(&story);
        assert_eq!(
            lines[3],
            "  00:05.000  node-1: KEEP_ALIVE (keep_alive), round 1 opens, removed node-0 (pid 100) \
             node-0 (pid 7) (heartbeat expired)",
            "{lines:#?}"
        );
        assert!(
            lines[2].contains("heartbeat expired: node-0 (pid 100) node-0 (pid 7)"),
            "{lines:#?}"
        );
    }
}

#[test]
fn a_busy_round_is_told_by_kind_on_each_side_of_its_completion() {
    use crate::trace::story::{
        Member, RendezvousAction as A, RendezvousLists, RendezvousOp as Op, RendezvousStep,
    };
    let step = |at_ms: u64, who: u32, op: Op, action: A, complete: bool| RendezvousStep {
        at: SimInstant::from_us(at_ms * 1_000),
        node: NodeIndex(who),
        pid: who,
        op,
        action,
        store_incarnation: 1,
        round: 0,
        complete,
        closed: false,
        dropped: Vec::new(),
        sizes: Default::default(),
        lists: Some(RendezvousLists {
            participants: vec![Member {
                node: NodeIndex(who),
                pid: who,
            }],
            ..Default::default()
        }),
    };
    let mut steps = Vec::new();
    for i in 0..10 {
        steps.push(step(i, i as u32, Op::Join, A::AddToParticipants, false));
        steps.push(step(
            i,
            i as u32,
            Op::Exit,
            A::RemoveFromParticipants,
            false,
        ));
    }
    steps.push(step(20, 1, Op::Join, A::MarkRendezvousComplete, true));
    for i in 0..10 {
        steps.push(step(
            30 + i,
            i as u32,
            Op::Exit,
            A::RemoveFromParticipants,
            true,
        ));
        steps.push(step(30 + i, i as u32, Op::Join, A::AddToWaitList, true));
    }
    let lines = rendezvous_lines(&Story::of_steps(steps));
    let told: Vec<&str> = lines
        .iter()
        .skip(1)
        .map(|l| l.split(": ").nth(1).unwrap_or(""))
        .collect();
    assert_eq!(
        told,
        [
            "ADD_TO_PARTICIPANTS (join)",
            "REMOVE_FROM_PARTICIPANTS (exit)",
            "MARK_RENDEZVOUS_COMPLETE (join), round complete",
            "REMOVE_FROM_PARTICIPANTS (exit)",
            "ADD_TO_WAIT_LIST (join)",
        ],
        "{lines:#?}"
    );
    assert!(
        lines[4].starts_with("  00:00.030-00:00.039  node-0 node-1"),
        "{lines:#?}"
    );
}
