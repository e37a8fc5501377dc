//! `--torch PYTHON` and `--torch-elastic-src DIR`, shared by `run`, `check`, `fuzz` and
//! `compare`: which control plane each run gets (the flag's torch, else the scenario's
//! `[torch]` table, else the Rust model), and the check of every torch before any run.

use crate::scenario::model::TorchSection;
use crate::scenario::Scenario;
use crate::torch_plane::{self, TorchPlane};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The torch flags, flattened into each command that runs scenarios.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TorchArgs {
    /// Run torch's own elastic code (torchrun, its agent and rendezvous) from this Python on
    /// every node instead of the Rust model; overrides a scenario's `[torch]` table.
    #[arg(long = "torch", value_name = "PYTHON")]
    pub python: Option<PathBuf>,
    /// Lay this torch checkout's `torch/distributed/elastic` Python over the installed
    /// torch's (a patch to try). Needs --torch or a scenario's `[torch]` table.
    #[arg(long = "torch-elastic-src", value_name = "DIR")]
    pub elastic_src: Option<PathBuf>,
}

impl TorchArgs {
    /// The flags' own plane, for a command without scenario files (`fuzz`): `--torch` with
    /// its overlay, or `None`; `Err` is `--torch-elastic-src` alone, a usage error.
    pub fn plane(&self) -> Result<Option<TorchPlane>, String> {
        match (&self.python, &self.elastic_src) {
            (Some(python), elastic_src) => Ok(Some(TorchPlane {
                python: python.clone(),
                elastic_src: elastic_src.clone(),
            })),
            (None, Some(src)) => Err(format!(
                "--torch-elastic-src {} needs a torch to lay it over: give --torch PYTHON",
                src.display()
            )),
            (None, None) => Ok(None),
        }
    }

    /// The flags as they are written on a command line (empty without `--torch`), for the
    /// commands a part file or a repro header records.
    pub fn flags(&self) -> String {
        let mut flags = String::new();
        let word = |path: &Path| super::compare::shell_word(&path.to_string_lossy());
        if let Some(python) = &self.python {
            flags.push_str(&format!(" --torch {}", word(python)));
        }
        if let Some(src) = &self.elastic_src {
            flags.push_str(&format!(" --torch-elastic-src {}", word(src)));
        }
        flags
    }
}

/// The control plane of the runs of `scenario`, read from `scenario_path`: the `--torch`
/// flag's torch (with `--torch-elastic-src`), else the file's `[torch]` table with its
/// relative paths taken from the file's directory (`--torch-elastic-src` replacing its
/// `elastic_src`), else `None`, the Rust model. `Err` is the usage error of
/// `--torch-elastic-src` with no torch to lay it over.
pub fn torch_plane_of(
    scenario: &Scenario,
    scenario_path: &Path,
    args: &TorchArgs,
) -> Result<Option<TorchPlane>, String> {
    let Some(section) = scenario.torch.as_ref().filter(|_| args.python.is_none()) else {
        return args.plane().map_err(|e| {
            let file = scenario_path.display();
            format!("{e} (or a [torch] table in {file})")
        });
    };
    let dir = scenario_path.parent().unwrap_or(Path::new(""));
    let mut plane = plane_in(section, dir);
    if let Some(src) = &args.elastic_src {
        plane.elastic_src = Some(src.clone());
    }
    Ok(Some(plane))
}

/// The plane a `[torch]` table names, its relative paths taken from `dir`.
pub fn plane_in(section: &TorchSection, dir: &Path) -> TorchPlane {
    let (python, elastic_src) = section.resolved(dir);
    TorchPlane {
        python,
        elastic_src,
    }
}

/// Checks each distinct plane once (`torch_plane::probe`), before any run starts, so a
/// missing Python or a torch without its elastic code fails in a second rather than after
/// an hour of model runs. `Err` is the first reason, which names the path.
pub fn probe_all<'a>(planes: impl IntoIterator<Item = &'a TorchPlane>) -> Result<(), String> {
    let distinct: BTreeSet<&TorchPlane> = planes.into_iter().collect();
    for plane in distinct {
        torch_plane::probe(plane).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Each scenario's plane (in the scenarios' order), every one probed: what `run`, `check`
/// and `compare` call before their first run. `Err` is the message of a usage error
/// (exit 2), also for a scenario torch's own code cannot run (named fixes, a rendezvous
/// timeout that is not whole seconds), naming the file.
pub fn planes_of<'a>(
    scenarios: impl IntoIterator<Item = (&'a Path, &'a Scenario)>,
    args: &TorchArgs,
) -> Result<Vec<Option<TorchPlane>>, String> {
    let mut planes = Vec::new();
    for (path, scenario) in scenarios {
        let plane = torch_plane_of(scenario, path, args)?;
        if let (Some(_), Some(why)) = (&plane, torch_plane::argv::refusal(scenario)) {
            return Err(format!("{}: on torch's own code: {why}", path.display()));
        }
        planes.push(plane);
    }
    probe_all(planes.iter().flatten())?;
    Ok(planes)
}

