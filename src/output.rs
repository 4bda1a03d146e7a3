//! Output files written whole or not at all: a temporary file beside the target, then a rename,
//! so an interrupted run never leaves a half-written report, graph or snapshot.

use anyhow::Context;
use std::path::Path;

/// Writes `bytes` to `path` atomically (temp file in the same directory, then rename).
pub fn write_whole(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".scen-tmp-{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("cannot write {}", path.display()));
    }
    Ok(())
}
