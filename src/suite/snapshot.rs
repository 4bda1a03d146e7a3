//! Snapshots of a scenario run in insta's `.snap` format (a `---` metadata header, then the
//! YAML body insta's own serializer writes), so `cargo insta review` reads what `scen test`
//! writes and the other way round.

use scen_core::report::Report;
use scen_core::scenario::Scenario;
use scen_core::verdict::describe_verdict;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The header of snapshots this tool creates (existing files keep theirs).
const NEW_HEADER: &str = "source: tests/scenarios.rs";

/// What a snapshot pins: the verdict per rank, the first stall, the calls, the diagnosis and
/// the whole trace.
#[derive(Serialize)]
struct Pinned {
    scenario: String,
    description: Option<String>,
    seed: u64,
    verdict: Vec<String>,
    first_stall: Vec<String>,
    expectations_hold: bool,
    /// Flight-recorder-like call records, one line each: group, seq, op, dtype/shape, state.
    calls: Vec<String>,
    /// Consistency mismatches and the wait-for graph, as `scen run` prints them.
    diagnosis: Vec<String>,
    trace_hash: String,
    /// Which fault each failure followed (scenarios with `[[faults]]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
    trace: Vec<String>,
}

fn pinned(s: &Scenario, r: &Report) -> Pinned {
    let first_stall = r
        .first_stall
        .iter()
        .flat_map(|st| {
            st.stuck.iter().map(move |x| {
                format!(
                    "t={}ms rank {} in {}: {} <- waiting for: {}",
                    st.t_ms,
                    x.rank,
                    s.steps[x.step].label(),
                    x.wait.what,
                    x.peers.join("; ")
                )
            })
        })
        .collect();
    Pinned {
        scenario: s.name.clone(),
        description: s.description.clone(),
        seed: r.seed,
        verdict: r
            .ranks
            .iter()
            .enumerate()
            .map(|(i, v)| format!("rank {i}: {}", describe_verdict(s, v)))
            .collect(),
        first_stall,
        expectations_hold: r.expectations_hold(),
        calls: r.calls.iter().map(|c| c.render()).collect(),
        diagnosis: r.diagnosis.lines(&s.file),
        trace_hash: r.trace_hash.clone(),
        notes: r.notes.clone(),
        trace: r
            .trace
            .render()
            .lines()
            .map(|l| l.trim_end().to_string())
            .collect(),
    }
}

/// The snapshot body of a run: YAML exactly as `insta::assert_yaml_snapshot!` writes it.
pub fn body(s: &Scenario, r: &Report) -> String {
    use insta::_macro_support::{serialize_value, SerializationFormat};
    serialize_value(&pinned(s, r), SerializationFormat::Yaml)
}

/// A `.snap` file split into its metadata header and body.
#[derive(Debug, Clone)]
pub struct SnapFile {
    pub header: String,
    pub body: String,
}

impl SnapFile {
    /// Reads a `.snap` file; `None` when it does not exist.
    pub fn read(path: &Path) -> std::io::Result<Option<SnapFile>> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t.replace("\r\n", "\n"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let split = text
            .strip_prefix("---\n")
            .and_then(|rest| rest.split_once("\n---\n"));
        Ok(Some(match split {
            Some((header, body)) => SnapFile {
                header: header.to_string(),
                body: body.to_string(),
            },
            None => SnapFile {
                header: NEW_HEADER.to_string(),
                body: text,
            },
        }))
    }

    /// Whether this snapshot's body equals `body` (insta's rule: trailing whitespace ignored).
    pub fn matches(&self, body: &str) -> bool {
        self.body.trim_end() == body.trim_end()
    }

    /// The file text with `body` under this header (or a new one).
    pub fn render(header: Option<&str>, body: &str) -> String {
        format!(
            "---\n{}\n---\n{}\n",
            header.unwrap_or(NEW_HEADER),
            body.trim_end()
        )
    }
}

/// Where snapshots live.
#[derive(Debug, Clone, PartialEq)]
pub enum Location {
    /// `NAME.snap` next to `NAME.toml`.
    Beside,
    /// `DIR/NAME.snap`.
    Dir(PathBuf),
}

impl Location {
    /// `beside` or a directory path (relative ones relative to `root`).
    pub fn parse(text: &str, root: &Path) -> Location {
        if text == "beside" {
            Location::Beside
        } else {
            Location::Dir(root.join(text))
        }
    }

    pub fn path_for(&self, scenario_file: &Path, name: &str) -> PathBuf {
        match self {
            Location::Beside => scenario_file.with_file_name(format!("{name}.snap")),
            Location::Dir(d) => d.join(format!("{name}.snap")),
        }
    }
}

/// `path.snap` -> `path.snap.new`, where insta and `cargo insta review` look for pending ones.
pub fn pending_path(snap: &Path) -> PathBuf {
    let mut s = snap.as_os_str().to_os_string();
    s.push(".new");
    PathBuf::from(s)
}

/// A unified diff from the old body to the new one (`-` old, `+` new), 3 lines of context.
pub fn diff(old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old.trim_end(), new.trim_end())
        .unified_diff()
        .context_radius(3)
        .header("snapshot", "this run")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snap_file_splits_into_header_and_body_and_renders_back() {
        let dir = std::env::temp_dir().join(format!("scen-snap-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.snap");
        let text = "---\nsource: tests/scenarios.rs\n---\nscenario: x\nseed: 0\n";
        std::fs::write(&path, text).unwrap();
        let f = SnapFile::read(&path).unwrap().expect("exists");
        assert_eq!(f.header, "source: tests/scenarios.rs");
        assert!(
            f.matches("scenario: x\nseed: 0\n\n"),
            "trailing whitespace is ignored"
        );
        assert!(!f.matches("scenario: x\nseed: 1"));
        assert_eq!(SnapFile::render(Some(&f.header), &f.body), text);
        assert!(SnapFile::read(&dir.join("none.snap")).unwrap().is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn locations_and_pending_paths() {
        let root = Path::new("/repo");
        let file = Path::new("/repo/suite/a.toml");
        assert_eq!(
            Location::parse("beside", root).path_for(file, "a"),
            PathBuf::from("/repo/suite/a.snap")
        );
        assert_eq!(
            Location::parse("snaps", root).path_for(file, "a"),
            PathBuf::from("/repo/snaps/a.snap")
        );
        assert_eq!(
            pending_path(Path::new("/s/a.snap")),
            PathBuf::from("/s/a.snap.new")
        );
    }
}
