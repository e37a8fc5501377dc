//! The host process: one Python interpreter with torch imported, leased to one run at a time.
//!
//! Importing torch takes seconds, so a host outlives its run: it goes back to a pool keyed by
//! the plane (interpreter and overlay) and the next run on the same thread or another takes
//! it. Every answer the host owes is awaited under a wall-clock watchdog: Python that never
//! yields back to the simulator is stopped, its threads' stacks taken from its stderr (the
//! host dumps them on SIGUSR1), and reported as a harness error rather than a hang. The
//! watchdog only ever ends a run that would not end; it never changes what a run does.

use super::{ProbeError, TorchInfo, TorchPlane};
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long the host may take to import torch and answer its hello.
const HELLO_WALL_MAX: Duration = Duration::from_secs(300);
/// How long one piece of Python may run before the simulator gets its next call, unless
/// `TRAINSIM_TORCH_WALL_MAX_S` says otherwise (whole seconds, at least 1).
const ANSWER_WALL_MAX: Duration = Duration::from_secs(120);

/// The watchdog's bound in force.
fn answer_wall_max() -> Duration {
    static BOUND: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *BOUND.get_or_init(|| {
        std::env::var("TRAINSIM_TORCH_WALL_MAX_S")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|&s| s >= 1)
            .map_or(ANSWER_WALL_MAX, Duration::from_secs)
    })
}
/// How much of the host's stderr is kept, for the errors that quote it.
const STDERR_TAIL_BYTES_MAX: usize = 64 * 1024;
/// How many of the host's last stderr lines an error quotes: enough for every thread's
/// stack that the watchdog's dump prints (a few threads per node of a small run).
const STDERR_LINES_QUOTED: usize = 400;
/// Idle hosts kept per plane (one per thread a command runs runs on, in practice).
const POOLED_PER_PLANE_MAX: usize = 8;
/// The oldest torch whose elastic code the seam is known to fit.
const TORCH_OLDEST: (u32, u32) = (2, 4);

/// A host broke its protocol, died, or ran past the watchdog.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct HostError {
    pub message: String,
}

/// One running host process.
pub struct Host {
    child: Child,
    stdin: ChildStdin,
    answers: Answers,
    stderr_tail: Arc<Mutex<VecDeque<u8>>>,
    pub info: TorchInfo,
    plane: TorchPlane,
    /// Set once the host failed: it is never pooled again.
    broken: bool,
}

impl Host {
    /// Starts a host for `plane` and reads its hello.
    fn start(plane: &TorchPlane) -> Result<Host, ProbeError> {
        let script = super::sources::host_script()
            .map_err(|e| ProbeError(format!("cannot write the torch host's sources: {e}")))?;
        let mut command = Command::new(&plane.python);
        command.arg("-s").arg("-B").arg(&script);
        if let Some(src) = &plane.elastic_src {
            command.arg("--overlay").arg(src);
        }
        let mut child = command
            .env("PYTHONHASHSEED", "0")
            .env("TZ", "UTC")
            .env("LOGLEVEL", "ERROR")
            .env("OMP_NUM_THREADS", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| ProbeError(format!("{}: cannot start it: {e}", plane.python.display())))?;
        let stdin = child.stdin.take().expect("piped stdin");
        let answers = Answers::new(child.stdout.take().expect("piped stdout"));
        let stderr_tail = keep_tail(child.stderr.take().expect("piped stderr"));
        let mut host = Host {
            child,
            stdin,
            answers,
            stderr_tail,
            info: TorchInfo {
                torch_version: String::new(),
                python_version: String::new(),
                overlay_hash: None,
            },
            plane: plane.clone(),
            broken: false,
        };
        host.info = host.hello()?;
        Ok(host)
    }

