//! Runs one after another on one thread, a panicking run between them: the run context
//! leaves with each run, so the next starts from nothing of the last.

use super::*;
use crate::store::service::{StoreClient, READ_TIMEOUT};
use futures::FutureExt;

fn scenario() -> Scenario {
    let mut s = crate::scenario::default_scenario("reuse");
    s.cluster.nodes = 2;
    s.cluster.spare_nodes = 0;
    s.cluster.store = StoreHost::Dedicated;
    s.faults.clear();
    s
}

/// What each agent saw: its node index and the store incarnation its client reached.
type Seen = Arc<Mutex<Vec<(u32, Option<u64>)>>>;

/// Each agent adds to a counter and notes which store incarnation it reached; with
/// `panics`, node 1 then panics.
fn programs(panics: bool, seen: Seen, store_stats: crate::store::StoreStatsHandle) -> Programs {
    Programs {
        step_by_step: false,
        exact_control_plane: false,
        resolve_role: crate::world::no_roles(),
        agent: Arc::new(move |env| {
            let seen = Arc::clone(&seen);
            async move {
                let client = StoreClient::connect(env.store_addr(), READ_TIMEOUT)
                    .await
                    .expect("a client binds");
                client.add("joined", 1).await.expect("the store answers");
                let incarnation = client.incarnation().await;
                seen.lock().expect("seen").push((env.index, incarnation));
                if panics && env.index == 1 {
                    panic!("node-1 breaks mid-run");
                }
                time::sleep_us(1_000_000).await;
                AgentExit {
                    state: crate::trace::AgentState::Succeeded,
                    reason: "done".into(),
                }
            }
            .boxed()
        }),
        store: crate::runner::RunOptions::default()
            .programs_counting(store_stats)
            .store,
    }
}

#[test]
fn a_thread_runs_the_run_after_a_panicking_one_from_scratch() {
    let run = |panics: bool| {
        let seen: Seen = Arc::default();
        let store_stats = crate::store::StoreStatsHandle::default();
        let run = run_on_this_thread(
            scenario(),
            7,
            programs(panics, Arc::clone(&seen), Arc::clone(&store_stats)),
            1_000_000,
        );
        let seen = seen.lock().expect("seen").clone();
        let requests = store_stats.lock().expect("store stats").requests;
        (run, seen, requests)
    };
    let ((first, over), first_seen, first_requests) = run(false);
    assert!(!over);
    assert!(!context::is_installed());
    assert_eq!(first_requests, 2);
    assert!(first.stats.sim_events > 0);
    assert_eq!(first_seen.len(), 2);
    assert!(first_seen
        .iter()
        .all(|(_, incarnation)| *incarnation == Some(1)));
    let panicked = std::panic::catch_unwind(|| run(true));
    assert!(panicked.is_err(), "node-1's panic ends the run");
    assert!(
        !context::is_installed(),
        "the panic took the context off the thread"
    );
    let ((again, over), again_seen, again_requests) = run(false);
    assert!(!over);
    assert_eq!(again.trace, first.trace);
    assert_eq!(again.stats, first.stats);
    assert_eq!(again_seen, first_seen);
    assert_eq!(again_requests, first_requests);
}
