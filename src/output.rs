//! The files scen writes (every command's outputs: `run --report/--graph/--timeline/--export-fr`,
//! `shrink -o`, `export -o`, `import-fr -o`, `bench -o`, `test --junit`, `--log-file`,
//! snapshots): an output never replaces an input or another output of the same command (main.rs
//! checks every command's paths with [`check_paths`] before it starts), and each is written
//! whole or not at all — a temporary file beside the target, then a rename — with the
//! temporary file removed on failure and the OS's reason printed with the path the user gave.
//! A file written over the whole command (`--log-file`) is a [`Pending`] file: the same
//! temporary file, renamed onto the target when the command ends. `run --hw`'s watchdog writes
//! its flight-recorder dumps at a stall from its own process (scen_core::fr::export::write_dir,
//! also a temporary file and a rename per dump).

use std::io::Write;
use std::path::{Path, PathBuf};

/// Why an output cannot be written (each names the path as the user gave it).
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{flag} {}: that is the input {}; refusing to overwrite it (choose another output path)", out.display(), input.display())]
    OntoInput {
        flag: String,
        out: PathBuf,
        input: PathBuf,
    },
    #[error("{flag} {} names the same file as {other}: each output needs its own path", out.display())]
    SameAs {
        flag: String,
        out: PathBuf,
        other: String,
    },
    #[error("cannot write {}: it is a directory (give a file path)", path.display())]
    IsDirectory { path: PathBuf },
    #[error("cannot write {}: not a file path", path.display())]
    NotAFilePath { path: PathBuf },
    /// The OS refused (its reason is part of the message, as users read it).
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The same file, whether or not `out` exists yet: by device and inode when both exist (hard
/// links, `./a` vs `a`), else by canonical directory and file name.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return x.dev() == y.dev() && x.ino() == y.ino();
        }
    }
    match (resolve(a), resolve(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// `p` with its directory made canonical (the file itself may not exist).
fn resolve(p: &Path) -> Option<PathBuf> {
    if let Ok(c) = p.canonicalize() {
        return Some(c);
    }
    let name = p.file_name()?;
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.canonicalize().ok()?,
        _ => std::env::current_dir().ok()?,
    };
    Some(dir.join(name))
}

/// Refuses an output that is one of the inputs or that another output also names.
/// `outputs` are (flag, path) pairs, e.g. ("--graph", "g.dot").
pub fn check_paths(inputs: &[&Path], outputs: &[(&str, &Path)]) -> Result<(), OutputError> {
    for (i, (flag, out)) in outputs.iter().enumerate() {
        if let Some(input) = inputs.iter().find(|inp| same_file(inp, out)) {
            return Err(OutputError::OntoInput {
                flag: flag.to_string(),
                out: out.to_path_buf(),
                input: input.to_path_buf(),
            });
        }
        if let Some((other, _)) = outputs[..i].iter().find(|(_, o)| same_file(o, out)) {
            return Err(OutputError::SameAs {
                flag: flag.to_string(),
                out: out.to_path_buf(),
                other: other.to_string(),
            });
        }
    }
    Ok(())
}

/// The inputs with every directory replaced by the files under it (a suite's scenarios, a
/// directory of flight-recorder dumps), so that an output onto one of them is refused too.
/// Bounded: directories deeper than 8 levels are not looked into.
pub fn expand_dirs(inputs: &[&Path]) -> Vec<PathBuf> {
    fn walk(p: &Path, depth: usize, out: &mut Vec<PathBuf>) {
        let entries = match std::fs::read_dir(p) {
            Ok(e) if depth < 8 => e,
            _ => return out.push(p.to_path_buf()),
        };
        out.push(p.to_path_buf());
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for c in paths {
            walk(&c, depth + 1, out);
        }
    }
    let mut out = Vec::new();
    for p in inputs {
        walk(p, 0, &mut out);
    }
    out
}

/// [`write_atomic`] for callers that use anyhow (the message as [`write_atomic`] words it: the
/// OS's reason is already in it).
pub fn write_whole(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_atomic(path, bytes).map_err(|e| anyhow::Error::msg(e.to_string()))
}

/// Writes `bytes` to `path` whole or not at all. Errors name `path` as given and the OS reason.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let (mut pending, mut file) = Pending::create(path)?;
    let written = file.write_all(bytes).and_then(|_| file.sync_all());
    if let Err(source) = written {
        pending.abandon();
        return Err(OutputError::Io {
            path: path.to_path_buf(),
            source,
        });
    }
    pending.commit()
}

