//! The worker processes alive on each node, as the world sees them: a group is registered
//! when its agent starts it and forgotten when it ends, is stopped, or dies with its node.
//!
//! Workers normally live inside their agent's lifetime. One case outlives it: a signal
//! torchrun has no handler for (SIGUSR1, SIGUSR2) ends the agent by its default action,
//! while its workers, each started in a session of its own, never see the signal and train
//! on with parent pid 1. Those orphans keep the run going until they exit by themselves,
//! die with their node, or a relaunched torchrun's container restart ends them.

use super::{spawn, time, NodeEnv};
use crate::trace::EventKind;
use madsim::task::AbortHandle;
use std::collections::BTreeMap;
use std::future::Future;

/// One node's running worker group: the agent process that started it, and the handle
/// that ends its task when the node's processes are torn down from outside.
struct LiveGroup {
    pid: u32,
    abort: AbortHandle,
}

/// The running worker groups, at most one per node.
#[derive(Default)]
pub struct LiveWorkers {
    by_node: BTreeMap<u32, LiveGroup>,
}

impl LiveWorkers {
    /// Whether no worker group runs anywhere.
    pub fn is_empty(&self) -> bool {
        self.by_node.is_empty()
    }

    /// Whether a worker group runs on `node`.
    pub fn runs_on(&self, node: u32) -> bool {
        self.by_node.contains_key(&node)
    }

    /// The group of agent `pid` on `node` is gone; returns it if it was still registered.
    fn forget(&mut self, node: u32, pid: u32) -> Option<LiveGroup> {
        let ours = self.by_node.get(&node).is_some_and(|g| g.pid == pid);
        ours.then(|| self.by_node.remove(&node)).flatten()
    }

    /// The node's processes were killed: whatever group ran there died with them; returns
    /// the pid of the agent that started it.
    pub fn killed_with_node(&mut self, node: u32) -> Option<u32> {
        self.by_node.remove(&node).map(|group| group.pid)
    }

    /// Takes the group on `node` that outlived its agent, when agent `running_pid` starts
    /// there: the orphans a new process's launch ends.
    fn take_orphans(&mut self, node: u32, running_pid: u32) -> Option<LiveGroup> {
        let orphaned = self
            .by_node
            .get(&node)
            .is_some_and(|g| g.pid != running_pid);
        orphaned.then(|| self.by_node.remove(&node)).flatten()
    }
}

impl NodeEnv {
    /// Starts this agent's worker group as a task of its own and registers it, until it
    /// ends by itself or the agent ends it (`end_workers`).
    pub fn spawn_workers<F>(&self, group: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let env = self.clone();
        let task = spawn(async move {
            group.await;
            env.workers_exited();
        });
        let mut st = self.world().state.lock().expect("world lock");
        let live = LiveGroup {
            pid: self.pid,
            abort: task.abort_handle(),
        };
        if let Some(old) = st.workers.by_node.insert(self.index, live) {
            // Only a relaunch may start a group beside an old one, and it ends the old one
            // at its launch (`end_orphans`).
            panic!(
                "pid {} starts workers on node {} while those of pid {} run there",
                self.pid, self.index, old.pid
            );
        }
    }

    /// The agent ends its workers (a signal, `_stop_workers`, its own exit): their task is
    /// gone, and, as they died on a live host, their connections closed.
    pub fn end_workers(&self) {
        let mut st = self.world().state.lock().expect("world lock");
        if let Some(group) = st.workers.forget(self.index, self.pid) {
            group.abort.abort();
        }
        st.withdraw(self.index, true);
    }

    /// The group's task ended by itself (its processes exited and left their collectives
    /// on the way out). An orphaned group's end is nobody's to see: it is recorded here,
    /// and the run may now be over.
    fn workers_exited(&self) {
        let orphaned = {
            let mut st = self.world().state.lock().expect("world lock");
            let registered = st.workers.forget(self.index, self.pid).is_some();
            registered && self.process_mut(&mut st).is_none()
        };
        if orphaned {
            self.record(EventKind::WorkersStopped {
                pid: self.pid,
                reason: "orphaned (their agent was gone), they exited by themselves".into(),
            });
            let _ = self.world().exits.unbounded_send(());
        }
    }

    /// A new agent process launches on this node: a container restart (a relaunch) ends
    /// every process left in it, the orphans of an agent a signal ended included.
    pub(super) fn end_orphans(&self) {
        let orphans = {
            let mut st = self.world().state.lock().expect("world lock");
            let orphans = st.workers.take_orphans(self.index, self.pid);
            if orphans.is_some() {
                st.withdraw(self.index, true);
            }
            orphans
        };
        let Some(orphans) = orphans else {
            return;
        };
        orphans.abort.abort();
        self.world().recorder.record(
            time::now_whole_us(),
            Some(self.trace_node()),
            EventKind::WorkersStopped {
                pid: orphans.pid,
                reason: "orphaned, they died when torchrun's relaunch restarted the container"
                    .into(),
            },
        );
    }
}
