//! A suite of scenarios as `scen test` and this repository's `cargo test` run it: find the
//! scenario files, run each in the simulator, check its `[[expect]]`, its snapshot and that the
//! same seed gives the same trace, and say per scenario what passed or failed. Optionally
//! under another launcher than the scenario's, or also under the other one for comparison.
//!
//! Snapshots are insta-compatible (see [`snapshot`]); where they live comes from `--snapshots`,
//! else `[test] snapshots` in a `scen.toml` (searched upwards from the first scenario path, then
//! from the current directory),
//! else `snapshots/` in the current directory.

pub mod snapshot;

use scen_core::scenario::{load_file, Launcher, Scenario};
use snapshot::{Location, SnapFile};
use std::path::{Path, PathBuf};

/// How a run treats a snapshot that differs or is missing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Write {
    /// Report it, write nothing.
    No,
    /// Write `NAME.snap.new` beside the snapshot (for `cargo insta review` or `--review`).
    Pending,
    /// Overwrite `NAME.snap` (`--update`, `INSTA_UPDATE=always`).
    Overwrite,
}

impl Write {
    /// insta's convention: `INSTA_UPDATE=always` overwrites, `no` writes nothing, otherwise
    /// pending `.snap.new` files except under CI.
    pub fn from_insta_env() -> Write {
        match std::env::var("INSTA_UPDATE").as_deref() {
            Ok("always") => Write::Overwrite,
            Ok("no") => Write::No,
            Ok("new") => Write::Pending,
            _ if std::env::var_os("CI").is_some() => Write::No,
            _ => Write::Pending,
        }
    }
}

/// What a suite run needs beyond the scenario list.
#[derive(Debug, Clone)]
pub struct Settings {
    pub snapshots: Location,
    /// Paths in snapshots are written relative to this directory (portable snapshots).
    pub root: PathBuf,
    pub write: Write,
    /// Seeds to re-run twice each, comparing traces (besides the scenario's own seed).
    pub determinism_seeds: Vec<u64>,
    /// Check every scenario under this launcher instead of its `[world] launcher`.
    pub launcher: Option<Launcher>,
    /// Also simulate each scenario under the other launcher and note where its verdict class
    /// differs (no snapshot, no expectation: a note, not a failure).
    pub compare_launchers: bool,
}

/// One scenario's result.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub name: String,
    pub file: PathBuf,
    pub status: Status,
    /// Why it failed, one problem per entry.
    pub problems: Vec<Problem>,
    /// The snapshot's path, and the old and new bodies when they differ.
    pub snapshot: Option<SnapChange>,
    /// Remarks that are not problems (the verdict under the other launcher).
    pub notes: Vec<String>,
}

/// One reason a scenario failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub kind: ProblemKind,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ProblemKind {
    /// The scenario file is invalid or the simulation could not run.
    Invalid,
    /// A rank's `[[expect]]` does not hold.
    Expectation,
    /// Two runs of one seed differ.
    Determinism,
    /// The snapshot differs, is missing, or cannot be read or written.
    Snapshot,
}

