//! The compare page: one self-contained HTML file (inline SVG and CSS; no script, no
//! network) for `trainsim compare --html` and `trainsim merge --html`. It shows each
//! variant's ETTR over the seeds, where the wall time went, how the runs ended and the
//! paired differences the text report prints. A pure function of the variants' rows, so
//! the same runs write the same bytes.

use super::plots::{self, ArmPoints, DifferenceRow, Piece};
use super::{difference_line, estimate, paired_difference, verdict, VariantRuns};
use crate::report::html::esc;
// The pieces of wall time in the order the bars stack them, with the run page's colours.
use crate::report::html::goodput_bar::COLOURS;
use std::fmt::Write;
use std::ops::Range;

/// What the page is of.
pub struct PageInput<'a> {
    /// The command that runs the comparison on one machine.
    pub command: &'a str,
    /// The scenario files.
    pub files: Vec<&'a str>,
    /// The swept key of a sweep (`--set KEY=...`); `None` for files compared or a batch.
    pub swept_key: Option<&'a str>,
    /// The seeds every variant ran.
    pub seeds: Range<u64>,
    /// Each variant with one row per seed, in seed order.
    pub variants: &'a [VariantRuns],
}

/// The outcomes in the order the bars stack them, with their words and colours.
const OUTCOMES: [(&str, &str, &str); 3] = [
    ("succeeded", "finished", "#3c9a5f"),
    ("failed", "failed for good", "#c0392b"),
    ("timed_out", "timed out", "#e0a800"),
];

