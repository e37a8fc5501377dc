//! `trainsim bench`: runs the fixed performance workloads and prints one line of
//! figures per workload (JSON or text). Exit codes: 0 done, 2 bad arguments, 3 a workload's
//! run failed inside the harness.

use crate::bench::{self, Figures, SCALE_NODES, WORKLOADS};

/// Arguments of `trainsim bench`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  trainsim bench --format json\n  trainsim bench --workload randperm-10m"
)]
pub struct BenchArgs {
    /// Output format: one line per workload.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Run only this workload: reference, fuzz, scale-64, scale-256, scale-1024, scale-4096,
    /// scale (all four scale runs, then the fit), scale-N-backoff (a scale run with torch's
    /// cas_backoff_max_seconds at 1 s), randperm-10m, randperm-epochs, goodput-model,
    /// goodput-batch, week-256; with --torch also torch-three-nodes and torch-fuzz.
    #[arg(long, value_name = "NAME")]
    pub workload: Option<String>,
    /// A Python with torch: also run the workloads of torch's own control plane
    /// (torch-three-nodes, torch-fuzz), after the model's.
    #[arg(long, value_name = "PYTHON")]
    pub torch: Option<std::path::PathBuf>,
}

/// How `trainsim bench` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// Runs the command; returns the exit code.
pub fn execute(args: BenchArgs) -> i32 {
    let plane = match probed_plane(&args) {
        Ok(plane) => plane,
        Err(code) => return code,
    };
    let torch_workloads = bench::torch::TORCH_WORKLOADS;
    if let Some(name) = args
        .workload
        .as_deref()
        .filter(|n| torch_workloads.contains(n))
    {
        let Some(plane) = &plane else {
            eprintln!("error: `{name}` runs torch's own code: give --torch PYTHON");
            return 2;
        };
        return run_torch(&[name], plane, args.format);
    }
    let names: Vec<&str> = match args.workload.as_deref() {
        None => WORKLOADS.to_vec(),
        Some(name) if WORKLOADS.contains(&name) => vec![name],
        Some(name) => {
            eprintln!(
                "error: `{name}` is not a workload (one of: {})",
                WORKLOADS.join(", ")
            );
            return 2;
        }
    };
    let print = |f: &Figures| print(f, args.format);
    let mut scale_lines: Vec<Figures> = Vec::new();
    for name in names {
        if name == "scale" {
            // The fit needs every scale line; alone, `scale` runs them first.
            for nodes in SCALE_NODES {
                let workload = format!("scale-{nodes}");
                if !scale_lines.iter().any(|f| f.workload == workload) {
                    match bench::run(&workload) {
                        Ok(f) => {
                            print(&f);
                            scale_lines.push(f);
                        }
                        Err(e) => return failed(name, &e),
                    }
                }
            }
            print(&bench::scale_fit(&scale_lines));
            continue;
        }
        match bench::run(name) {
            Ok(f) => {
                print(&f);
                if name.starts_with("scale-") {
                    scale_lines.push(f);
                }
            }
            Err(e) => return failed(name, &e),
        }
    }
    match (&plane, args.workload) {
        (Some(plane), None) => run_torch(torch_workloads, plane, args.format),
        _ => 0,
    }
}

/// The plane `--torch` names, probed before any workload runs; `Err` is the exit code.
fn probed_plane(args: &BenchArgs) -> Result<Option<crate::torch_plane::TorchPlane>, i32> {
    let Some(python) = args.torch.clone() else {
        return Ok(None);
    };
    let plane = crate::torch_plane::TorchPlane {
        python,
        elastic_src: None,
    };
    match crate::torch_plane::probe(&plane) {
        Ok(_) => Ok(Some(plane)),
        Err(e) => {
            eprintln!("error: {e}");
            Err(2)
        }
    }
}

/// One workload's line, as `--format` asks.
fn print(f: &Figures, format: Format) {
    match format {
        Format::Json => outln!("{}", f.to_json_line()),
        Format::Text => outln!("{}", f.to_text_line()),
    }
}

/// The torch control plane's workloads, on `plane`.
fn run_torch(names: &[&str], plane: &crate::torch_plane::TorchPlane, format: Format) -> i32 {
    for name in names {
        match bench::torch::run(name, plane) {
            Ok(f) => print(&f, format),
            Err(e) => return failed(name, &e),
        }
    }
    0
}

fn failed(name: &str, message: &str) -> i32 {
    eprintln!("error: the `{name}` workload failed: {message}");
    3
}
