//! A scenario is data from others (suites, pull requests, recordings), and torch mode writes its
//! strings into a Python program: none of them may run as code there. Here every text field a
//! program carries (description, env value, step id, group handle, work name, log message, raise
//! text, and the file's own name) gets hostile strings — line breaks of every kind, quotes,
//! backslashes, NUL, non-ASCII, Python code — and `scen export --torch` writes the program.
//! Python itself is the judge: the program compiles, and its code tokens (everything but
//! comments and string literals) are exactly those of the same scenario with plain strings, so
//! no hostile text left its comment or literal. tests/torch/hostile.rs runs such a program on
//! real PyTorch.

use super::common::root;
use std::path::Path;
use std::process::Command;

#[path = "../shared/hostile_texts.rs"]
mod hostile_texts;
use hostile_texts::{hostile, scenario, Texts, PAYLOAD};

/// A file name from `s`: what a file system allows of it (no `/`, no NUL), short.
fn file_name(s: &str, case: u64) -> String {
    let clean: String = s
        .chars()
        .filter(|c| *c != '/' && *c != '\0')
        .take(40)
        .collect();
    format!("h{case}-{clean}.toml")
}

fn export(scenario: &Path, out: &Path) {
    let o = Command::new(env!("CARGO_BIN_EXE_scen"))
        .args(["export", "--torch"])
        .arg(scenario)
        .arg("-o")
        .arg(out)
        .current_dir(root())
        .output()
        .expect("scen runs");
    assert_eq!(
        o.status.code(),
        Some(0),
        "scen export --torch {}: {}",
        scenario.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Python's judgement of program pairs: each compiles, and both have the same code tokens.
/// Comments, blank lines and literals count as one "text" token however many there are in a
/// row (a description of three lines is three comment lines), and `expand_env("...")` (how a
/// literal with `${VAR}` is written) counts as the literal it expands.
const JUDGE: &str = r#"
import io, sys, tokenize
TEXT = {tokenize.COMMENT, tokenize.NL, tokenize.STRING}
def code(path):
    src = open(path, "rb").read()
    compile(src, path, "exec")
    toks = [(t.type, t.string) for t in tokenize.tokenize(io.BytesIO(src).readline)
            if t.type != tokenize.ENCODING]
    out, i = [], 0
    while i < len(toks):
        if toks[i] == (tokenize.NAME, "expand_env") and toks[i + 2][0] == tokenize.STRING:
            t, i = "TEXT", i + 4
        else:
            t, i = ("TEXT" if toks[i][0] in TEXT else toks[i]), i + 1
        if not (t == "TEXT" and out and out[-1] == "TEXT"):
            out.append(t)
    return out
bad = 0
for line in sys.stdin:
    plain, hostile = line.rstrip("\n").split("\t")
    a, b = code(plain), code(hostile)
    if a != b:
        bad += 1
        i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        print(f"{hostile}: code differs from {plain} at token {i}: {a[i-8:i+4]} vs {b[i-8:i+4]}")
sys.exit(1 if bad else 0)
"#;

#[test]
fn no_scenario_text_leaves_its_comment_or_literal() {
    const CASES: u64 = 60;
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("RAN");
    let payload = PAYLOAD.replace("MARK", &mark.to_string_lossy());
    let plain_toml = dir.path().join("plain.toml");
    std::fs::write(&plain_toml, scenario(&Texts::plain())).unwrap();
    let plain_py = dir.path().join("plain.py");
    export(&plain_toml, &plain_py);
    let mut pairs = String::new();
    for case in 0..CASES {
        let t = hostile(case, &payload);
        let file = dir.path().join(file_name(&t.description, case));
        std::fs::write(&file, scenario(&t)).unwrap();
        let py = dir.path().join(format!("h{case}.py"));
        export(&file, &py);
        pairs.push_str(&format!("{}\t{}\n", plain_py.display(), py.display()));
    }
    let out = judge(pairs.as_bytes());
    assert!(
        out.status.success(),
        "hostile strings changed the program's code:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !mark.exists(),
        "a program ran the payload while being judged"
    );
}

/// Runs JUDGE over the pairs (one `plain\thostile` per line).
fn judge(pairs: &[u8]) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new("python3")
        .args(["-c", JUDGE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(pairs)
        .expect("python3 reads the pairs");
    child.wait_with_output().expect("python3 ends")
}