/// The plane written into a fuzz repro's `[torch]` table: paths made absolute, so the file
/// replays from wherever it is copied to; a bare command name (`python3`) stays bare, to be
/// found on `PATH` again.
pub fn section_of(plane: &TorchPlane) -> TorchSection {
    let absolute = |path: &Path| {
        std::path::absolute(path)
            .unwrap_or_else(|_| path.to_path_buf())
            .to_string_lossy()
            .into_owned()
    };
    let python = match plane.python.components().count() > 1 || plane.python.is_absolute() {
        true => absolute(&plane.python),
        false => plane.python.to_string_lossy().into_owned(),
    };
    TorchSection {
        python,
        elastic_src: plane.elastic_src.as_deref().map(absolute),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_table(python: &str, elastic_src: Option<&str>) -> Scenario {
        let mut s = crate::scenario::default_scenario("torch");
        s.torch = Some(TorchSection {
            python: python.to_owned(),
            elastic_src: elastic_src.map(str::to_owned),
        });
        s
    }

    #[test]
    fn a_tables_relative_paths_are_the_files_directorys() {
        let s = with_table("venv/bin/python", Some("../torch"));
        let plane = torch_plane_of(&s, Path::new("cases/x.toml"), &TorchArgs::default());
        let plane = plane.unwrap().unwrap();
        assert_eq!(plane.python, PathBuf::from("cases/venv/bin/python"));
        assert_eq!(plane.elastic_src, Some(PathBuf::from("cases/../torch")));
        let s = with_table("/opt/venv/bin/python", None);
        let plane = torch_plane_of(&s, Path::new("/a/b/x.toml"), &TorchArgs::default());
        assert_eq!(
            plane.unwrap().unwrap().python,
            PathBuf::from("/opt/venv/bin/python")
        );
        // A bare name is a command on PATH, whichever directory the file is in.
        let s = with_table("python3", None);
        let plane = torch_plane_of(&s, Path::new("/a/b/x.toml"), &TorchArgs::default());
        assert_eq!(plane.unwrap().unwrap().python, PathBuf::from("python3"));
        // A file in the working directory: its paths are the working directory's.
        let s = with_table("venv/bin/python", None);
        let plane = torch_plane_of(&s, Path::new("x.toml"), &TorchArgs::default());
        assert_eq!(
            plane.unwrap().unwrap().python,
            PathBuf::from("venv/bin/python")
        );
    }

    #[test]
    fn the_flag_overrides_the_table_and_a_lone_overlay_is_refused() {
        let s = with_table("venv/bin/python", Some("torch-src"));
        let flag = TorchArgs {
            python: Some(PathBuf::from("/usr/bin/python3")),
            elastic_src: None,
        };
        let plane = torch_plane_of(&s, Path::new("d/x.toml"), &flag)
            .unwrap()
            .unwrap();
        assert_eq!(plane.python, PathBuf::from("/usr/bin/python3"));
        assert_eq!(plane.elastic_src, None, "--torch replaces the whole table");
        let overlay = TorchArgs {
            python: None,
            elastic_src: Some(PathBuf::from("/src/pytorch")),
        };
        let plane = torch_plane_of(&s, Path::new("d/x.toml"), &overlay);
        let plane = plane.unwrap().unwrap();
        assert_eq!(plane.python, PathBuf::from("d/venv/bin/python"));
        assert_eq!(plane.elastic_src, Some(PathBuf::from("/src/pytorch")));
        let plain = crate::scenario::default_scenario("model");
        let refused = torch_plane_of(&plain, Path::new("d/x.toml"), &overlay).unwrap_err();
        assert!(
            refused.contains("--torch-elastic-src /src/pytorch"),
            "{refused}"
        );
        let none = torch_plane_of(&plain, Path::new("d/x.toml"), &TorchArgs::default());
        assert_eq!(none, Ok(None));
    }

    #[test]
    fn a_repro_names_absolute_paths_or_a_command() {
        let plane = TorchPlane {
            python: PathBuf::from("venv/bin/python"),
            elastic_src: Some(PathBuf::from("src")),
        };
        let section = section_of(&plane);
        assert!(Path::new(&section.python).is_absolute(), "{section:?}");
        assert!(section.python.ends_with("venv/bin/python"), "{section:?}");
        assert!(section
            .elastic_src
            .as_deref()
            .is_some_and(|s| s.starts_with('/')));
        let bare = TorchPlane {
            python: PathBuf::from("python3"),
            elastic_src: None,
        };
        assert_eq!(section_of(&bare).python, "python3");
    }
}
