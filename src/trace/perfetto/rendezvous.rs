//! The run's story in the Perfetto export: each rendezvous step as an instant on its node's
//! `rendezvous` thread, named by torch's `_Action`, the lists after it as args; and on the
//! `cluster` process a counter of the wait list's and the redundancy list's lengths.

use super::{instant, tid, Export, CLUSTER_PID};
use crate::sim_time::SimInstant;
use crate::trace::story::{names_shown, ListSizes, Member, RendezvousStep, Story};
use crate::trace::TraceNode;
use serde_json::{json, Map, Value};

/// The thread slot of a node's rendezvous steps.
pub(super) const RENDEZVOUS: u64 = 5;
/// The thread slot of the cluster's list-length counter.
pub(super) const LISTS: u64 = 2;
/// Names an instant's list arg shows; a longer list ends `and N more`.
const LISTED_MAX: usize = 32;

/// A list as the args show it: node names, a node listed with two processes with its pid.
fn listed(members: &[Member]) -> String {
    let (shown, more) = names_shown(members, LISTED_MAX, |m| format!("{}/pid {}", m.node, m.pid));
    match more {
        0 => shown.join(" "),
        more => format!("{} and {more} more", shown.join(" ")),
    }
}

/// A step's args: its op, round and flags, the list sizes, and the lists when kept.
fn args(step: &RendezvousStep) -> Value {
    let mut args = Map::new();
    let sizes = step.sizes;
    args.insert("op".to_owned(), json!(step.op.name()));
    args.insert("pid".to_owned(), json!(step.pid));
    args.insert("round".to_owned(), json!(step.round));
    args.insert(
        "store_incarnation".to_owned(),
        json!(step.store_incarnation),
    );
    args.insert("complete".to_owned(), json!(step.complete));
    args.insert("closed".to_owned(), json!(step.closed));
    args.insert("participants_count".to_owned(), json!(sizes.participants));
    args.insert("wait_list_count".to_owned(), json!(sizes.wait_list));
    args.insert(
        "redundancy_list_count".to_owned(),
        json!(sizes.redundancy_list),
    );
    if let Some(lists) = &step.lists {
        args.insert(
            "participants".to_owned(),
            json!(listed(&lists.participants)),
        );
        args.insert("wait_list".to_owned(), json!(listed(&lists.wait_list)));
        args.insert(
            "redundancy_list".to_owned(),
            json!(listed(&lists.redundancy_list)),
        );
    }
    if !step.dropped.is_empty() {
        args.insert("heartbeat_expired".to_owned(), json!(listed(&step.dropped)));
    }
    Value::Object(args)
}

/// The counter sample of the list lengths at `at`.
fn counter(at: SimInstant, sizes: ListSizes) -> Value {
    json!({
        "ph": "C", "pid": CLUSTER_PID, "tid": tid(CLUSTER_PID, LISTS),
        "name": "rendezvous lists", "ts": at.as_us(),
        "args": { "wait_list": sizes.wait_list, "redundancy_list": sizes.redundancy_list },
    })
}

impl Export {
    /// Every step of the story: an instant on its node's rendezvous thread, and a counter
    /// sample wherever a landed write changed a list's length (a step that wrote nothing
    /// saw a state that may already be old).
    pub(super) fn story(&mut self, story: &Story) {
        let mut last: Option<ListSizes> = None;
        for step in &story.rendezvous {
            let node = TraceNode::Node(step.node);
            let Some(&pid) = self.pids.get(&node) else {
                continue;
            };
            self.state(node).has_rendezvous = true;
            let name = step.action.torch_name().to_owned();
            self.out
                .push(instant(pid, RENDEZVOUS, step.at, name, args(step)));
            let lengths = (step.sizes.wait_list, step.sizes.redundancy_list);
            let changed = last.is_none_or(|l| (l.wait_list, l.redundancy_list) != lengths);
            if step.action.mutates_state() && changed {
                self.out.push(counter(step.at, step.sizes));
                last = Some(step.sizes);
            }
        }
    }
}
