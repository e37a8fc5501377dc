//! The run page's rendezvous lists: round by round (`rounds_story`), who took part, waited
//! or was redundant, then each move between the lists with the lists after it, each move
//! linked to its moment on the timeline. Rounds that went the same way share a row.

use super::{esc, secs};
use crate::report::rounds_story::{self, Move, RoundTold};
use crate::sim_time::{SimDuration, SimInstant};
use crate::trace::story::{distinct, names_shown, ListSizes, Member, RendezvousLists, Story};
use std::fmt::Write;

/// Names a list shows; a longer one ends with how many more.
const SHOWN_MAX: usize = 10;
/// The rounds past which the section starts closed.
const OPEN_ROUNDS_MAX: usize = 12;

/// A list of entries, cut after [`SHOWN_MAX`]; a node listed with two processes names each
/// one's pid.
fn listed(members: &[Member]) -> String {
    let (shown, more) = names_shown(members, SHOWN_MAX, |m| {
        format!("{} (pid {})", m.node, m.pid)
    });
    match more {
        0 => shown.join(" "),
        more => format!("{} … and {more} more ({})", shown.join(" "), members.len()),
    }
}

/// The timeline's address for a moment: a second either side.
fn link(from: SimInstant, to: SimInstant) -> String {
    let pad = SimDuration::from_secs(1);
    let hash = |at: SimInstant| {
        crate::check::secs(at.as_us())
            .trim_end_matches(" s")
            .to_owned()
    };
    format!("#t={}-{}", hash(from.before(pad)), hash(to.after(pad)))
}

/// The lists after a move: each named list, or its size when the story left it out.
fn after(lists: Option<&RendezvousLists>, sizes: ListSizes) -> [String; 3] {
    match lists {
        Some(l) => [
            listed(&l.participants),
            listed(&l.wait_list),
            listed(&l.redundancy_list),
        ],
        None => [sizes.participants, sizes.wait_list, sizes.redundancy_list]
            .map(|n| format!("{n} (left out)")),
    }
}

/// What a move did beyond its name.
fn effect(m: &Move<'_>) -> String {
    let mut parts = Vec::new();
    if m.opened {
        parts.push("opens the round".to_owned());
    }
    if m.completed {
        parts.push("completes the round".to_owned());
    }
    if !m.dropped.is_empty() {
        parts.push(format!(
            "removes {} (heartbeat expired)",
            listed(&m.dropped)
        ));
    }
    parts.join("; ")
}

/// A round's summary row.
fn round_row(html: &mut String, round: &RoundTold<'_>) {
    let participants = match round.participants.is_empty() {
        true => "none".to_owned(),
        false => listed(&round.participants),
    };
    let mut said = vec![format!("participants {participants}")];
    said.push(match round.completed_at {
        Some(at) => format!("marked complete at {}", secs(at.as_us())),
        None => "not complete".to_owned(),
    });
    for (label, list) in [
        ("waited", &round.waited),
        ("redundant", &round.redundant),
        ("heartbeat expired", &round.dropped),
    ] {
        if !list.is_empty() {
            said.push(format!("{label}: {}", listed(list)));
        }
    }
    if let Some(at) = round.closed_at {
        said.push(format!("closed at {}", secs(at.as_us())));
    }
    let store = match round.store_incarnation > 1 {
        true => format!(" (store {})", round.store_incarnation),
        false => String::new(),
    };
    let _ = writeln!(
        html,
        "<tr class=\"rdzv-round\"><td><b>{}{store}</b></td><td colspan=\"7\">{}</td></tr>",
        round.round,
        esc(&said.join("; "))
    );
}

/// A move's row: when (linked), who, the step, what it did, and the lists after it.
fn move_row(html: &mut String, m: &Move<'_>) {
    let takers = distinct(&m.takers);
    let when = match m.first_at == m.last_at {
        true => secs(m.first_at.as_us()),
        false => format!("{} – {}", secs(m.first_at.as_us()), secs(m.last_at.as_us())),
    };
    let [participants, waiting, redundant] = after(m.after, m.sizes_after);
    let _ = writeln!(
        html,
        "<tr class=\"rdzv-step\" data-action=\"{}\"><td></td><td><a href=\"{}\">{when}</a></td>\
         <td>{}</td><td>{} ({})</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        m.action,
        link(m.first_at, m.last_at),
        esc(&listed(&takers)),
        m.action,
        m.op.name(),
        esc(&effect(m)),
        esc(&participants),
        esc(&waiting),
        esc(&redundant)
    );
}

/// The section; nothing when the story holds no step worth telling.
pub(super) fn section(html: &mut String, story: &Story) {
    let rounds = rounds_story::rounds(story);
    if rounds.is_empty() {
        return;
    }
    let _ = write!(
        html,
        "<details id=\"rendezvous-lists\"{}><summary><b>Rendezvous lists</b> ({} rounds told; \
         the steps that moved nodes between the participants, the wait list and the \
         redundancy list, each named as torch's <code>_Action</code>, with the lists after \
         it; a link shows one on the timeline)</summary>\n<table><tr><th>round</th><th>at</th>\
         <th>who</th><th>step (op)</th><th>what it did</th><th>participants after</th>\
         <th>wait list after</th><th>redundancy list after</th></tr>\n",
        if rounds.len() <= OPEN_ROUNDS_MAX {
            " open"
        } else {
            ""
        },
        rounds.len()
    );
    for round in &rounds {
        round_row(html, round);
        round.moves.iter().for_each(|m| move_row(html, m));
        if let Some(alike) = round.alike {
            let _ = writeln!(
                html,
                "<tr class=\"rdzv-alike\"><td>{}–{}</td><td colspan=\"7\">{} more rounds went \
                 as round {} did, until {}</td></tr>",
                alike.last_round + 1 - alike.rounds,
                alike.last_round,
                alike.rounds,
                round.round,
                secs(alike.last_at.as_us())
            );
        }
    }
    html.push_str("</table>");
    if story.cut() {
        let _ = write!(
            html,
            "<div>The story left out {} steps and the lists of {} more (its bounds).</div>",
            story.steps_left_out, story.lists_left_out
        );
    }
    html.push_str("</details>\n");
}