impl Problem {
    fn new(kind: ProblemKind, text: impl Into<String>) -> Problem {
        Problem {
            kind,
            text: text.into(),
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            ProblemKind::Invalid => write!(f, "{}", self.text),
            ProblemKind::Expectation => write!(f, "expectation: {}", self.text),
            ProblemKind::Determinism => write!(f, "determinism: {}", self.text),
            ProblemKind::Snapshot => write!(f, "snapshot: {}", self.text),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Passed,
    /// Passed after its snapshot was written (`--update` or a new snapshot).
    Updated,
    Failed,
    /// The scenario file is invalid or the simulation could not run.
    Invalid,
    /// Its expectations hold and its runs are deterministic, but it has no snapshot yet (a
    /// new scenario, a first `scen test`): `scen test --update` writes one. Not a failure of
    /// the scenario; `scen test` fails on it only under CI.
    NoSnapshot,
}

#[derive(Debug, Clone)]
pub struct SnapChange {
    pub path: PathBuf,
    /// `None` when the scenario has no snapshot yet.
    pub old: Option<SnapFile>,
    pub new_body: String,
}

/// Errors in the suite's own input (paths, scen.toml): exit 2.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("{0}: no such file or directory")]
    NoSuchPath(PathBuf),
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Config { path: PathBuf, message: String },
}

/// Every `*.toml` scenario under `paths` (files as given, directories recursively), sorted,
/// skipping `scen.toml`; only names containing `pattern` when given.
pub fn discover(paths: &[PathBuf], pattern: Option<&str>) -> Result<Vec<PathBuf>, SuiteError> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut files)?;
        } else if p.is_file() {
            files.push(p.clone());
        } else {
            return Err(SuiteError::NoSuchPath(p.clone()));
        }
    }
    files.sort();
    files.dedup();
    if let Some(pat) = pattern {
        files.retain(|f| {
            f.file_stem()
                .is_some_and(|s| s.to_string_lossy().contains(pat))
        });
    }
    Ok(files)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), SuiteError> {
    let read = |e| SuiteError::Read {
        path: dir.to_path_buf(),
        source: e,
    };
    for entry in std::fs::read_dir(dir).map_err(read)? {
        let path = entry.map_err(read)?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "toml")
            && path.file_name().is_some_and(|n| n != "scen.toml")
        {
            out.push(path);
        }
    }
    Ok(())
}

/// The snapshot location: `flag`, else `[test] snapshots` of the nearest `scen.toml` at or
/// above the first scenario path (so `scen test /repo/scenarios` from anywhere finds the
/// repo's snapshots, as cargo finds a manifest), else at or above `cwd`, else `cwd/snapshots`.
/// Also gives the root that paths are relative to.
pub fn locate_snapshots(
    flag: Option<&str>,
    first_path: Option<&Path>,
    cwd: &Path,
) -> Result<(Location, PathBuf), SuiteError> {
    if let Some(f) = flag {
        return Ok((Location::parse(f, cwd), cwd.to_path_buf()));
    }
    let from_path = first_path.map(|p| {
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.join(p)
        };
        if p.is_dir() {
            p
        } else {
            p.parent().map(Path::to_path_buf).unwrap_or(p)
        }
    });
    for start in from_path.iter().map(PathBuf::as_path).chain([cwd]) {
        for dir in start.ancestors() {
            let cfg = dir.join("scen.toml");
            if cfg.is_file() {
                return Ok((config_location(&cfg, dir)?, dir.to_path_buf()));
            }
        }
    }
    Ok((Location::Dir(cwd.join("snapshots")), cwd.to_path_buf()))
}

fn config_location(cfg: &Path, dir: &Path) -> Result<Location, SuiteError> {
    let text = std::fs::read_to_string(cfg).map_err(|e| SuiteError::Read {
        path: cfg.to_path_buf(),
        source: e,
    })?;
    let bad = |message: String| SuiteError::Config {
        path: cfg.to_path_buf(),
        message,
    };
    let table: toml::Table = toml::from_str(&text).map_err(|e| bad(e.message().to_string()))?;
    let snapshots = table
        .get("test")
        .and_then(|t| t.get("snapshots"))
        .map(|v| {
            v.as_str().map(str::to_string).ok_or_else(|| {
                bad("[test] snapshots must be a string (a directory or \"beside\")".into())
            })
        })
        .transpose()?;
    Ok(Location::parse(
        snapshots.as_deref().unwrap_or("snapshots"),
        dir,
    ))
}

