//! Repro files that read as minimal scenarios: only the keys that differ from the defaults,
//! under a header comment saying where the case came from and how to replay it.

use crate::scenario::{self, emit, Scenario};
use toml::Value;

/// The scenario as TOML with only the keys that differ from a default scenario of the same
/// name. A key whose default depends on another (e.g. one derived from the node count) is
/// kept whenever leaving it out would change what the file parses to.
pub fn to_minimal_toml(s: &Scenario) -> String {
    let full = raw_value(s);
    let defaults = raw_value(&scenario::default_scenario(&s.name));
    let mut keep = diff(&full, &defaults).unwrap_or_else(|| Value::Table(Default::default()));
    if let (Value::Table(k), Value::Table(f)) = (&mut keep, &full) {
        if let Some(name) = f.get("name") {
            k.insert("name".to_owned(), name.clone());
        }
    }
    // Fall back to whole tables where the defaults of the written file differ.
    for _ in 0..3 {
        let text = in_file_order(&keep);
        let Ok(back) = scenario::parse(&text, "repro.toml") else {
            return scenario::to_toml(s);
        };
        if back == *s {
            return text;
        }
        let (Value::Table(keep_t), Value::Table(full_t), Value::Table(back_t)) =
            (&mut keep, &full, &raw_value(&back))
        else {
            break;
        };
        for (k, v) in full_t {
            match (v, back_t.get(k), keep_t.get_mut(k)) {
                (_, Some(b), _) if b == v => {}
                (Value::Table(vt), Some(Value::Table(bt)), Some(Value::Table(_)) | None) => {
                    let kt = keep_t
                        .entry(k.clone())
                        .or_insert_with(|| Value::Table(Default::default()));
                    if let Value::Table(kt) = kt {
                        for (sub, x) in vt {
                            if bt.get(sub) != Some(x) {
                                kt.insert(sub.clone(), x.clone());
                            }
                        }
                    }
                }
                _ => {
                    keep_t.insert(k.clone(), v.clone());
                }
            }
        }
    }
    scenario::to_toml(s)
}

/// The file's sections in the order `to_toml` writes them: top-level values, then the
/// tables, then the faults.
const ORDER: &[&str] = &[
    "name",
    "description",
    "seed",
    "time_limit",
    "cluster",
    "network",
    "rendezvous",
    "agent",
    "job",
    "reader",
    "gpu_profile",
    "faults",
    "expect",
    "torch",
];

fn in_file_order(v: &Value) -> String {
    let Value::Table(t) = v else {
        return String::new();
    };
    let mut keys: Vec<&String> = t.keys().collect();
    keys.sort_by_key(|k| ORDER.iter().position(|o| o == k).unwrap_or(ORDER.len()));
    let mut out = String::new();
    let mut scalars = true;
    for k in keys {
        let mut one = toml::map::Map::new();
        one.insert(k.clone(), t[k].clone());
        let is_table = matches!(t[k], Value::Table(_) | Value::Array(_));
        if is_table && scalars && !out.is_empty() {
            out.push('\n');
        }
        scalars &= !is_table;
        out.push_str(&toml::to_string(&Value::Table(one)).unwrap_or_default());
        if is_table {
            out.push('\n');
        }
    }
    out
}

fn raw_value(s: &Scenario) -> Value {
    Value::try_from(emit::to_raw(s)).unwrap_or_else(|_| Value::Table(Default::default()))
}

/// The parts of `a` that differ from `b`: tables recursively, anything else whole. `None`
/// when they are equal.
fn diff(a: &Value, b: &Value) -> Option<Value> {
    match (a, b) {
        (Value::Table(a), Value::Table(b)) => {
            let t: toml::map::Map<String, Value> = a
                .iter()
                .filter_map(|(k, v)| match b.get(k) {
                    Some(d) => diff(v, d).map(|x| (k.clone(), x)),
                    None => Some((k.clone(), v.clone())),
                })
                .collect();
            (!t.is_empty()).then_some(Value::Table(t))
        }
        _ if a == b => None,
        _ => Some(a.clone()),
    }
}

