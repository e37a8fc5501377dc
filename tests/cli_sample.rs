//! `trainsim sample --summary`: samples per rank, padding, what `drop_last` drops and the
//! batches, with values worked out by hand from torch's formulas: `num_samples =
//! ceil(len / replicas)` (padding wraps to the start of the index list) or `floor` with
//! `drop_last` (the tail is cut), and `ceil(num_samples / batch_size)` batches.

use std::collections::BTreeSet;
use std::process::{Command, Output};

fn trainsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trainsim"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stdout_of(args: &[&str]) -> String {
    let out = trainsim(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json_of(args: &[&str]) -> serde_json::Value {
    let mut with_json = args.to_vec();
    with_json.extend(["--format", "json"]);
    serde_json::from_str(stdout_of(&with_json).trim()).expect("one JSON document")
}

/// The index dump of every rank, `rank r: i j k` per line.
fn dump(args: &[&str]) -> Vec<Vec<u64>> {
    stdout_of(args)
        .lines()
        .map(|line| {
            let (_, indices) = line.split_once(':').expect("rank r: indices");
            indices
                .split_whitespace()
                .map(|i| i.parse().unwrap())
                .collect()
        })
        .collect()
}

#[test]
fn ten_samples_over_four_ranks_pad_two_and_drop_two() {
    // ceil(10 / 4) = 3 per rank, 12 places: places 10 and 11 wrap to indices 0 and 1 and
    // go to ranks 10 % 4 = 2 and 11 % 4 = 3. floor(10 / 4) = 2 per rank keeps 8 places and
    // cuts indices 8 and 9. Batches of 2: ceil(3 / 2) = 2, the last holding 1.
    let args = [
        "sample",
        "distributed",
        "--dataset-len",
        "10",
        "--world-size",
        "4",
        "--no-shuffle",
        "--batch-size",
        "2",
        "--summary",
    ];
    let text = stdout_of(&args);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "distributed: 10 samples over 4 ranks (shuffle off, seed 0, epoch 0)",
            "drop_last=false (in effect): 3 samples per rank, ceil(10 / 4); padding repeats 2 samples from the start of the index list (index ×times dealt): 0 ×2 1 ×2",
            "drop_last=true: 2 samples per rank, floor(10 / 4); drops the last 2 samples of the index list, unseen this epoch: 8 9",
            "rank 0: 3 samples",
            "rank 1: 3 samples",
            "rank 2: 3 samples, the last a padding copy of index 0",
            "rank 3: 3 samples, the last a padding copy of index 1",
            "batches of 2: 2 per rank, the last holding 1; DataLoader(drop_last=True) would drop that batch: 1 sample per rank, 4 in all",
        ]
    );
}

#[test]
fn an_eval_set_of_10001_over_8_ranks_in_json() {
    // ceil(10001 / 8) = 1251 per rank, 10008 places: places 10001..10007 wrap to indices
    // 0..6 on ranks 1..7. floor = 1250 keeps 10000 places and cuts index 10000 (rank 0's
    // place). Batches of 32: ceil(1251 / 32) = 40, the last holding 1251 − 39 × 32 = 3.
    let v = json_of(&[
        "sample",
        "distributed",
        "--dataset-len",
        "10001",
        "--world-size",
        "8",
        "--no-shuffle",
        "--batch-size",
        "32",
        "--summary",
    ]);
    assert_eq!(v["num_samples"], 1251);
    assert_eq!(v["padding"]["num_samples"], 1251);
    let places = v["padding"]["places"].as_array().unwrap();
    let got: Vec<(u64, u64)> = places
        .iter()
        .map(|p| (p["rank"].as_u64().unwrap(), p["index"].as_u64().unwrap()))
        .collect();
    assert_eq!(got, (1..8).map(|r| (r, r - 1)).collect::<Vec<_>>());
    let repeats = v["padding"]["repeats"].as_array().unwrap();
    assert_eq!(repeats.len(), 7);
    assert!(repeats.iter().all(|r| r["times"] == 2));
    assert_eq!(v["drop_last_drops"]["num_samples"], 1250);
    assert_eq!(
        v["drop_last_drops"]["places"],
        serde_json::json!([{"rank": 0, "index": 10000}])
    );
    assert_eq!(v["ranks"][0]["padding"], serde_json::json!([]));
    assert_eq!(v["ranks"][7]["padding"], serde_json::json!([6]));
    let batches = &v["batches"];
    assert_eq!(
        (
            &batches["per_rank"],
            &batches["last_batch"],
            &batches["dataloader_drop_last_drops_per_rank"]
        ),
        (&40.into(), &3.into(), &3.into())
    );
}