/// Runs one scenario and checks it (never panics on bad input: that is [`Status::Invalid`]).
pub fn run_one(file: &Path, settings: &Settings) -> Outcome {
    let name = file
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    let mut out = Outcome {
        name,
        file: file.to_path_buf(),
        status: Status::Passed,
        problems: Vec::new(),
        snapshot: None,
        notes: Vec::new(),
    };
    let scenario = match load_file(file) {
        Ok(mut s) => {
            s.file = relative(file, &settings.root);
            if let Some(l) = settings.launcher {
                s.world.launcher = l;
            }
            s
        }
        Err(e) => return out.invalid(e.to_string()),
    };
    out.name = scenario.name.clone();
    let report = match scen_sim::simulate(&scenario, None) {
        Ok(r) => r,
        Err(e) => return out.invalid(format!("{}: {e}", file.display())),
    };
    for e in report.expectations.iter().filter(|e| !e.holds) {
        out.problems.push(Problem::new(
            ProblemKind::Expectation,
            format!("rank {}: expected {}, got {}", e.rank, e.expected, e.actual),
        ));
    }
    out.problems
        .extend(determinism(&scenario, &report, settings));
    check_snapshot(&mut out, &scenario, &report, settings);
    if settings.compare_launchers {
        out.notes.extend(other_launcher_note(&scenario, &report));
    }
    if !out.problems.is_empty() {
        out.status = Status::Failed;
    }
    out
}

impl Outcome {
    /// What a [`Status::NoSnapshot`] outcome says where a problem would be.
    pub fn no_snapshot_text(&self) -> String {
        let path = self.snapshot.as_ref().map(|c| c.path.display().to_string());
        format!(
            "no snapshot yet ({} does not exist): `scen test --update` writes it",
            path.unwrap_or_default()
        )
    }

    fn invalid(mut self, message: String) -> Outcome {
        self.status = Status::Invalid;
        self.problems
            .push(Problem::new(ProblemKind::Invalid, message));
        self
    }
}

/// The scenario simulated at the same seed under the other launcher: a note when its verdict
/// class differs from `own`'s (or when that simulation cannot run).
fn other_launcher_note(s: &Scenario, own: &scen_core::report::Report) -> Option<String> {
    use scen_core::class::class_key;
    let mut o = s.clone();
    o.world.launcher = crate::launcher::other(s.world.launcher);
    let name = o.world.launcher.name();
    match scen_sim::simulate(&o, Some(own.seed)) {
        Ok(r) => {
            let class = class_key(&o, &r);
            (class != class_key(s, own))
                .then(|| format!("launcher: {} verdict differs under {name}: {class}", s.name))
        }
        Err(e) => Some(format!(
            "launcher: {} cannot be simulated under {name}: {e}",
            s.name
        )),
    }
}

fn relative(file: &Path, root: &Path) -> String {
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (f, r) = (abs(file), abs(root));
    f.strip_prefix(&r)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| file.display().to_string())
}

/// Same seed => same trace, call records and diagnosis: the scenario's seed and each of
/// `settings.determinism_seeds`, each run twice.
fn determinism(
    s: &Scenario,
    first: &scen_core::report::Report,
    settings: &Settings,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    let again = |seed: Option<u64>| scen_sim::simulate(s, seed).map_err(|e| e.to_string());
    let mut pairs = vec![(first.seed, Ok(first.clone()), again(Some(first.seed)))];
    for &seed in &settings.determinism_seeds {
        pairs.push((seed, again(Some(seed)), again(Some(seed))));
    }
    for (seed, a, b) in pairs {
        match (a, b) {
            (Ok(a), Ok(b)) => {
                if a.trace.render() != b.trace.render() || a.trace_hash != b.trace_hash {
                    problems.push(Problem::new(
                        ProblemKind::Determinism,
                        format!(
                            "seed {seed}: two runs gave different traces ({} vs {})",
                            a.trace_hash, b.trace_hash
                        ),
                    ));
                } else if a.calls != b.calls
                    || a.diagnosis.lines(&s.file) != b.diagnosis.lines(&s.file)
                {
                    problems.push(Problem::new(
                        ProblemKind::Determinism,
                        format!("seed {seed}: same trace, different call records or diagnosis"),
                    ));
                }
            }
            (Err(e), _) | (_, Err(e)) => problems.push(Problem::new(
                ProblemKind::Invalid,
                format!("seed {seed}: {e}"),
            )),
        }
    }
    problems
}

