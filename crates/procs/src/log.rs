//! Rank output: where it goes and what of it a report quotes. Both launchers put the last lines
//! of a failed run's output in the report's notes; one rule for both: only the last
//! [`TAIL_BYTES`] of the file are read, so a rank that printed gigabytes can neither make the
//! report wait nor exhaust memory.

use crate::ProcsError;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// How much of the end of an output file [`tail`] reads: 64 KiB.
pub const TAIL_BYTES: u64 = 64 * 1024;

/// A file for a rank's output that no directory holds: O_TMPFILE where the file system has it,
/// else created and unlinked at once. The kernel frees it when the last handle closes, however
/// the launcher and the rank end.
pub fn anonymous_log(dir: &Path, name: &str) -> Result<File, ProcsError> {
    let tmp = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE)
        .open(dir);
    if let Ok(f) = tmp {
        return Ok(f);
    }
    let path = dir.join(format!("{name}-{}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(f)
}

/// The last `lines` non-blank lines of the last [`TAIL_BYTES`] of `log`, joined by ` | `
/// (None: nothing but blank lines). A line cut by the bound starts mid-way.
pub fn tail(mut log: &File, lines: usize) -> Option<String> {
    let len = log.metadata().ok()?.len();
    log.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)))
        .ok()?;
    let mut bytes = Vec::new();
    log.take(TAIL_BYTES).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if all.is_empty() {
        return None;
    }
    Some(all[all.len().saturating_sub(lines)..].join(" | "))
}

/// [`tail`] of the file at `path` (None: it cannot be opened).
pub fn tail_of_path(path: &Path, lines: usize) -> Option<String> {
    tail(&File::open(path).ok()?, lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_rank_log_has_no_name_on_disk_and_keeps_its_tail() {
        let dir = std::env::temp_dir();
        let before = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
        let mut f = anonymous_log(&dir, "scen-procs-test").expect("a log file");
        let after = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
        assert!(
            after <= before,
            "the log file is visible in {}",
            dir.display()
        );
        writeln!(f, "one\n\ntwo\nthree").expect("writes");
        assert_eq!(tail(&f, 2).as_deref(), Some("two | three"));
        assert_eq!(tail(&f, 9).as_deref(), Some("one | two | three"));
    }

    #[test]
    fn the_tail_of_a_file_larger_than_the_bound_reads_only_the_bound() {
        let mut f = anonymous_log(&std::env::temp_dir(), "scen-procs-big").expect("a log");
        // A first line that would be the answer if the whole file were read...
        writeln!(f, "FIRST").expect("writes");
        // ...then more than the bound of blank lines, then two short lines.
        let blank = vec![b'\n'; (TAIL_BYTES + 4096) as usize];
        f.write_all(&blank).expect("writes");
        writeln!(f, "second to last\nlast").expect("writes");
        assert!(f.metadata().expect("metadata").len() > TAIL_BYTES);
        assert_eq!(tail(&f, 3).as_deref(), Some("second to last | last"));
        // Nothing but blank lines within the bound: no tail, though the file has a line.
        let mut g = anonymous_log(&std::env::temp_dir(), "scen-procs-big2").expect("a log");
        writeln!(g, "FIRST").expect("writes");
        g.write_all(&blank).expect("writes");
        assert_eq!(tail(&g, 3), None);
    }

    #[test]
    fn the_tail_of_a_path_reads_the_same_rule() {
        let dir = std::env::temp_dir().join(format!("scen-procs-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a dir");
        let p = dir.join("runner.log");
        std::fs::write(&p, "a\nb\n\nc\n").expect("writes");
        assert_eq!(tail_of_path(&p, 2).as_deref(), Some("b | c"));
        assert_eq!(tail_of_path(&dir.join("missing"), 2), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
