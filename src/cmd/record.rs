//! `scen record -o job.toml -- <launcher and program>`: runs a real torch.distributed program
//! unchanged, with python/scen/recorder.py loaded into every Python process it starts (a
//! private directory first on PYTHONPATH holding the recorder and a sitecustomize.py that
//! installs it), then turns every rank's records into one scenario (scen_core::record) and
//! writes it through src/output.rs. docs/record.md.

use scen::exit_code::Exit;
use scen_core::record::{self, Options, RecordError};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The recorder, shipped inside the binary (the same file the Python package installs).
const RECORDER: &str = include_str!("../../python/scen/recorder.py");
const SITECUSTOMIZE: &str = "# scen record: load the call recorder into this interpreter (python/scen/recorder.py).\nimport scen.recorder\nscen.recorder.install()\n";
/// How long a launcher has to stop its workers after SIGTERM before it is killed.
const TERM_GRACE: Duration = Duration::from_secs(15);

#[derive(clap::Args)]
pub struct RecordArgs {
    /// Where to write the scenario.
    #[arg(short = 'o', long = "out", required = true)]
    pub out: PathBuf,
    /// Re-target the scenario to this platform (xpu, cuda, cpu): CPU tensors move to it.
    #[arg(long, value_name = "xpu|cuda|cpu")]
    pub platform: Option<String>,
    /// With --platform: device groups that used gloo (or no backend) use this backend (xccl);
    /// groups made with an explicit gloo backend stay gloo on the CPU.
    #[arg(long, requires = "platform")]
    pub backend: Option<String>,
    /// End the program after this many seconds (SIGTERM to the launcher); ranks still in a
    /// call are recorded as hanging there.
    #[arg(long, value_name = "S")]
    pub timeout_s: Option<u64>,
    /// Also keep the raw records and the run's facts in this (new or empty) directory, for
    /// `--from` later.
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Translate records `--keep` kept again (e.g. with --platform xpu --backend xccl) instead
    /// of running a program.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["keep", "timeout_s", "command"])]
    pub from: Option<PathBuf>,
    /// The launcher and program, after `--` (torchrun --nproc-per-node 4 prog.py, python prog.py).
    #[arg(last = true, required_unless_present = "from", value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// The recorder's private directory, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch() -> std::io::Result<Scratch> {
    use std::os::unix::fs::DirBuilderExt;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!("scen-record-{}-{nanos}", std::process::id()));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    let s = Scratch(dir);
    std::fs::create_dir(s.0.join("scen"))?;
    std::fs::create_dir(s.0.join("records"))?;
    std::fs::write(s.0.join("scen/__init__.py"), "")?;
    std::fs::write(s.0.join("scen/recorder.py"), RECORDER)?;
    std::fs::write(s.0.join("sitecustomize.py"), SITECUSTOMIZE)?;
    Ok(s)
}

/// The launcher as scen runs it: its path, where it was found, and the Python it runs (the
/// interpreter itself, or a script's `#!` line), so the ranks' environment is the launcher's.
struct Launcher {
    path: PathBuf,
    from: &'static str,
    python: Option<PathBuf>,
}