fn check_snapshot(
    out: &mut Outcome,
    s: &Scenario,
    r: &scen_core::report::Report,
    settings: &Settings,
) {
    let path = settings.snapshots.path_for(&out.file, &s.name);
    let new_body = snapshot::body(s, r);
    let old = match SnapFile::read(&path) {
        Ok(old) => old,
        Err(e) => {
            out.problems.push(Problem::new(
                ProblemKind::Snapshot,
                format!("cannot read {}: {e}", path.display()),
            ));
            return;
        }
    };
    let pending = snapshot::pending_path(&path);
    if old.as_ref().is_some_and(|o| o.matches(&new_body)) {
        // A stale pending file from an earlier failing run would mislead `cargo insta review`.
        let _ = std::fs::remove_file(&pending);
        return;
    }
    let header = old.as_ref().map(|o| o.header.clone());
    let text = SnapFile::render(header.as_deref(), &new_body);
    if settings.write != Write::No {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
    }
    let written = match settings.write {
        Write::No => Ok(false),
        Write::Pending => crate::output::write_whole(&pending, text.as_bytes()).map(|_| false),
        Write::Overwrite => crate::output::write_whole(&path, text.as_bytes()).map(|_| {
            let _ = std::fs::remove_file(&pending);
            true
        }),
    };
    match written {
        Ok(true) => out.status = Status::Updated,
        Ok(false) if old.is_none() => out.status = Status::NoSnapshot,
        Ok(false) => out.problems.push(Problem::new(
            ProblemKind::Snapshot,
            format!("differs from {}", path.display()),
        )),
        Err(e) => out
            .problems
            .push(Problem::new(ProblemKind::Snapshot, format!("{e:#}"))),
    }
    out.snapshot = Some(SnapChange {
        path,
        old,
        new_body,
    });
}

/// Accepts a reviewed snapshot: writes it, removes its pending file.
pub fn accept(change: &SnapChange) -> anyhow::Result<()> {
    let header = change.old.as_ref().map(|o| o.header.as_str());
    let text = SnapFile::render(header, &change.new_body);
    crate::output::write_whole(&change.path, text.as_bytes())?;
    let _ = std::fs::remove_file(snapshot::pending_path(&change.path));
    Ok(())
}

/// Runs `files` on `jobs` threads; `on_done` sees outcomes in file order as soon as each is
/// known (so output is the same whatever `jobs` is).
pub fn run_all(
    files: &[PathBuf],
    settings: &Settings,
    jobs: usize,
    on_done: &mut dyn FnMut(&Outcome),
) -> Vec<Outcome> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel();
    let mut done: Vec<Option<Outcome>> = vec![None; files.len()];
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, files.len().max(1)) {
            let tx = tx.clone();
            let next = &next;
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(f) = files.get(i) else { break };
                if tx.send((i, run_one(f, settings))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut shown = 0;
        for (i, o) in rx {
            done[i] = Some(o);
            while let Some(Some(o)) = done.get(shown) {
                on_done(o);
                shown += 1;
            }
        }
    });
    done.into_iter().flatten().collect()
}

impl Outcome {
    /// Accepts this outcome's changed snapshot (review): writes it; the scenario then passes
    /// unless it had other problems.
    pub fn accept_snapshot(&mut self) -> anyhow::Result<()> {
        if let Some(change) = &self.snapshot {
            accept(change)?;
            self.problems.retain(|p| p.kind != ProblemKind::Snapshot);
            if self.problems.is_empty() {
                self.status = Status::Updated;
            }
        }
        Ok(())
    }
}
