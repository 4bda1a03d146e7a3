//! The flight-recorder commands' glue: `scen import-fr DIR` (read a job's per-rank dumps, print
//! core's diagnosis of them, write a replay scenario) and `scen run --export-fr DIR` (write a
//! run's calls as per-rank dumps). The format and the conversions live in `scen_core::fr`.

use anyhow::{bail, Context};
use scen::exit::Exit;
use scen_core::diagnose::CallRecord;
use scen_core::fr::export::{self, Format};
use scen_core::fr::{import, Dump, Job};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// `--fr-format`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum FrFormat {
    Pickle,
    Json,
}

impl From<FrFormat> for Format {
    fn from(f: FrFormat) -> Format {
        match f {
            FrFormat::Pickle => Format::Pickle,
            FrFormat::Json => Format::Json,
        }
    }
}

/// The rank a dump file is for: the digits its name ends with (`nccl_trace_rank_3`,
/// `trace_3.json`), as `torchfrtrace` finds them.
fn rank_of(name: &str) -> Option<usize> {
    let stem = name
        .strip_suffix(".json")
        .or_else(|| name.strip_suffix(".pkl"))
        .unwrap_or(name);
    let digits: String = stem
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().ok()
}

/// Reads every dump in `dir` (not recursive; files whose name ends in no rank are skipped).
pub fn read_dir(dir: &Path) -> anyhow::Result<BTreeMap<usize, Dump>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot read the directory", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    let mut dumps: BTreeMap<usize, (PathBuf, Dump)> = BTreeMap::new();
    for f in files {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let Some(rank) = rank_of(&name) else { continue };
        let bytes = std::fs::read(&f).with_context(|| format!("{}: cannot read", f.display()))?;
        let dump = Dump::from_bytes(&bytes).with_context(|| format!("{}", f.display()))?;
        if let Some((other, _)) = dumps.get(&rank) {
            bail!(
                "two dumps for rank {rank}: {} and {} (one job's dumps per directory)",
                other.display(),
                f.display()
            );
        }
        dumps.insert(rank, (f, dump));
    }
    if dumps.is_empty() {
        bail!(
            "{}: no flight-recorder dumps (files named like nccl_trace_rank_0)",
            dir.display()
        );
    }
    Ok(dumps.into_iter().map(|(r, (_, d))| (r, d)).collect())
}

/// `scen import-fr`.
pub fn import_cmd(dir: &Path, out: Option<&Path>, allow_incomplete: bool) -> Exit {
    match import_inner(dir, out, allow_incomplete) {
        Ok(()) => Exit::Ok,
        Err(e) => {
            eprintln!("error: {e:#}");
            Exit::Invalid
        }
    }
}

fn import_inner(dir: &Path, out: Option<&Path>, allow_incomplete: bool) -> anyhow::Result<()> {
    let job = Job::new(read_dir(dir)?)?;
    if !allow_incomplete {
        job.require_complete()?;
    }
    let name = out
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "replay.toml".into());
    let imp = import(&job, &dir.display().to_string())?;
    // Printed at the end in one write, whose failure (a closed pipe) is ignored.
    let mut o = String::new();
    macro_rules! outln {
        ($o:ident, $($a:tt)*) => {{
            let _ = writeln!($o, $($a)*);
        }};
    }
    let version = job
        .dumps
        .values()
        .next()
        .map(|d| d.version.as_str())
        .unwrap_or("");
    outln!(
        o,
        "import-fr: {} dumps from {} (flight recorder version {version}), {} ranks",
        job.dumps.len(),
        dir.display(),
        job.world
    );
    for n in &imp.notes {
        outln!(o, "note: {n}");
    }
    for l in &imp.status {
        outln!(o, "{l}");
    }
    let lines = imp.diagnosis.lines(&name);
    if lines.is_empty() {
        outln!(
            o,
            "diagnosis: every rank completed every recorded call; the calls agree"
        );
    } else {
        outln!(o, "diagnosis:");
        for l in lines {
            outln!(o, "  {l}");
        }
    }
    match out {
        Some(path) => {
            scen::output::write_whole(path, imp.scenario.as_bytes())?;
            outln!(
                o,
                "wrote {} (replay it: scen run {})",
                path.display(),
                path.display()
            );
        }
        None => outln!(o, "(pass -o FILE to write the replay scenario)"),
    }
    let _ = std::io::stdout().write_all(o.as_bytes());
    Ok(())
}

/// `scen run --export-fr DIR`: one dump per rank of the run.
pub fn export_run(
    dir: &Path,
    format: FrFormat,
    world: usize,
    calls: &[CallRecord],
) -> anyhow::Result<()> {
    let files = export::write_dir(dir, &export::dumps(world, calls), format.into())
        .with_context(|| format!("cannot write flight-recorder dumps to {}", dir.display()))?;
    eprintln!(
        "wrote {} flight-recorder dumps to {}",
        files.len(),
        dir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::rank_of;

    #[test]
    fn ranks_come_from_trailing_digits() {
        assert_eq!(rank_of("nccl_trace_rank_12"), Some(12));
        assert_eq!(rank_of("nccl_trace_rank_3.json"), Some(3));
        assert_eq!(rank_of("README"), None);
    }
}
