//! Every PyTorch text lives in one place: `crates/core/src/c10d/error.rs` and the modules it
//! owns (`error/`). This test takes the texts themselves from there (each string literal's
//! fixed parts of 24 characters or more, scen's own texts in `error/own.rs` aside) and fails
//! when one of them is spelt in any other source file of the workspace, so a copy (a warning
//! written twice, a text a diagnosis searches for) cannot creep back. Comments and test code
//! (`#[cfg(test)]` onwards, `tests.rs` and `*_tests.rs`, `tests/`) may quote the texts.

use std::path::{Path, PathBuf};

/// The workspace root (this crate is `crates/core`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where the texts live.
fn error_module() -> PathBuf {
    root().join("crates/core/src/c10d/error")
}

fn is_error_module(p: &Path) -> bool {
    p.starts_with(error_module()) || p == error_module().with_extension("rs")
}

/// Texts that must be found in the error module: the extraction below is checked against them.
const KNOWN: &[&str] = &[
    "which does not belong to the given group",
    "No backend type associated with device type",
    "RendezvousTimeoutError",
    "Timed out waiting",
];

/// A file's code without comments and without its tests.
fn code(text: &str) -> String {
    let body = text.split("#[cfg(test)]").next().unwrap_or("");
    body.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The string literals of `code`, each split into its fixed parts (between `{...}`
/// placeholders, escaped newlines and line continuations).
fn literal_parts(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = code.chars().peekable();
    let mut prev = ' ';
    while let Some(c) = chars.next() {
        // A char literal `'"'` is not a string.
        if c == '"' && prev != '\'' {
            let mut lit = String::new();
            while let Some(d) = chars.next() {
                match d {
                    '\\' => {
                        let esc = chars.next().unwrap_or(' ');
                        lit.push(if esc == '"' { '"' } else { '\u{1}' });
                    }
                    '"' => break,
                    _ => lit.push(d),
                }
            }
            out.extend(split_fixed(&lit));
        }
        prev = c;
    }
    out
}

/// The fixed parts of one literal: `{...}` placeholders and escapes (`\u{1}` here) cut it.
fn split_fixed(lit: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut depth = 0;
    for c in lit.chars() {
        match c {
            '{' => {
                depth += 1;
                parts.push(std::mem::take(&mut cur));
            }
            '}' if depth > 0 => depth -= 1,
            '\u{1}' | '\n' => parts.push(std::mem::take(&mut cur)),
            _ if depth == 0 => cur.push(c),
            _ => {}
        }
    }
    parts.push(cur);
    parts
        .into_iter()
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_dir() && name != "tests" && name != "target" {
            rust_files(&p, out);
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            out.push(p);
        }
    }
}

/// The PyTorch texts: fixed parts of the error module's literals, scen's own texts aside.
fn pytorch_texts() -> Vec<String> {
    let mut files = vec![error_module().with_extension("rs")];
    rust_files(&error_module(), &mut files);
    let mut texts: Vec<String> = files
        .iter()
        .filter(|p| !p.ends_with("own.rs"))
        .flat_map(|p| literal_parts(&code(&std::fs::read_to_string(p).expect("read"))))
        .filter(|t| t.chars().count() >= 24 || KNOWN.contains(&t.as_str()))
        .collect();
    texts.sort();
    texts.dedup();
    texts
}

#[test]
fn pytorch_texts_are_spelt_only_in_the_error_module() {
    let texts = pytorch_texts();
    for k in KNOWN {
        assert!(
            texts.iter().any(|t| t.contains(k)),
            "the error module's texts should include {k:?} (found {} texts)",
            texts.len()
        );
    }
    let mut files = Vec::new();
    rust_files(&root().join("crates"), &mut files);
    rust_files(&root().join("src"), &mut files);
    let mut found = Vec::new();
    for f in files.iter().filter(|f| !is_error_module(f)) {
        let text = std::fs::read_to_string(f).expect("read");
        let code = code(&text);
        for t in &texts {
            if code.contains(t.as_str()) {
                found.push(format!("{}: {t:?}", f.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "PyTorch texts spelt outside crates/core/src/c10d/error (build them there and call \
         the function):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_finds_a_copied_text() {
    let texts = pytorch_texts();
    let copy = "fn warn() { log(\"Running x on global rank 1 which does not belong to the given group.\") }";
    assert!(
        texts.iter().any(|t| code(copy).contains(t.as_str())),
        "a copy of R27's warning must be caught"
    );
    let comment = "// quoting: which does not belong to the given group";
    assert!(!texts.iter().any(|t| code(comment).contains(t.as_str())));
}
