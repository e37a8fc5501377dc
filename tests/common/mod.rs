//! Helpers the world-level tests share: custom agent programs over the real store.

use futures::FutureExt;
use std::future::Future;
use std::sync::Arc;
use trainsim::world::{AgentExit, NodeEnv, Programs};

/// Programs whose agent is `agent` and whose store is the real c10d store server.
pub fn programs<F, Fut>(agent: F) -> Programs
where
    F: Fn(NodeEnv) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = AgentExit> + Send + 'static,
{
    Programs {
        step_by_step: false,
        resolve_role: trainsim::world::no_roles(),
        agent: Arc::new(move |env| agent(env).boxed()),
        store: trainsim::runner::RunOptions::default().programs().store,
    }
}

/// The exit of a test program that ran to its end.
pub fn done() -> AgentExit {
    AgentExit {
        state: trainsim::trace::AgentState::Succeeded,
        reason: "test program finished".into(),
    }
}
