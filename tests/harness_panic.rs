//! Harness failures: a panic inside the simulation, a run over `EVENTS_MAX` events and a run over its bound on simulator events come back as `HarnessError`s, and the test process lives on.

use futures::FutureExt;
use std::sync::Arc;
use trainsim::scenario::model::StoreHost;
use trainsim::trace::{EventKind, EVENTS_MAX};
use trainsim::world::time::sleep_us;
use trainsim::world::{AgentExit, HarnessError, Programs, StoreProgram};

fn scenario(nodes: u32) -> trainsim::scenario::Scenario {
    let mut s = trainsim::scenario::default_scenario("harness");
    s.cluster.nodes = nodes;
    s.cluster.spare_nodes = 0;
    s.cluster.store = StoreHost::Dedicated;
    s.faults.clear();
    s
}

fn store() -> StoreProgram {
    trainsim::runner::RunOptions::default().programs().store
}

fn ok_exit() -> AgentExit {
    AgentExit {
        state: trainsim::trace::AgentState::Succeeded,
        reason: "done".into(),
    }
}

/// Node 1 panics after a second of simulated time; node 0 would run on.
fn panicking() -> Programs {
    Programs {
        step_by_step: false,
        exact_control_plane: false,
        resolve_role: trainsim::world::no_roles(),
        agent: Arc::new(|env| {
            async move {
                if env.index == 1 {
                    sleep_us(1_000_000).await;
                    panic!(
                        "the agent on {} broke an invariant (pid {})",
                        env.name, env.pid
                    );
                }
                sleep_us(10_000_000).await;
                ok_exit()
            }
            .boxed()
        }),
        store: store(),
    }
}

#[test]
fn a_panicking_agent_is_a_harness_error_with_its_message() {
    let s = scenario(2);
    let err = trainsim::world::simulate(&s, 3, panicking()).expect_err("the panic ends the run");
    match &err {
        HarnessError::Panic(message) => {
            assert!(
                message.contains("the agent on node-1 broke an invariant"),
                "message: {message}"
            );
        }
        other => panic!("expected a panic, got {other:?}"),
    }
    assert!(
        err.to_string().starts_with("the simulation panicked: "),
        "{err}"
    );
    // The process (and the simulator) are still usable: a normal run afterwards works.
    let ok = Programs {
        step_by_step: false,
        exact_control_plane: false,
        resolve_role: trainsim::world::no_roles(),
        agent: Arc::new(|_env| async move { ok_exit() }.boxed()),
        store: store(),
    };
    let run = trainsim::world::simulate(&s, 3, ok).expect("a later run finishes");
    let (trace, end) = (run.trace, run.end);
    assert_eq!(end.outcome, trainsim::scenario::model::Outcome::Succeeded);
    assert_eq!(
        trace
            .events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::AgentExited { .. }))
            .count(),
        2
    );
}

#[test]
fn a_panicking_store_is_a_harness_error_too() {
    let s = scenario(1);
    let programs = Programs {
        step_by_step: false,
        exact_control_plane: false,
        resolve_role: trainsim::world::no_roles(),
        agent: Arc::new(|_env| {
            async move {
                sleep_us(5_000_000).await;
                ok_exit()
            }
            .boxed()
        }),
        store: Arc::new(|addr, _| async move { panic!("store at {addr} fell over") }.boxed()),
    };
    match trainsim::world::simulate(&s, 4, programs) {
        Err(HarnessError::Panic(message)) => {
            assert!(message.contains("fell over"), "message: {message}")
        }
        other => panic!("expected a panic, got {other:?}"),
    }
}

#[test]
fn more_than_events_max_events_is_an_error_not_an_oom() {
    let s = scenario(1);
    let programs = Programs {
        step_by_step: false,
        exact_control_plane: false,
        resolve_role: trainsim::world::no_roles(),
        agent: Arc::new(|env| {
            async move {
                // Each event is small; EVENTS_MAX + 10 of them take a few hundred MB at most,
                // and the recorder drops everything past the bound.
                for _ in 0..EVENTS_MAX + 10 {
                    env.record(EventKind::StoreStarted);
                }
                ok_exit()
            }
            .boxed()
        }),
        store: store(),
    };
    match trainsim::world::simulate(&s, 5, programs) {
        Err(HarnessError::EventsOverBound(bound)) => assert_eq!(bound, EVENTS_MAX),
        Err(other) => panic!("expected EventsOverBound, got {other}"),
        Ok(run) => panic!(
            "expected EventsOverBound, got a trace of {} events",
            run.trace.events.len()
        ),
    }
}

/// A run that would never end (an agent spinning on short sleeps for a simulated century)
/// stops at its bound on simulator events with an error that names the bound, and the next
/// run on the same process starts from a fresh count.
#[test]
fn more_than_the_sim_events_bound_is_an_error_not_a_hang() {
    let spinning = || Programs {
        step_by_step: false,
        exact_control_plane: false,
        resolve_role: trainsim::world::no_roles(),
        agent: Arc::new(|_env| {
            async move {
                loop {
                    sleep_us(1_000).await;
                }
            }
            .boxed()
        }),
        store: store(),
    };
    let s = scenario(2);
    match trainsim::world::simulate_bounded(&s, 6, spinning(), 5_000) {
        Err(HarnessError::SimEventsOverBound { max, .. }) => assert_eq!(max, 5_000),
        Err(other) => panic!("expected SimEventsOverBound, got {other}"),
        Ok(_) => panic!("expected SimEventsOverBound, got a finished run"),
    }
    let err = trainsim::world::simulate_bounded(&s, 6, spinning(), 5_000)
        .expect_err("the same bound stops the same run again");
    assert!(err.to_string().contains("5000 simulator events"), "{err}");
}
