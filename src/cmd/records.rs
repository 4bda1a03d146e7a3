//! Kept records: `scen record --keep DIR` saves what the recorder wrote (one JSON-lines file per
//! process) and how the run went, so that `scen record --from DIR` translates them again, for
//! instance re-targeted with `--platform xpu --backend xccl`, without running the job again.
//! The translation is the same code either way (scen_core::record), so a scenario made from
//! kept records is the one the run would have written with those options.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// How the recorded run went: what `scen_core::record::Options` needs besides the options the
/// user gives again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    pub command: String,
    pub cwd: Option<String>,
    pub timed_out: bool,
    pub cut_ms: Option<u64>,
}

const META: &str = "run.json";

/// Copies the records in `records` and writes `meta` into `dir` (made if absent; a directory
/// that already holds anything is refused, so no other recording's files mix in).
pub fn keep(dir: &Path, records: &Path, meta: &Meta) -> Result<(), String> {
    let at = |e: std::io::Error| format!("--keep {}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(at)?;
    if std::fs::read_dir(dir).map_err(at)?.next().is_some() {
        return Err(format!(
            "--keep {}: the directory is not empty (give a new or an empty one)",
            dir.display()
        ));
    }
    for f in std::fs::read_dir(records).map_err(at)?.flatten() {
        std::fs::copy(f.path(), dir.join(f.file_name())).map_err(at)?;
    }
    let text = serde_json::to_string_pretty(meta).map_err(|e| e.to_string())?;
    scen::output::write_atomic(&dir.join(META), text.as_bytes()).map_err(|e| e.to_string())
}

/// The run's facts from a kept directory (`--from`).
pub fn load(dir: &Path) -> Result<Meta, String> {
    let path = dir.join(META);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "--from {}: {e} (a directory `scen record --keep` wrote)",
            path.display()
        )
    })?;
    serde_json::from_str(&text)
        .map_err(|e| format!("--from {}:{}:{}: {e}", path.display(), e.line(), e.column()))
}

/// Whether `name` is one of the recorder's files (not the run's facts).
pub fn is_record(name: &std::ffi::OsStr) -> bool {
    name.to_string_lossy().ends_with(".jsonl")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_records_come_back_with_their_run() {
        let base = std::env::temp_dir().join(format!("scen-keep-test-{}", std::process::id()));
        let (records, kept) = (base.join("records"), base.join("kept"));
        std::fs::create_dir_all(&records).unwrap();
        std::fs::write(records.join("proc1.jsonl"), "{}\n").unwrap();
        let meta = Meta {
            command: "torchrun p.py".into(),
            cwd: Some("/w".into()),
            timed_out: true,
            cut_ms: Some(12),
        };
        keep(&kept, &records, &meta).unwrap();
        assert_eq!(load(&kept).unwrap(), meta);
        assert!(kept.join("proc1.jsonl").exists());
        // A second keep into the same directory would mix two recordings.
        let e = keep(&kept, &records, &meta).unwrap_err();
        assert!(e.contains("not empty"), "{e}");
        let e = load(&base).unwrap_err();
        assert!(e.contains("run.json"), "{e}");
        let _ = std::fs::remove_dir_all(&base);
    }
}