/// The launcher: a path as given, else the first on PATH (no other place: torchrun and the
/// Python it starts come from one environment, the one the user's PATH picks).
fn resolve(name: &str) -> Result<Launcher, String> {
    let path = if name.contains('/') {
        let p = PathBuf::from(name);
        if !p.is_file() {
            return Err(format!("launcher `{name}` not found (no such file)"));
        }
        (p, "as given")
    } else {
        let found = on_path(name).ok_or_else(|| {
            format!(
                "launcher `{name}` not found on PATH: activate the environment that has torch, \
                 or install it into the one you run scen from (`pip install torch` brings \
                 torchrun), or give the launcher's path"
            )
        })?;
        (found, "first on PATH")
    };
    let python = interpreter(&path.0);
    Ok(Launcher {
        path: path.0,
        from: path.1,
        python,
    })
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The Python a launcher runs: itself when it is one (`python3`), else its `#!` line's
/// interpreter (`torchrun` is a script of the venv it was installed into); `None` for others.
fn interpreter(launcher: &Path) -> Option<PathBuf> {
    let name = launcher.file_name()?.to_string_lossy();
    if name.starts_with("python") {
        return Some(launcher.to_path_buf());
    }
    let mut head = [0u8; 256];
    let n = std::io::Read::read(&mut std::fs::File::open(launcher).ok()?, &mut head).ok()?;
    let first = std::str::from_utf8(&head[..n]).ok()?.lines().next()?;
    let mut words = first.strip_prefix("#!")?.split_whitespace();
    let prog = PathBuf::from(words.next()?);
    if prog.file_name().is_some_and(|f| f == "env") {
        return on_path(words.next()?);
    }
    prog.file_name()?
        .to_string_lossy()
        .starts_with("python")
        .then_some(prog)
}

/// What scen says before it starts the launcher: which one, and which Python the ranks get.
fn launcher_line(l: &Launcher) -> String {
    let python = match &l.python {
        Some(p) => format!("; its Python: {}", p.display()),
        None => String::new(),
    };
    format!(
        "scen record: running {} ({}){python}",
        l.path.display(),
        l.from
    )
}

/// `scen record`.
pub fn record(a: RecordArgs) -> Exit {
    match record_inner(&a) {
        Ok(exit) => exit,
        Err(RecordError::Invalid(e)) => {
            eprintln!("internal error: {}", RecordError::Invalid(e));
            Exit::Internal
        }
        Err(e) => super::fail(e.to_string()),
    }
}

fn record_inner(a: &RecordArgs) -> Result<Exit, RecordError> {
    let bad = |m: String| RecordError::BadOption(m);
    if let Some(from) = &a.from {
        let meta = super::records::load(from).map_err(bad)?;
        let procs = read_records(from)?;
        translate(a, procs, meta)?;
        return Ok(Exit::Ok);
    }
    let launcher = resolve(&a.command[0]).map_err(bad)?;
    eprintln!("{}", launcher_line(&launcher));
    let launcher = launcher.path;
    let dir = scratch().map_err(|e| bad(format!("cannot make the recorder's directory: {e}")))?;
    let records = dir.0.join("records");
    let mut py_path = std::ffi::OsString::from(&dir.0);
    if let Some(old) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
        py_path.push(":");
        py_path.push(old);
    }
    // Without it a recording keeps the default teardown (exit_ms): said, not fatal.
    let life = super::lifeline::Lifelines::listen(&dir.0.join("life.sock"))
        .inspect_err(|e| eprintln!("scen record: processes' ends not timed ({e})"))
        .ok();
    let mut cmd = Command::new(&launcher);
    cmd.args(&a.command[1..])
        .env("PYTHONPATH", py_path)
        .env("SCEN_RECORD_DIR", &records);
    if let Some(l) = &life {
        cmd.env("SCEN_RECORD_LIFE", l.path());
    }
    // Ctrl-C reaches the program (same process group); scen waits and records what it did.
    let guard = scen_procs::signals::Guard::arm().map_err(|e| bad(e.to_string()))?;
    let mut child = cmd
        .spawn()
        .map_err(|e| bad(format!("cannot start `{}`: {e}", launcher.display())))?;
    let started = Instant::now();
    let limit = a.timeout_s.map(Duration::from_secs);
    let mut timed_out = false;
    let mut cut_ms = None;
    let mut termed: Option<Instant> = None;
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if let (None, Some(sig)) = (termed, guard.received()) {
            // Ctrl-C reached the program too; SIGTERM or SIGHUP reached only scen: pass it on.
            if sig != 2 {
                let _ = scen_procs::group::terminate_process(child.id());
            }
            termed = Some(Instant::now());
        }
        if termed.is_none() && limit.is_some_and(|l| started.elapsed() >= l) {
            timed_out = true;
            // The recorder's clock (Python's time.time()), so the cut compares with its calls.
            cut_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_millis() as u64);
            eprintln!(
                "scen record: {} s passed; stopping the program (SIGTERM)",
                a.timeout_s.unwrap_or(0)
            );
            let _ = scen_procs::group::terminate_process(child.id());
            termed = Some(Instant::now());
        }
        if termed.is_some_and(|t| t.elapsed() > TERM_GRACE) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.wait();
    if let Some(l) = life {
        l.finish(&records);
    }
    let procs = read_records(&records)?;
    end_leftovers(&procs, &records);
    let meta = super::records::Meta {
        command: a.command.join(" "),
        cwd: std::env::current_dir()
            .ok()
            .map(|d| d.display().to_string()),
        timed_out,
        cut_ms,
    };
    if let Some(k) = &a.keep {
        super::records::keep(k, &records, &meta).map_err(bad)?;
    }
    translate(a, procs, meta)?;
    Ok(match guard.received() {
        Some(sig) => Exit::Signal(sig),
        None => Exit::Ok,
    })
}

