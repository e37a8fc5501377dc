//! The JSON Schema of the scenario format (`trainsim schema`), for editors that complete and
//! check TOML files against one (taplo, VS Code's Even Better TOML). The shape comes from
//! the parser's own types (`raw`), so a key the parser reads is a key the schema has; each
//! key's description is its row of docs/scenario-format.md, so the two say the same.

use super::faults::fault_fields;
use super::model::FaultName;
use super::raw::RawScenario;
use super::units::{Bandwidth, Duration, Offset, Size};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeMap;
use strum::VariantArray;

/// The format's reference, whose tables describe every key.
const FORMAT_DOC: &str = include_str!("../../docs/scenario-format.md");

/// Each table's type in the schema and its dotted prefix in the format.
const TABLES: &[(&str, &str)] = &[
    ("RawScenario", ""),
    ("RawCluster", "cluster"),
    ("RawGpuProfile", "gpu_profile"),
    ("RawNetwork", "network"),
    ("RawRendezvous", "rendezvous"),
    ("RawAgent", "agent"),
    ("RawJob", "job"),
    ("RawDataset", "job.dataset"),
    ("RawComplexity", "job.dataset.complexity"),
    ("RawSampler", "job.sampler"),
    ("RawEval", "job.eval"),
    ("RawReader", "reader"),
    ("RawFailures", "failures"),
    ("RawExpect", "expect"),
    ("RawTorch", "torch"),
];

/// A quantity written as a string of a number and a unit.
fn quantity(name: &'static str, units: &str, example: &str) -> Schema {
    json_schema!({
        "type": "string",
        "description": format!("a {name}: a number and a unit ({units}), e.g. \"{example}\""),
    })
}

macro_rules! string_schema {
    ($type:ty, $name:literal, $units:literal, $example:literal) => {
        impl JsonSchema for $type {
            fn schema_name() -> Cow<'static, str> {
                $name.into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                quantity($name, $units, $example)
            }
        }
    };
}

string_schema!(
    Duration,
    "duration",
    "us, ms, s, m, h; or compound, 10m30s",
    "250ms"
);
string_schema!(
    Size,
    "size",
    "B, KB, KiB, MB, MiB, GB, GiB, TB, TiB",
    "1GiB"
);
string_schema!(Bandwidth, "bandwidth", "bps, Kbps, Mbps, Gbps", "100Gbps");
string_schema!(Offset, "clock offset", "a signed duration", "-2s");

/// The schema, every key described.
pub fn scenario_schema() -> Value {
    let mut schema = schemars::schema_for!(RawScenario).to_value();
    let rows = doc_rows();
    schema["title"] = Value::String("trainsim scenario".into());
    for (type_name, prefix) in TABLES {
        let properties = if type_name == &"RawScenario" {
            schema.get_mut("properties")
        } else {
            schema.pointer_mut(&format!("/$defs/{type_name}/properties"))
        };
        let Some(Value::Object(properties)) = properties else {
            continue;
        };
        for (key, property) in properties.iter_mut() {
            let dotted = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            if let Some(text) = rows.get(&dotted) {
                property["description"] = Value::String(text.clone());
            } else if property.to_string().contains("#/$defs/Raw") {
                // A table: its keys carry the descriptions.
                let table = match dotted.as_str() {
                    "faults" => "[[faults]]".to_owned(),
                    "cluster.gpu_profile" => "[gpu_profile]".to_owned(),
                    other => format!("[{other}]"),
                };
                let alias = match dotted.as_str() {
                    "cluster.gpu_profile" => ", under its alias",
                    _ => "",
                };
                property["description"] = Value::String(format!("the `{table}` table{alias}"));
            }
        }
    }
    describe_fault_keys(&mut schema);
    schema
}

/// Every key of the format, dotted as in a file (`job.steps`, `faults.node`), with its
/// description: `trainsim list keys`.
pub fn key_lines() -> Vec<String> {
    let schema = scenario_schema();
    let mut lines = Vec::new();
    let tables = TABLES.iter().copied().chain([("RawFault", "faults")]);
    for (type_name, prefix) in tables {
        let pointer = match type_name {
            "RawScenario" => "/properties".to_owned(),
            _ => format!("/$defs/{type_name}/properties"),
        };
        let Some(properties) = schema.pointer(&pointer).and_then(Value::as_object) else {
            continue;
        };
        for (key, property) in properties {
            let dotted = match prefix {
                "" => key.clone(),
                _ => format!("{prefix}.{key}"),
            };
            let text = property["description"].as_str().unwrap_or("");
            let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
            lines.push(format!("{dotted:<34} {text}"));
        }
    }
    lines
}

