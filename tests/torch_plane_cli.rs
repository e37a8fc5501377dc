//! `--torch PYTHON`, `--torch-elastic-src DIR` and the scenario's `[torch]` table at the
//! command line: a torch that cannot run is a usage error before any run, the table is read,
//! located and written back like every other, and files without it are unchanged.

mod common;
use common::{text, trainsim};
use std::path::PathBuf;
use trainsim::scenario::{self, model::TorchSection, parse, to_toml};

/// A small scenario of the suite: three nodes, one round, no faults.
const SMALL: &str = "scenarios/min_nodes_then_last_call.toml";
const MISSING: &str = "/nonexistent/python";

/// A fresh directory for one test's files.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trainsim-torch-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Asserts a usage error (exit 2) whose one-line message says each of `words`, printed
/// before anything ran: nothing on stdout.
fn assert_refused_before_any_run(args: &[&str], words: &[&str]) {
    let out = trainsim(args);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    for word in words {
        assert!(
            stderr.contains(word),
            "{args:?} should say {word}: {stderr}"
        );
    }
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    assert_eq!(text(&out.stdout), "", "{args:?} ran something");
}

#[test]
fn a_missing_python_is_a_usage_error_before_any_run() {
    assert_refused_before_any_run(&["run", SMALL, "--torch", MISSING], &[MISSING]);
    let seeds = ["run", SMALL, "--seeds", "0..50", "--torch", MISSING];
    assert_refused_before_any_run(&seeds, &[MISSING]);
    assert_refused_before_any_run(&["check", SMALL, "--torch", MISSING], &[MISSING]);
    let compare = [
        "compare", SMALL, SMALL, "--seeds", "0..2", "--torch", MISSING,
    ];
    assert_refused_before_any_run(&compare, &[MISSING]);
    let out = temp_dir("fuzz").join("out");
    let out_path = out.to_str().expect("utf-8 path");
    let fuzz = [
        "fuzz",
        "--target",
        "rendezvous",
        "--cases",
        "3",
        "--out",
        out_path,
        "--torch",
        MISSING,
    ];
    assert_refused_before_any_run(&fuzz, &[MISSING]);
    assert!(!out.join("summary.json").exists(), "the campaign ran");
}

#[test]
fn an_overlay_without_a_torch_is_a_usage_error() {
    let lone = ["--torch-elastic-src", "/src/pytorch"];
    let words = ["--torch-elastic-src /src/pytorch", "--torch PYTHON"];
    assert_refused_before_any_run(&[&["run", SMALL][..], &lone].concat(), &words);
    assert_refused_before_any_run(&[&["check", SMALL][..], &lone].concat(), &words);
    let compare = ["compare", SMALL, SMALL, "--seeds", "0..2"];
    assert_refused_before_any_run(&[&compare[..], &lone].concat(), &words);
    let out = temp_dir("fuzz-overlay").join("out");
    let fuzz = [
        "fuzz",
        "--target",
        "job",
        "--out",
        out.to_str().expect("utf-8 path"),
    ];
    assert_refused_before_any_run(&[&fuzz[..], &lone].concat(), &words);
}

/// A scenario's `[torch]` table names its Python relative to the file's directory: the
/// probe's reason names the resolved path, wherever the command runs from.
#[test]
fn a_tables_relative_python_is_the_files_directorys() {
    let dir = temp_dir("table");
    let file = dir.join("on_torch.toml");
    let small = std::fs::read_to_string(SMALL).expect("scenario");
    let table = "\n[torch]\npython = \"no-venv/bin/python\"\n";
    std::fs::write(&file, format!("{small}{table}")).expect("write");
    let resolved = dir.join("no-venv/bin/python");
    let resolved = resolved.to_str().expect("utf-8 path");
    let file = file.to_str().expect("utf-8 path");
    assert_refused_before_any_run(&["run", file], &[resolved]);
    // --torch replaces the table: its Python is the one probed.
    assert_refused_before_any_run(&["run", file, "--torch", MISSING], &[MISSING]);
}