/// The records as a scenario: written to --out, with what each rank did and the simulator's
/// self-check.
fn translate(
    a: &RecordArgs,
    procs: Vec<record::Proc>,
    meta: super::records::Meta,
) -> Result<(), RecordError> {
    let bad = |m: String| RecordError::BadOption(m);
    let o = Options {
        command: meta.command,
        platform: a.platform.clone(),
        backend: a.backend.clone(),
        timed_out: meta.timed_out,
        cut_ms: meta.cut_ms,
        cwd: meta.cwd,
    };
    let rec = record::record(procs, &o)?;
    scen::output::write_atomic(&a.out, rec.text.as_bytes()).map_err(|e| bad(e.to_string()))?;
    let out = a.out.display();
    let mut text = format!(
        "recorded {} rank(s), {} step(s): wrote {out} (check it: scen check {out}; simulate it: scen run {out})\n",
        rec.world, rec.steps
    );
    for l in &rec.outcomes {
        text.push_str(&format!("  {l}\n"));
    }
    for a in &rec.approximations {
        text.push_str(&format!("approximated: {a}\n"));
    }
    text.push_str(&self_check(&rec.text, &a.out));
    eprint!("{text}");
    Ok(())
}

/// The recording checks itself: simulated at once (seed 0), does every rank end as recorded?
/// Lines for the summary: a count, and per rank that differs, both outcomes.
fn self_check(text: &str, out: &Path) -> String {
    let name = out
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .to_string();
    let s = match scen_core::scenario::parse(text, &out.display().to_string(), &name) {
        Ok(s) => s,
        Err(e) => return format!("simulated: not run, the recording does not load: {e}\n"),
    };
    let r = match scen_sim::simulate(&s, None) {
        Ok(r) => r,
        Err(e) => return format!("simulated: not run: {e}\n"),
    };
    let checks = scen_core::verdict::check_expectations(&s, &r.ranks);
    let same = checks.iter().filter(|c| c.holds).count();
    let mut lines = format!(
        "simulated (seed 0): {same} of {} rank(s) end as recorded\n",
        checks.len()
    );
    for c in checks.iter().filter(|c| !c.holds) {
        lines.push_str(&format!(
            "  rank {}: recorded {}; simulated: {}\n",
            c.rank, c.expected, c.actual
        ));
    }
    lines
}

/// Every process's records (files in name order, so the result does not depend on the OS).
fn read_records(dir: &Path) -> Result<Vec<record::Proc>, RecordError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| RecordError::BadOption(format!("cannot read the records: {e}")))?
        .flatten()
        .filter(|e| super::records::is_record(&e.file_name()))
        .map(|e| e.path())
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let name = f
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let text = std::fs::read_to_string(&f).map_err(|e| RecordError::BadRecord {
            file: name.clone(),
            line: 0,
            message: e.to_string(),
        })?;
        out.push(record::parse(&name, &text)?);
    }
    Ok(out)
}

/// Kills recorded processes still alive after the launcher ended (workers of a launcher that
/// was killed): those whose environment names this recording's directory.
fn end_leftovers(procs: &[record::Proc], records: &Path) {
    let mark = format!("SCEN_RECORD_DIR={}", records.display());
    for p in procs {
        let env = std::fs::read(format!("/proc/{}/environ", p.pid)).unwrap_or_default();
        if env.split(|b| *b == 0).any(|v| v == mark.as_bytes()) {
            let _ = scen_procs::group::kill_process(p.pid as u32);
        }
    }
}