/// Where a repro came from, for its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The campaign's command line.
    pub command: String,
    pub campaign_seed: u64,
    pub case_index: u64,
    pub signature: String,
    /// `new` or the triage label.
    pub status: String,
    /// `--mutant M` when the case needs a mutant to fail.
    pub mutant: Option<String>,
}

/// The repro file's text: a header comment, then the minimal scenario.
pub fn repro_text(s: &Scenario, origin: &Origin, file: &str) -> String {
    let flag = origin
        .mutant
        .as_ref()
        .map(|m| format!(" --mutant {m}"))
        .unwrap_or_default();
    let replay = if s.expect.violations.is_empty() {
        "fails (exit 1, the violations named) until the bug is fixed"
    } else {
        "passes while the documented violations still occur"
    };
    format!(
        "# Found by: {}\n# Campaign seed {}, case {}.\n# Signature: {}\n# Triage: {}\n\
         # Replay: trainsim run {file}{flag}\n#   {replay}.\n{}",
        origin.command,
        origin.campaign_seed,
        origin.case_index,
        origin.signature,
        origin.status,
        to_minimal_toml(s)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::model::{Fault, FaultKind};

    #[test]
    fn only_changed_keys_are_written_and_the_text_parses_back() {
        let mut s = scenario::default_scenario("found by trainsim fuzz");
        s.seed = 42;
        s.cluster.nodes = 4;
        s.rendezvous.min_nodes = 2;
        s.rendezvous.max_nodes = 4;
        s.faults = vec![Fault {
            at: crate::sim_time::SimInstant::from_us(10_000_000),
            kind: FaultKind::Kill { node: 1 },
            role: None,
        }];
        let text = to_minimal_toml(&s);
        assert_eq!(scenario::parse(&text, "m.toml").expect("parses"), s);
        assert!(text.contains("seed = 42"), "{text}");
        assert!(!text.contains("keep_alive_interval"), "{text}");
        assert!(!text.contains("[network]"), "{text}");
        let origin = Origin {
            command: "trainsim fuzz --target rendezvous --cases 10 --seed 1".into(),
            campaign_seed: 1,
            case_index: 3,
            signature: "rendezvous.liveness:survivor-stuck [kill@member]".into(),
            status: "new".into(),
            mutant: None,
        };
        let file = repro_text(&s, &origin, "x.toml");
        assert!(file.starts_with("# Found by: trainsim fuzz"), "{file}");
        // A key whose default follows another (max_nodes follows nodes) is still written
        // when it must be, and nothing else of its table is.
        let mut two = scenario::default_scenario("found by trainsim fuzz");
        two.cluster.nodes = 2;
        two.rendezvous.min_nodes = 1;
        two.rendezvous.max_nodes = 2;
        let text = to_minimal_toml(&two);
        assert_eq!(scenario::parse(&text, "t.toml").expect("parses"), two);
        assert!(!text.contains("keep_alive_interval"), "{text}");
        assert_eq!(scenario::parse(&file, "x.toml").expect("parses"), s);
    }

    /// A campaign on torch's own code writes its torch into each repro, so the file alone
    /// replays the finding on the code that made it.
    #[test]
    fn a_repro_keeps_its_torch_table() {
        let mut s = scenario::default_scenario("found on torch");
        s.torch = Some(crate::scenario::model::TorchSection {
            python: "/venv/bin/python".into(),
            elastic_src: Some("/src/pytorch".into()),
        });
        let text = to_minimal_toml(&s);
        assert!(text.contains("[torch]\n"), "{text}");
        assert!(text.contains("python = \"/venv/bin/python\"\n"), "{text}");
        assert_eq!(scenario::parse(&text, "t.toml").expect("parses"), s);
    }
}