#[test]
fn an_unknown_key_in_torch_is_located() {
    let text_of = "name = \"t\"\n[torch]\npython = \"/usr/bin/python3\"\npyhton_path = \"x\"\n";
    let e = parse(text_of, "t.toml").expect_err("an unknown key");
    assert_eq!((e.line, e.column), (4, 1), "{e}");
    assert_eq!(e.field, "torch.pyhton_path", "{e}");
    assert!(e.message.contains("unknown field `pyhton_path`"), "{e}");
    // At the command line: exit 2, the file, line and column, the field.
    let dir = temp_dir("unknown");
    let file = dir.join("bad.toml");
    std::fs::write(&file, text_of).expect("write");
    let file = file.to_str().expect("utf-8 path");
    let words = ["bad.toml:4:1", "torch.pyhton_path"];
    assert_refused_before_any_run(&["run", file], &words);
}

#[test]
fn python_is_required_and_paths_are_not_blank() {
    let e =
        parse("name = \"t\"\n[torch]\nelastic_src = \"src\"\n", "t.toml").expect_err("no python");
    assert_eq!((e.line, e.field.as_str()), (2, "torch.python"), "{e}");
    assert!(e.message.contains("required"), "{e}");
    let e = parse("name = \"t\"\n[torch]\npython = \" \"\n", "t.toml").expect_err("blank");
    assert_eq!(
        (e.line, e.column, e.field.as_str()),
        (3, 10, "torch.python"),
        "{e}"
    );
    let blank_src = "name = \"t\"\n[torch]\npython = \"py\"\nelastic_src = \"\"\n";
    let e = parse(blank_src, "t.toml").expect_err("blank");
    assert_eq!((e.line, e.field.as_str()), (4, "torch.elastic_src"), "{e}");
}

#[test]
fn a_torch_table_round_trips_and_files_without_one_are_unchanged() {
    let mut s = scenario::default_scenario("on torch");
    for section in [
        TorchSection {
            python: "venv/bin/python".into(),
            elastic_src: None,
        },
        TorchSection {
            python: "/opt/torch env/bin/python".into(),
            elastic_src: Some("../pytorch".into()),
        },
    ] {
        s.torch = Some(section);
        let written = to_toml(&s);
        assert!(written.contains("[torch]"), "{written}");
        assert_eq!(parse(&written, "back.toml").expect("parses back"), s);
    }
    // No table, no `[torch]` in what is written: every existing file and snapshot holds.
    let plain = scenario::load(std::path::Path::new(SMALL)).expect("scenario");
    assert_eq!(plain.torch, None);
    assert!(!to_toml(&plain).contains("[torch]"), "{}", to_toml(&plain));
}

#[test]
fn the_table_is_listed_and_in_the_schema() {
    let keys = text(&trainsim(&["list", "keys"]).stdout);
    for key in ["torch.python", "torch.elastic_src"] {
        let line = keys.lines().find(|l| l.starts_with(key));
        let line = line.unwrap_or_else(|| panic!("`list keys` lacks {key}: {keys}"));
        assert!(line.contains("relative path"), "{line}");
    }
    let schema: serde_json::Value =
        serde_json::from_slice(&trainsim(&["schema"]).stdout).expect("JSON");
    let torch = &schema["$defs"]["RawTorch"];
    assert_eq!(
        torch["additionalProperties"],
        serde_json::Value::Bool(false)
    );
    assert!(
        torch["properties"]["python"]["description"].is_string(),
        "{torch}"
    );
}

#[test]
fn a_scenario_torchs_code_cannot_run_is_refused_before_any_run() {
    // A named fix is the model's: torch's own code would silently run without it.
    let out = common::trainsim(&[
        "run",
        "scenarios/late_joiner_next_round_fixed.toml",
        "--torch",
        "/nonexistent/python",
    ]);
    let stderr = common::text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("late_joiner_next_round_fixed.toml"),
        "{stderr}"
    );
    assert!(stderr.contains("fixes"), "{stderr}");
}