/// An output being written: a temporary file beside `path`, renamed onto it by
/// [`Pending::commit`]; dropped uncommitted, the temporary file is removed and `path` is left
/// as it was.
#[derive(Debug)]
pub struct Pending {
    path: PathBuf,
    tmp: PathBuf,
    /// A handle on the temporary file, to flush it to disk before the rename.
    file: Option<std::fs::File>,
}

impl Pending {
    /// Creates the temporary file for `path`; the returned file writes into it.
    pub fn create(path: &Path) -> Result<(Pending, std::fs::File), OutputError> {
        let tmp = temp_beside(path)?;
        let io = |source| OutputError::Io {
            path: path.to_path_buf(),
            source,
        };
        // Made first, so that an early return below removes the temporary file.
        let mut pending = Pending {
            path: path.to_path_buf(),
            tmp,
            file: None,
        };
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&pending.tmp)
            .map_err(io)?;
        pending.file = Some(file.try_clone().map_err(io)?);
        Ok((pending, file))
    }

    /// Flushes what was written and renames it onto the target.
    pub fn commit(mut self) -> Result<(), OutputError> {
        let synced = self.file.take().map_or(Ok(()), |f| f.sync_all());
        let renamed = synced.and_then(|_| std::fs::rename(&self.tmp, &self.path));
        renamed.map_err(|source| OutputError::Io {
            path: self.path.clone(),
            source,
        })
    }

    /// Gives up: the temporary file goes, the target stays as it was.
    fn abandon(&mut self) {
        self.file = None;
        let _ = std::fs::remove_file(&self.tmp);
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // After a commit the temporary file is gone (renamed): removing it again is a no-op.
        if self.tmp.exists() {
            self.abandon();
        }
    }
}

/// `.NAME.scen-tmp-PID` beside `path`, after refusing a directory or a path with no file name.
fn temp_beside(path: &Path) -> Result<PathBuf, OutputError> {
    if path.is_dir() {
        return Err(OutputError::IsDirectory {
            path: path.to_path_buf(),
        });
    }
    let name = path.file_name().ok_or_else(|| OutputError::NotAFilePath {
        path: path.to_path_buf(),
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok(dir.join(format!(
        ".{}.scen-tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("scen-output-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn an_output_on_an_input_or_on_another_output_is_refused() {
        let d = scratch("same");
        let input = d.join("a.toml");
        std::fs::write(&input, "x").unwrap();
        let dotted = d.join(".").join("a.toml");
        let e = check_paths(&[&input], &[("--graph", &dotted)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--graph") && e.contains("refusing to overwrite"),
            "{e}"
        );
        let g = d.join("g.dot");
        let e = check_paths(&[&input], &[("--graph", &g), ("--timeline", &g)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--timeline") && e.contains("same file as --graph"),
            "{e}"
        );
        assert!(check_paths(&[&input], &[("--graph", &g)]).is_ok());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_failed_write_names_the_path_and_the_reason_and_leaves_nothing() {
        let d = scratch("fail");
        let e = write_atomic(&d, b"x").unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let missing = d.join("nope").join("g.dot");
        let e = write_atomic(&missing, b"x").unwrap_err().to_string();
        assert!(e.contains(&missing.display().to_string()), "{e}");
        assert!(e.contains("No such file"), "{e}");
        let ok = d.join("g.dot");
        write_atomic(&ok, b"hello").unwrap();
        assert_eq!(std::fs::read(&ok).unwrap(), b"hello");
        let left: Vec<_> = std::fs::read_dir(&d).unwrap().collect();
        assert_eq!(left.len(), 1, "only g.dot remains");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