    fn hello(&mut self) -> Result<TorchInfo, ProbeError> {
        let python = self.plane.python.display().to_string();
        let answer = self
            .ask_within(&json!({"cmd": "hello"}), HELLO_WALL_MAX)
            .map_err(|e| ProbeError(format!("{python}: {}", first_line(&e.message))))?;
        if let Some(error) = answer.get("hello_error").and_then(Value::as_str) {
            let what = match &self.plane.elastic_src {
                Some(src) if error.contains("Error") => {
                    format!("torch (with the overlay {}) does not import", src.display())
                }
                _ => "cannot import torch".to_owned(),
            };
            return Err(ProbeError(format!("{python}: {what}: {error}")));
        }
        let info: TorchInfo = serde_json::from_value(answer["hello"].clone())
            .map_err(|e| ProbeError(format!("{python}: a hello that is not one ({e})")))?;
        check_version(&python, &info.torch_version)?;
        Ok(info)
    }

    /// Sends one command and waits for its answer under the watchdog.
    pub fn ask(&mut self, message: &Value) -> Result<Value, HostError> {
        self.ask_within(message, answer_wall_max())
    }

    fn ask_within(&mut self, message: &Value, wall_max: Duration) -> Result<Value, HostError> {
        if self.broken {
            return Err(self.error("the torch host failed earlier in this run"));
        }
        let mut line = serde_json::to_string(message).expect("a command serializes");
        line.push('\n');
        if let Err(e) = self
            .stdin
            .write_all(line.as_bytes())
            .and_then(|()| self.stdin.flush())
        {
            return Err(self.fail(&format!("the torch host is gone ({e})")));
        }
        match self.answers.next(wall_max) {
            Ok(Some(answer)) => {
                let value: Value = serde_json::from_str(&answer)
                    .map_err(|e| self.fail(&format!("the torch host answered garbage ({e})")))?;
                if let Some(error) = value.get("host_error").and_then(Value::as_str) {
                    let stack = value.get("stack").and_then(Value::as_str).unwrap_or("");
                    return Err(self.fail(&format!("the torch host failed: {error}\n{stack}")));
                }
                Ok(value)
            }
            Ok(None) => Err(self.stuck(wall_max)),
            Err(e) => Err(self.fail(&format!("the torch host exited ({e})"))),
        }
    }

    /// The watchdog fired: ask the host for its threads' stacks, then end it.
    fn stuck(&mut self, wall_max: Duration) -> HostError {
        #[cfg(target_os = "linux")]
        // SAFETY: kill(2) on our own child's pid, which is still ours until we wait on it.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGUSR1);
        }
        std::thread::sleep(Duration::from_millis(500));
        self.fail(&format!(
            "Python ran for more than {} s of wall time without yielding to the simulator",
            wall_max.as_secs()
        ))
    }

    fn fail(&mut self, why: &str) -> HostError {
        self.broken = true;
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.error(why)
    }

    fn error(&self, why: &str) -> HostError {
        let tail = self.stderr_tail.lock().expect("stderr tail lock");
        let text: Vec<u8> = tail.iter().copied().collect();
        let text = String::from_utf8_lossy(&text);
        let last: Vec<&str> = text.lines().rev().take(STDERR_LINES_QUOTED).collect();
        let last: Vec<&str> = last.into_iter().rev().collect();
        HostError {
            message: format!(
                "{why} ({} with {}); the host's last output:\n{}",
                self.info.torch_version,
                self.plane.python.display(),
                last.join("\n")
            ),
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

/// `major.minor` of a `torch.__version__` (`2.15.0+cu132`).
pub fn torch_release(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Refuses a torch older than the seam knows.
fn check_version(python: &str, version: &str) -> Result<(), ProbeError> {
    match torch_release(version) {
        Some(release) if release >= TORCH_OLDEST => Ok(()),
        _ => Err(ProbeError(format!(
            "{python}: torch {version} is not supported (the oldest is {}.{})",
            TORCH_OLDEST.0, TORCH_OLDEST.1
        ))),
    }
}

/// The host's answers, a line each, read on the run's own thread: a round trip is the
/// simulator's main cost per Python call, and a reader thread would add two thread
/// switches to each. `poll(2)` bounds the wait for the watchdog.
struct Answers {
    stdout: BufReader<ChildStdout>,
}

impl Answers {
    fn new(stdout: ChildStdout) -> Self {
        Answers {
            stdout: BufReader::with_capacity(1 << 16, stdout),
        }
    }

    /// The next line; `None` when none came within `wall_max`.
    fn next(&mut self, wall_max: Duration) -> std::io::Result<Option<String>> {
        if self.stdout.buffer().is_empty() && !readable_within(&self.stdout, wall_max)? {
            return Ok(None);
        }
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "end of output",
            ));
        }
        Ok(Some(line))
    }
}

