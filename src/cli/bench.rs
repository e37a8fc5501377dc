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
    /// goodput-batch, week-256.
    #[arg(long, value_name = "NAME")]
    pub workload: Option<String>,
}

/// How `trainsim bench` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// Runs the command; returns the exit code.
pub fn execute(args: BenchArgs) -> i32 {
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
    let print = |f: &Figures| match args.format {
        Format::Json => outln!("{}", f.to_json_line()),
        Format::Text => outln!("{}", f.to_text_line()),
    };
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
    0
}

fn failed(name: &str, message: &str) -> i32 {
    eprintln!("error: the `{name}` workload failed: {message}");
    3
}