/// The doc's key rows, `dotted.key` → "rules (default …)": the tables' rows (four columns
/// with a default, three without), the complexity distributions' table and the commented
/// `[gpu_profile]` example.
fn doc_rows() -> BTreeMap<String, String> {
    let mut prefix = String::new();
    let mut rows = BTreeMap::new();
    let mut in_gpu_profile = false;
    for line in FORMAT_DOC.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            // "`[cluster]`" → "cluster"; "Top level" → ""; "`[job]`, …" → "job".
            prefix = heading
                .split('`')
                .nth(1)
                .map(|t| t.trim_matches(|c| c == '[' || c == ']').to_owned())
                .unwrap_or_default();
            continue;
        }
        if line == "[gpu_profile]" || line.starts_with("```") {
            in_gpu_profile = line == "[gpu_profile]";
            continue;
        }
        if in_gpu_profile {
            if let Some((key, comment)) = line.split_once(" = ").zip(line.split_once("# ")) {
                rows.insert(
                    format!("gpu_profile.{}", key.0.trim()),
                    comment.1.to_owned(),
                );
            }
            continue;
        }
        table_row(&prefix, line, &mut rows);
    }
    rows
}

/// One `| key | … |` row of a table, into `rows`.
fn table_row(prefix: &str, line: &str, rows: &mut BTreeMap<String, String>) {
    let Some(inner) = line.strip_prefix("| ").and_then(|l| l.strip_suffix(" |")) else {
        return;
    };
    let cells: Vec<&str> = inner.split(" | ").map(str::trim).collect();
    let keys: Vec<&str> = cells[0]
        .split(", ")
        .filter_map(|k| k.strip_prefix('`').and_then(|k| k.strip_suffix('`')))
        .collect();
    let dotted = |key: &str| match (key.contains('.'), prefix.is_empty()) {
        (false, false) => format!("{prefix}.{key}"),
        _ => key.to_owned(),
    };
    match cells.as_slice() {
        // A complexity distribution: `| `lognormal` | `median`, `sigma` | rules |`.
        [dist, takes, rules] if prefix == "job" && takes.starts_with('`') => {
            for key in takes.split(", ").map(|k| k.trim_matches('`')) {
                let text = format!("with dist = {dist}: {rules}").replace('`', "");
                rows.insert(format!("job.dataset.complexity.{key}"), text);
            }
            let dist = rows
                .entry("job.dataset.complexity.dist".into())
                .or_default();
            let name = cells[0].trim_matches('`');
            *dist = match dist.is_empty() {
                true => format!("the distribution: {name}"),
                false => format!("{dist}, {name}"),
            };
        }
        [_, _type, default, rules] => {
            for key in keys {
                rows.insert(dotted(key), format!("{rules} (default {default})"));
            }
        }
        [_, _type, rules] => {
            for key in keys {
                rows.insert(dotted(key), (*rules).to_owned());
            }
        }
        _ => {}
    }
}

/// A fault's keys: which kinds take each (from the validator's own table).
fn describe_fault_keys(schema: &mut Value) {
    let Some(Value::Object(properties)) = schema.pointer_mut("/$defs/RawFault/properties") else {
        return;
    };
    let kinds: Vec<&'static str> = FaultName::VARIANTS.iter().map(|k| (*k).into()).collect();
    for (key, property) in properties.iter_mut() {
        let text = match key.as_str() {
            "at" => "when the fault happens: a duration from the start, before time_limit".into(),
            "kind" => format!("what happens: one of {}", kinds.join(", ")),
            other => {
                let takers: Vec<&str> = FaultName::VARIANTS
                    .iter()
                    .filter(|k| {
                        let (needed, optional) = fault_fields(**k);
                        needed.contains(&other) || optional.contains(&other)
                    })
                    .map(|k| (*k).into())
                    .collect();
                let spelled = match other {
                    "node" => {
                        "; node-N, or a role resolved when the fault fires: rank0, store_host"
                    }
                    "groups" => "; each group lists node-N and inclusive ranges node-A..=node-B",
                    _ => "",
                };
                format!("a key of the kinds {}{spelled}", takers.join(", "))
            }
        };
        property["description"] = Value::String(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key of every table is described: a key the parser reads and the doc does not
    /// list fails here.
    #[test]
    fn every_key_has_a_description() {
        let schema = scenario_schema();
        let mut missing = Vec::new();
        let mut tables = TABLES.iter().map(|(t, _)| *t).collect::<Vec<_>>();
        tables.push("RawFault");
        for type_name in tables {
            let pointer = if type_name == "RawScenario" {
                "/properties".to_owned()
            } else {
                format!("/$defs/{type_name}/properties")
            };
            let properties = schema.pointer(&pointer).and_then(Value::as_object);
            let properties = properties.unwrap_or_else(|| panic!("no {pointer}"));
            for (key, property) in properties {
                if property.get("description").is_none() {
                    missing.push(format!("{type_name}.{key}"));
                }
            }
        }
        assert!(missing.is_empty(), "keys without a doc row: {missing:?}");
    }

    #[test]
    fn unknown_keys_are_refused_and_quantities_are_strings() {
        let schema = scenario_schema();
        assert_eq!(schema["additionalProperties"], Value::Bool(false));
        let step_time = &schema["$defs"]["RawJob"]["properties"]["step_time"];
        assert!(step_time.to_string().contains("duration"), "{step_time}");
        let steps = &schema["$defs"]["RawJob"]["properties"]["steps"]["description"];
        assert!(
            steps.as_str().unwrap().contains("(default `500`)"),
            "{steps}"
        );
    }
}