const STYLE: &str = "
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d1d1f;max-width:1400px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 2px}
.meta span{margin-right:18px}.caption{color:#555;margin:2px 0 4px;max-width:1000px}
code{background:#f2f2f4;padding:2px 6px;border-radius:4px}
svg{border:1px solid #ddd;border-radius:6px;background:#fff;margin:8px 0;display:block}
svg text{font:11px system-ui,sans-serif;fill:#333}svg .axis-title{font-size:12px;fill:#555}
.grid{stroke:#eee}.seed{fill:#3b6fb6;fill-opacity:.3}
.seed-failed{fill:none;stroke:#b3261e;stroke-width:1.5;stroke-opacity:.6}
.seed-timed_out{fill:none;stroke:#b07d00;stroke-width:1.5;stroke-opacity:.8}
.mean{stroke:#111;stroke-width:3}.ci{stroke:#111;stroke-width:1.5}
.mean-line{fill:none;stroke:#3b6fb6;stroke-width:1.5;stroke-dasharray:4 3}
.mean-label{font-weight:600}.in-bar{fill:#fff;font-weight:600}
.zero{stroke:#999;stroke-dasharray:3 3}
.diff{stroke-width:2.5}line.better{stroke:#0a7c2f}line.worse{stroke:#b3261e}
line.no-difference-shown{stroke:#777}circle.better{fill:#0a7c2f}circle.worse{fill:#b3261e}
circle.no-difference-shown{fill:#777}
table{border-collapse:collapse;margin-top:8px}
td,th{border-bottom:1px solid #eee;padding:4px 10px;text-align:left;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.legend span{display:inline-block;margin-right:14px}
.legend i{display:inline-block;width:12px;height:10px;margin-right:4px;vertical-align:-1px}
.better{color:#0a7c2f}.worse{color:#b3261e}
";

/// The page.
pub fn page(input: &PageInput<'_>) -> String {
    let mut html = String::new();
    let title = title(input);
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        esc(&title),
        esc(&title)
    );
    let seeds = input.seeds.end - input.seeds.start;
    let _ = write!(
        html,
        "<div class=\"meta\"><span>seeds {}..{} ({seeds} seeds, the same for every variant)</span>\
         <span>{}</span></div>\n<div>reproduce: <code id=\"command\">{}</code></div>\n",
        input.seeds.start,
        input.seeds.end,
        esc(&input.files.join(", ")),
        esc(input.command)
    );
    ettr_section(&mut html, input);
    table_section(&mut html, input.variants);
    badput_section(&mut html, input);
    outcome_section(&mut html, input);
    differences_section(&mut html, input);
    html.push_str("</body></html>\n");
    html
}

/// A run's outcome in words.
fn outcome_words(outcome: &str) -> &str {
    OUTCOMES
        .iter()
        .find(|o| o.0 == outcome)
        .map_or(outcome, |o| o.1)
}

/// The command that replays one seed of a variant: the file's run, or for a swept value
/// that value's comparison over the one seed.
fn replay(input: &PageInput<'_>, v: &VariantRuns, seed: u64) -> String {
    match (input.swept_key, input.files.first()) {
        (Some(_), Some(file)) => format!(
            "trainsim compare {file} --set {} --seeds {seed}..{}",
            v.name,
            seed + 1
        ),
        _ => format!("trainsim run {} --seed {seed}", v.name),
    }
}

/// A swept key with the unit its values are in, when the key names a count; spans carry
/// their own unit in each value (`30s`).
fn with_unit(key: &str) -> String {
    let leaf = key.rsplit('.').next().unwrap_or(key);
    let unit = match leaf {
        "checkpoint_every" => "steps between checkpoints",
        "steps" => "steps",
        "nodes" | "min_nodes" | "max_nodes" | "spare_nodes" => "nodes",
        "gpus_per_node" => "GPUs per node",
        "max_restarts" => "restarts",
        "rate_per_node_day" => "failures per node-day",
        "batch_size" => "samples per batch",
        _ => return key.to_owned(),
    };
    format!("{key} ({unit})")
}

fn title(input: &PageInput<'_>) -> String {
    match (input.swept_key, input.variants) {
        (Some(key), _) => format!("Goodput: ETTR against {}", with_unit(key)),
        (None, [one]) => format!("Goodput over seeds: {}", one.name),
        (None, variants) => {
            let names: Vec<&str> = variants.iter().map(|v| short_name(&v.name)).collect();
            format!("Goodput: {}", names.join(" vs "))
        }
    }
}

/// A file's name without its directories; other names as they are.
fn short_name(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// A variant as the bars label it: a file by its name, a swept value as `KEY=VALUE`.
fn display_name<'a>(input: &PageInput<'_>, v: &'a VariantRuns) -> &'a str {
    match input.swept_key {
        Some(_) => &v.name,
        None => short_name(&v.name),
    }
}

/// Each seed's outcome and tooltip: its seed, ETTR, outcome and replay command.
fn seed_dots(input: &PageInput<'_>, v: &VariantRuns) -> Vec<(String, String)> {
    v.rows
        .iter()
        .map(|r| {
            let title = format!(
                "seed {}: ETTR {:.1} %, {}; replay: {}",
                r.seed,
                r.ettr * 100.0,
                outcome_words(&r.outcome),
                replay(input, v, r.seed)
            );
            (r.outcome.clone(), title)
        })
        .collect()
}

fn ettr_section(html: &mut String, input: &PageInput<'_>) {
    let arms: Vec<ArmPoints> = input
        .variants
        .iter()
        .map(|v| {
            let ettrs = v.ettrs();
            let e = estimate(&ettrs);
            let label = match input.swept_key {
                Some(key) => v
                    .name
                    .strip_prefix(key)
                    .map_or(&*v.name, |rest| rest.trim_start_matches('=')),
                None => display_name(input, v),
            };
            let runs = seed_dots(input, v);
            ArmPoints {
                label: label.to_owned(),
                name: v.name.clone(),
                ettrs,
                runs,
                mean: e.mean,
                half_width_95: e.half_width_95,
            }
        })
        .collect();
    let (heading, x_title) = match input.swept_key {
        Some(key) => (
            format!("ETTR against {}", with_unit(key)),
            format!(
                "{} (the values in the order given, evenly spaced)",
                with_unit(key)
            ),
        ),
        None => ("ETTR per variant".to_owned(), "variant".to_owned()),
    };
    let largest = arms.iter().map(|a| a.ettrs.len()).max().unwrap_or(0);
    let thinned = match largest > plots::DOTS_MAX {
        true => format!(
            " (every {}th seed drawn)",
            largest.div_ceil(plots::DOTS_MAX)
        ),
        false => String::new(),
    };
    let _ = write!(
        html,
        "<h2>{}</h2>\n<div class=\"caption\">Each faint dot is one seed's run{thinned}; the \
         black bar is the mean ETTR, the whisker its 95 % confidence interval; a dot is a \
         finished run, a cross a run that failed for good, a ring a run the time limit cut \
         (hover a dot for its seed and the command that replays it). ETTR is the \
         share of the job's wall time spent on training steps it kept; a job that failed \
         early can still show a fair ETTR, so read it with the outcomes below.</div>\n",
        esc(&heading)
    );
    html.push_str(&plots::ettr_plot(
        &arms,
        &x_title,
        input.swept_key.is_some(),
    ));
}

fn table_section(html: &mut String, variants: &[VariantRuns]) {
    html.push_str(
        "<table id=\"variants\"><tr><th>variant</th><th>mean ETTR</th><th>95 % interval</th>\
         <th>finished</th><th>failed for good</th><th>timed out</th></tr>\n",
    );
    for v in variants {
        let e = estimate(&v.ettrs());
        let _ = writeln!(
            html,
            "<tr class=\"variant\" data-name=\"{}\"><td>{}</td><td class=\"num\">{:.1} %</td>\
             <td class=\"num\">± {:.1}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td></tr>",
            esc(&v.name),
            esc(&v.name),
            e.mean * 100.0,
            e.half_width_95 * 100.0,
            v.count("succeeded"),
            v.count("failed"),
            v.count("timed_out")
        );
    }
    html.push_str("</table>\n");
}

fn badput_section(html: &mut String, input: &PageInput<'_>) {
    html.push_str(
        "<h2>Where the wall time went</h2>\n<div class=\"caption\">Each variant's wall time \
         over all its seeds together, cut by cause: green is training kept, every other \
         colour time lost to that cause (hover for the mean per run). These shares are \
         pooled: all the runs' wall time added up, so a long run weighs more than a short \
         one, and the green share can differ from the mean ETTR above, which averages each \
         run's own share.</div>\n",
    );
    let rows: Vec<(String, Vec<Piece>, String)> = input
        .variants
        .iter()
        .map(|v| {
            let runs = v.rows.len().max(1) as f64;
            let wall_us: u128 = v.rows.iter().map(|r| u128::from(r.wall_us)).sum();
            let pieces = COLOURS
                .iter()
                .map(|&(name, colour)| {
                    let us: u128 = v.rows.iter().map(|r| piece_us(r, name)).sum();
                    Piece {
                        name: name.replace("productive", "kept_training"),
                        amount: us as f64,
                        colour,
                        detail: format!("mean {:.1} s per run", us as f64 / runs / 1e6),
                        shown: share_text(us, wall_us),
                    }
                })
                .collect();
            let note = format!("mean wall time {:.1} s", wall_us as f64 / runs / 1e6);
            (display_name(input, v).to_owned(), pieces, note)
        })
        .collect();
    html.push_str(&plots::stacked_bars("badput-bars", &rows));
    html.push_str("<div class=\"legend\">");
    for (name, colour) in COLOURS {
        let words = match name {
            "productive" => "kept training".to_owned(),
            cause => cause.replace('_', " "),
        };
        let _ = write!(
            html,
            "<span><i style=\"background:{colour}\"></i>{words}</span>"
        );
    }
    html.push_str("</div>\n");
}

/// `us` as a whole percent of `wall_us`, as a bar writes it.
fn share_text(us: u128, wall_us: u128) -> String {
    match wall_us {
        0 => String::new(),
        _ => format!("{:.0} %", us as f64 * 100.0 / wall_us as f64),
    }
}

/// A run's microseconds of one piece: `productive` or a cause of badput.
fn piece_us(row: &crate::report::goodput_summary::SeedRow, name: &str) -> u128 {
    match name {
        "productive" => u128::from(row.productive_us),
        cause => u128::from(row.badput_us.get(cause).copied().unwrap_or(0)),
    }
}

fn outcome_section(html: &mut String, input: &PageInput<'_>) {
    html.push_str(
        "<h2>How the runs ended</h2>\n<div class=\"caption\">Runs that finished all their \
         steps, failed for good (training never resumed) or reached the scenario's time \
         limit still training.</div>\n",
    );
    let rows: Vec<(String, Vec<Piece>, String)> = input
        .variants
        .iter()
        .map(|v| {
            let pieces = OUTCOMES
                .iter()
                .map(|&(outcome, words, colour)| Piece {
                    name: words.to_owned(),
                    amount: v.count(outcome) as f64,
                    colour,
                    detail: format!("{} runs", v.count(outcome)),
                    shown: v.count(outcome).to_string(),
                })
                .collect();
            let note = OUTCOMES
                .iter()
                .map(|&(outcome, words, _)| format!("{} {words}", v.count(outcome)))
                .collect::<Vec<_>>()
                .join(", ");
            (display_name(input, v).to_owned(), pieces, note)
        })
        .collect();
    html.push_str(&plots::stacked_bars("outcome-bars", &rows));
}

fn differences_section(html: &mut String, input: &PageInput<'_>) {
    let [base, others @ ..] = input.variants else {
        return;
    };
    if others.is_empty() {
        return;
    }
    let _ = write!(
        html,
        "<h2>Differences from {}</h2>\n<div class=\"caption\">Each variant's ETTR minus \
         the first's, seed by seed (a seed draws the same failures in every variant with the \
         same failure process), with the 95 % interval of the mean difference. An interval \
         clear of zero shows a difference.</div>\n",
        esc(&base.name)
    );
    let rows: Vec<DifferenceRow> = others
        .iter()
        .map(|v| {
            let d = paired_difference(base, v);
            DifferenceRow {
                label: display_name(input, v).to_owned(),
                mean: d.mean * 100.0,
                low: (d.mean - d.half_width_95) * 100.0,
                high: (d.mean + d.half_width_95) * 100.0,
                verdict: verdict(d),
            }
        })
        .collect();
    html.push_str(&plots::forest_plot(&rows));
    html.push_str("<ul id=\"differences\">\n");
    for v in others {
        let class = verdict(paired_difference(base, v)).replace(' ', "-");
        let _ = writeln!(
            html,
            "<li class=\"difference {class}\">{}</li>",
            esc(&difference_line(base, v))
        );
    }
    html.push_str("</ul>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_sweep_page_labels_its_values_and_prints_the_differences() {
        let variants = [
            crate::report::compare::tests::runs("job.checkpoint_every=50", &[0.2, 0.4]),
            crate::report::compare::tests::runs("job.checkpoint_every=100", &[0.3, 0.5]),
        ];
        let input = PageInput {
            command: "trainsim compare x.toml --set job.checkpoint_every=50,100 --seeds 0..2",
            files: vec!["x.toml"],
            swept_key: Some("job.checkpoint_every"),
            seeds: 0..2,
            variants: &variants,
        };
        let html = page(&input);
        assert!(html.contains(
            "<title>Goodput: ETTR against job.checkpoint_every (steps between checkpoints)</title>"
        ));
        assert!(html.contains("<title>job.checkpoint_every=100</title>100</text>"));
        assert!(html
            .contains("job.checkpoint_every=100 vs job.checkpoint_every=50: +10.0 points of ETTR"));
        assert_eq!(html.matches("class=\"seed\"").count(), 4);
        assert!(!html.contains("<script") && !html.contains("http"));
    }
}
