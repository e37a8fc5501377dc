//! Where the text written on a row goes: each note starts at its moment and wraps at word
//! boundaries into the room to the plot's right edge (a note too near that edge ends at
//! its moment instead), and notes are stacked in time order, each on the first lines
//! where it overlaps nothing at the unzoomed scale (zooming in only spreads them).

use super::timeline::Note;

/// Roughly how wide a character of a note is at 11 px (bold exit notes are a little wider).
const CHAR_W: f64 = 6.3;
/// The widest a note's block is.
const BLOCK_W_MAX: f64 = 440.0;
/// Less room than this to the right edge, and the note ends at its moment.
const ROOM_MIN: f64 = 150.0;
/// A note longer than this many lines ends in an ellipsis (its whole text is its tooltip).
const LINES_MAX: usize = 6;
/// Space kept between two blocks on one line.
const GAP: f64 = 8.0;

/// A note laid out: its first line (from the row's first note line), its lines of text,
/// and whether it ends at its moment.
pub(super) struct Placed<'a> {
    pub note: &'a Note,
    pub first_line: usize,
    pub lines: Vec<String>,
    pub ends_at: bool,
}

/// Word-wraps `text` into lines of at most `chars` characters (a longer word is cut).
fn wrap(text: &str, chars: usize) -> Vec<String> {
    let chars = chars.max(8);
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let needed = line.chars().count() + usize::from(!line.is_empty()) + word.chars().count();
        if !line.is_empty() && needed > chars {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
        while line.chars().count() > chars {
            let head: String = line.chars().take(chars).collect();
            let rest: String = line.chars().skip(chars).collect();
            lines.push(head);
            line = rest;
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    if lines.len() > LINES_MAX {
        lines.truncate(LINES_MAX);
        let last = &mut lines[LINES_MAX - 1];
        let kept: String = last.chars().take(chars.saturating_sub(1)).collect();
        *last = format!("{kept}…");
    }
    lines
}

/// Lays out a row's notes; `x_of` places a moment on the unzoomed plot of width `plot_w`.
pub(super) fn place<'a>(
    notes: &'a [Note],
    plot_w: f64,
    x_of: impl Fn(u64) -> f64,
) -> Vec<Placed<'a>> {
    let mut sorted: Vec<&Note> = notes.iter().collect();
    sorted.sort_by(|a, b| a.at_us.cmp(&b.at_us).then(a.text.cmp(&b.text)));
    // Each line's extents taken so far.
    let mut taken: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut out = Vec::new();
    for note in sorted {
        let x = x_of(note.at_us);
        let room = plot_w - x - 4.0;
        let ends_at = room < ROOM_MIN;
        let block_w = if ends_at {
            BLOCK_W_MAX.min(x)
        } else {
            BLOCK_W_MAX.min(room)
        };
        let lines = wrap(&note.text, (block_w / CHAR_W) as usize);
        let w = lines
            .iter()
            .map(|l| l.chars().count() as f64 * CHAR_W)
            .fold(0.0, f64::max);
        let (a, b) = if ends_at { (x - w, x) } else { (x, x + w) };
        let free = |line: usize, taken: &Vec<Vec<(f64, f64)>>| {
            taken
                .get(line)
                .is_none_or(|spans| spans.iter().all(|&(s, e)| e + GAP <= a || b + GAP <= s))
        };
        let first_line = (0..)
            .find(|&first| (first..first + lines.len()).all(|l| free(l, &taken)))
            .unwrap_or(0);
        for l in first_line..first_line + lines.len() {
            if taken.len() <= l {
                taken.resize(l + 1, Vec::new());
            }
            taken[l].push((a, b));
        }
        out.push(Placed {
            note,
            first_line,
            lines,
            ends_at,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(at_us: u64, text: &str) -> Note {
        Note {
            at_us,
            class: "flat-note",
            text: text.to_owned(),
        }
    }

    #[test]
    fn notes_start_at_their_moment_in_time_order_and_wrap_at_words() {
        let long = "no step for 60.1 s until worker 0 failed: init_process_group through \
                    node-0:32768: publishing its address: the connection was refused";
        let notes = [note(270, long), note(90, "first"), note(180, long)];
        let placed = place(&notes, 1150.0, |us| us as f64 * 3.0);
        let order: Vec<u64> = placed.iter().map(|p| p.note.at_us).collect();
        assert_eq!(order, [90, 180, 270]);
        let last = &placed[2];
        assert!(
            !last.ends_at,
            "a note at 810 px of 1150 starts at its moment"
        );
        assert!(
            last.lines.len() > 1,
            "it wraps into the room to the right edge"
        );
        assert!(last
            .lines
            .iter()
            .all(|l| l.chars().count() as f64 * CHAR_W <= 336.0));
        assert_eq!(last.lines.join(" "), long, "words are kept whole");
        // The note at 540 px spans to 980 px: the one at 810 px goes below it.
        assert!(last.first_line >= placed[1].first_line + placed[1].lines.len());
    }
}