#[test]
fn a_shuffled_summary_agrees_with_the_index_dump() {
    let base = [
        "sample",
        "distributed",
        "--dataset-len",
        "103",
        "--world-size",
        "8",
        "--seed",
        "7",
        "--epoch",
        "2",
    ];
    let padded = dump(&base);
    let mut with_drop = base.to_vec();
    with_drop.push("--drop-last");
    let dropped = dump(&with_drop);
    let mut summary_args = base.to_vec();
    summary_args.push("--summary");
    let v = json_of(&summary_args);
    // Each padding copy is the last index its rank is dealt.
    for place in v["padding"]["places"].as_array().unwrap() {
        let rank = place["rank"].as_u64().unwrap() as usize;
        assert_eq!(padded[rank].last(), Some(&place["index"].as_u64().unwrap()));
    }
    assert_eq!(padded[0].len(), 13, "ceil(103 / 8)");
    assert_eq!(
        v["padding"]["places"].as_array().unwrap().len(),
        13 * 8 - 103
    );
    // What drop_last deals plus what it drops is the dataset, each index once.
    let mut seen: BTreeSet<u64> = dropped.iter().flatten().copied().collect();
    assert_eq!(seen.len(), 12 * 8, "floor(103 / 8) per rank, all distinct");
    for place in v["drop_last_drops"]["places"].as_array().unwrap() {
        assert!(seen.insert(place["index"].as_u64().unwrap()));
    }
    assert_eq!(seen, (0..103).collect());
}

#[test]
fn a_dataset_smaller_than_the_world_repeats_or_drops_entirely() {
    // 2 samples over 5 ranks: ceil = 1 per rank, 3 copies (0, 1, 0); floor = 0 per rank.
    let v = json_of(&[
        "sample",
        "distributed",
        "--dataset-len",
        "2",
        "--world-size",
        "5",
        "--no-shuffle",
        "--drop-last",
        "--summary",
    ]);
    assert_eq!(v["num_samples"], 0);
    assert_eq!(
        v["padding"]["repeats"],
        serde_json::json!([{"index": 0, "times": 3}, {"index": 1, "times": 2}])
    );
    assert_eq!(v["drop_last_drops"]["places"].as_array().unwrap().len(), 2);
    assert!(v["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["padding"] == serde_json::json!([])));
}

#[test]
fn load_balancing_pads_with_the_least_complex_and_drops_the_most_complex() {
    // Complexities 5,1,9,3,7,2,8 sort to indices 1 5 3 0 4 6 2. Over 2 ranks: ceil(7 / 2) =
    // 4 per rank, place 7 wraps to index 1 on rank 1; floor keeps 6 places and cuts index 2.
    let text = stdout_of(&[
        "sample",
        "load_balancing",
        "--complexities",
        "5,1,9,3,7,2,8",
        "--world-size",
        "2",
        "--no-shuffle",
        "--batch-size",
        "2",
        "--summary",
    ]);
    assert!(text.contains("padding repeats 1 sample from the start of the items in complexity order (index ×times dealt): 1 ×2"), "{text}");
    assert!(
        text.contains(
            "drops the last 1 sample of the items in complexity order, unseen this epoch: 2"
        ),
        "{text}"
    );
    assert!(
        text.contains("rank 1: 4 samples, the last a padding copy of index 1"),
        "{text}"
    );
    assert!(
        text.contains("batches of 2: 2 per rank, the last holding 2"),
        "{text}"
    );
}

#[test]
fn a_summary_refuses_what_the_sampler_refuses() {
    for (args, message) in [
        (
            &["--batch-size", "0"][..],
            "--batch-size must be at least 1",
        ),
        (&["--drop-last-batches"][..], "apply to load_balancing only"),
        (&["--rank", "4"][..], "must be below --world-size"),
    ] {
        let mut all = vec![
            "sample",
            "distributed",
            "--dataset-len",
            "10",
            "--world-size",
            "4",
            "--summary",
        ];
        all.extend(args);
        let out = trainsim(&all);
        assert_eq!(out.status.code(), Some(2), "{all:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(message),
            "{all:?}"
        );
    }
}

#[test]
fn without_summary_the_indices_are_printed_as_before() {
    let text = stdout_of(&[
        "sample",
        "distributed",
        "--dataset-len",
        "10",
        "--world-size",
        "4",
        "--no-shuffle",
    ]);
    assert_eq!(
        text,
        "rank 0: 0 4 8\nrank 1: 1 5 9\nrank 2: 2 6 0\nrank 3: 3 7 1\n"
    );
}