/// Whether the pipe has something to read within `wall_max`.
fn readable_within(stdout: &BufReader<ChildStdout>, wall_max: Duration) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd {
        fd: stdout.get_ref().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let timeout_ms = i32::try_from(wall_max.as_millis()).unwrap_or(i32::MAX);
    loop {
        // SAFETY: one valid pollfd on a descriptor this process owns, for the call's length.
        let ready = unsafe { libc::poll(&mut fd, 1, timeout_ms) };
        match ready {
            0 => return Ok(false),
            n if n > 0 => return Ok(true),
            _ => {
                let error = std::io::Error::last_os_error();
                if error.kind() != std::io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }
        }
    }
}

/// Keeps the last bytes the host wrote to stderr.
fn keep_tail(stderr: impl Read + Send + 'static) -> Arc<Mutex<VecDeque<u8>>> {
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    let kept = Arc::clone(&tail);
    std::thread::spawn(move || {
        let mut stderr = stderr;
        let mut buffer = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut buffer) {
            if n == 0 {
                return;
            }
            let mut tail = kept.lock().expect("stderr tail lock");
            tail.extend(&buffer[..n]);
            let over = tail.len().saturating_sub(STDERR_TAIL_BYTES_MAX);
            tail.drain(..over);
        }
    });
    tail
}

/// Idle hosts, by plane.
static POOL: Mutex<BTreeMap<TorchPlane, Vec<Host>>> = Mutex::new(BTreeMap::new());
/// Each plane's probe, made once per process.
static PROBED: Mutex<BTreeMap<TorchPlane, Result<TorchInfo, ProbeError>>> =
    Mutex::new(BTreeMap::new());

/// A host for `plane`: an idle one from the pool, or a new one.
pub fn lease(plane: &TorchPlane) -> Result<Host, ProbeError> {
    let pooled = POOL
        .lock()
        .expect("host pool lock")
        .get_mut(plane)
        .and_then(Vec::pop);
    match pooled {
        Some(host) => Ok(host),
        None => Host::start(plane),
    }
}

/// Starts one more host for `plane` and pools it: Python's start and torch's import, which
/// a run pays once per thread (`trainsim bench` times it).
pub fn start_another(plane: &TorchPlane) -> Result<(), ProbeError> {
    give_back(Host::start(plane)?);
    Ok(())
}

/// Puts a host back for the next run, unless it failed.
pub fn give_back(host: Host) {
    if host.broken {
        return;
    }
    let mut pool = POOL.lock().expect("host pool lock");
    let idle = pool.entry(host.plane.clone()).or_default();
    if idle.len() < POOLED_PER_PLANE_MAX {
        idle.push(host);
    }
}

/// See [`super::probe`].
pub fn probe(plane: &TorchPlane) -> Result<TorchInfo, ProbeError> {
    if let Some(known) = PROBED.lock().expect("probe lock").get(plane) {
        return known.clone();
    }
    // A bare name (`python3`) is found on PATH when the host starts; a path must exist.
    let is_path = plane.python.components().count() > 1;
    let result = if plane.python.as_os_str().is_empty() || (is_path && !plane.python.exists()) {
        Err(ProbeError(format!(
            "{}: no such Python interpreter",
            plane.python.display()
        )))
    } else {
        lease(plane).map(|host| {
            let info = host.info.clone();
            give_back(host);
            info
        })
    };
    PROBED
        .lock()
        .expect("probe lock")
        .insert(plane.clone(), result.clone());
    result
}
