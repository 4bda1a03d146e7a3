//! The flight-recorder commands' glue: `scen import-fr DIR` (read a job's per-rank dumps, print
//! core's diagnosis of them, write a replay scenario) and `scen run --export-fr DIR` (write a
//! run's calls as per-rank dumps). The format and the conversions live in `scen_core::fr`.

use crate::cli::ImportFrArgs;
use anyhow::{bail, Context};
use scen::exit_code::Exit;
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

/// The dumps read from a directory, and what was set aside on the way.
pub struct Read {
    pub dumps: BTreeMap<usize, Dump>,
    pub notes: Vec<String>,
}

/// Reads every dump in `dir` (not recursive; files whose name ends in no rank are skipped). An
/// empty file is what a rank that died while writing its dump leaves: with `allow_empty` that
/// rank counts as without a dump (a note says so), else it is an error.
pub fn read_dir(dir: &Path, allow_empty: bool) -> anyhow::Result<Read> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot read the directory", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    let mut dumps: BTreeMap<usize, (PathBuf, Dump)> = BTreeMap::new();
    let mut notes = Vec::new();
    let mut empty = 0;
    for f in files {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let Some(rank) = rank_of(&name) else { continue };
        let bytes = std::fs::read(&f).with_context(|| format!("{}: cannot read", f.display()))?;
        if bytes.is_empty() {
            if !allow_empty {
                bail!(
                    "{}: empty (0 bytes: rank {rank} died while writing its dump?); pass \
                     --allow-incomplete-ranks to import the other ranks' dumps",
                    f.display()
                );
            }
            notes.push(format!(
                "{} is empty (0 bytes: rank {rank} died while writing its dump?): rank {rank} \
                 is taken as without a dump",
                f.display()
            ));
            empty += 1;
            continue;
        }
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
        let why = if empty > 0 { ", only empty files" } else { "" };
        bail!(
            "{}: no flight-recorder dumps (files named like nccl_trace_rank_0){why}",
            dir.display()
        );
    }
    Ok(Read {
        dumps: dumps.into_iter().map(|(r, (_, d))| (r, d)).collect(),
        notes,
    })
}

/// `--group NAME=RANKS` values: `1=0,1`, `2=1-3`.
fn group_hints(args: &[String]) -> anyhow::Result<BTreeMap<String, Vec<usize>>> {
    let mut out = BTreeMap::new();
    for a in args {
        let bad = || anyhow::anyhow!("--group {a}: expected NAME=RANKS, like 1=0,1 or 1=0-3");
        let (name, list) = a.split_once('=').ok_or_else(bad)?;
        let mut ranks = Vec::new();
        for part in list.split(',').map(str::trim) {
            match part.split_once('-') {
                Some((lo, hi)) => {
                    let (lo, hi): (usize, usize) = (
                        lo.trim().parse().map_err(|_| bad())?,
                        hi.trim().parse().map_err(|_| bad())?,
                    );
                    if lo > hi {
                        return Err(bad());
                    }
                    ranks.extend(lo..=hi);
                }
                None => ranks.push(part.parse().map_err(|_| bad())?),
            }
        }
        if name.trim().is_empty() || out.insert(name.trim().to_string(), ranks).is_some() {
            bail!("--group {a}: one --group per group name, with a name");
        }
    }
    Ok(out)
}

/// `scen import-fr`.
pub fn import_cmd(a: &ImportFrArgs) -> Exit {
    match import_inner(a) {
        Ok(()) => Exit::Ok,
        Err(e) => {
            eprintln!("error: {e:#}");
            Exit::Invalid
        }
    }
}

fn import_inner(a: &ImportFrArgs) -> anyhow::Result<()> {
    let (dir, out) = (a.dir.as_path(), a.out.as_deref());
    let hints = group_hints(&a.groups)?;
    let read = read_dir(dir, a.allow_incomplete_ranks)?;
    let job = Job::new(read.dumps)?.with_group_hints(hints);
    if !a.allow_incomplete_ranks {
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
    for n in read.notes.iter().chain(&imp.notes) {
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
    let files = export::files(&export::dumps(world, calls), format.into());
    let context = || format!("cannot write flight-recorder dumps to {}", dir.display());
    std::fs::create_dir_all(dir).with_context(context)?;
    for (name, bytes) in &files {
        scen::output::write_whole(&dir.join(name), bytes).with_context(context)?;
    }
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
