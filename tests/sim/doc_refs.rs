//! Every document the repository cites is in the repository: references in code comments,
//! docs, scenario comments, snapshots and program output resolve to a file and an anchor.
//!
//! Checked in README.md, docs/, crates/, src/, scenarios/, snapshots/, tests/ and scripts/
//! (not target/, .git/ or vendor/):
//! - a path to a markdown file under docs (from the root), with an optional `#anchor`, names an
//!   existing file and anchor;
//! - a relative markdown link `[x](other.md#anchor)` in a `.md` file resolves, and one in the
//!   guide (docs/) stays in docs/ and names a file: the built book holds nothing else;
//! - the rule notes (the c10d, sglang, oneccl and anchors pages) are cited by their path under
//!   `docs/rules/`, never by bare name;
//! - a section (the section sign, then `3.19`) follows, on the same line, the `docs/rules/` page
//!   it belongs to (or is in that page), and the page has its anchor (`#s3-19`);
//! - a rule tag `R29` has its anchor `#r29` in docs/rules/c10d.md (`sglang R11`: `#r11` in
//!   docs/rules/sglang.md).
//!
//! Anchors are GitHub's heading slugs (lower case, punctuation but `-` and `_` dropped, spaces
//! to `-`, repeats suffixed `-1`, `-2`) and explicit `<a id="...">` tags.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::common::root;

const ROOTS: &[&str] = &[
    "README.md",
    "docs",
    "crates",
    "src",
    "scenarios",
    "snapshots",
    "tests",
    "scripts",
];
const SKIP_DIRS: &[&str] = &["target", ".git", "vendor", "node_modules"];
const TEXT_EXTS: &[&str] = &["md", "rs", "toml", "snap", "sh", "py", "txt", "yml", "yaml"];
/// The pages under docs/rules/ (without `.md`, so this file cites none by bare name).
const RULE_PAGES: &[&str] = &["c10d", "sglang", "oneccl", "anchors"];
/// The section sign, spelled so that this file cites no section.
const SECTION: char = '\u{a7}';

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if !SKIP_DIRS.contains(&name.as_str()) {
                walk(&p, out);
            }
        } else if p
            .extension()
            .is_some_and(|x| TEXT_EXTS.contains(&x.to_string_lossy().as_ref()))
        {
            out.push(p);
        }
    }
}

/// GitHub's anchor for a heading's text.
fn slug(heading: &str) -> String {
    // Drop inline HTML (`<a id=...></a>`) and link targets (`](...)`).
    let mut text = String::new();
    let mut chars = heading.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '<' {
            for d in chars.by_ref() {
                if d == '>' {
                    break;
                }
            }
        } else if c == ']' && chars.peek() == Some(&'(') {
            for d in chars.by_ref() {
                if d == ')' {
                    break;
                }
            }
        } else {
            text.push(c);
        }
    }
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a markdown text: heading slugs and explicit `id="..."`s, outside code fences.
fn anchors_of(text: &str) -> HashSet<String> {
    let mut set = HashSet::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut fence = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        let hashes = t.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && t[hashes..].starts_with(' ') {
            let base = slug(&t[hashes..]);
            let n = seen.entry(base.clone()).or_insert(0);
            set.insert(if *n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            });
            *n += 1;
        }
        let mut rest = line;
        while let Some(i) = rest.find("id=\"") {
            rest = &rest[i + 4..];
            if let Some(j) = rest.find('"') {
                set.insert(rest[..j].to_string());
                rest = &rest[j..];
            }
        }
    }
    set
}

struct Checker {
    root: PathBuf,
    anchors: HashMap<PathBuf, Option<HashSet<String>>>,
    errors: Vec<String>,
}

impl Checker {
    /// The anchors of a markdown file, `None` if it does not exist.
    fn anchors(&mut self, path: &Path) -> Option<&HashSet<String>> {
        let key = path.to_path_buf();
        self.anchors
            .entry(key)
            .or_insert_with(|| fs::read_to_string(path).ok().map(|t| anchors_of(&t)))
            .as_ref()
    }

    /// `target` (a file, optionally `#anchor`) exists; `what` names it in the error.
    fn resolve(&mut self, at: &str, file: &Path, anchor: Option<&str>, what: &str) {
        if !file.exists() {
            self.errors.push(format!("{at}: {what}: no such file"));
            return;
        }
        let Some(anchor) = anchor.filter(|a| !a.is_empty()) else {
            return;
        };
        if file.extension().is_some_and(|x| x == "md") {
            let found = self.anchors(file).is_some_and(|set| set.contains(anchor));
            if !found {
                self.errors
                    .push(format!("{at}: {what}: no anchor #{anchor} in that file"));
            }
        }
    }

    fn rule_page(&self, page: &str) -> PathBuf {
        self.root.join("docs/rules").join(format!("{page}.md"))
    }

    fn check_file(&mut self, path: &Path) {
        let Ok(text) = fs::read_to_string(path) else {
            return;
        };
        let rel = path.strip_prefix(&self.root).unwrap_or(path).to_path_buf();
        let rel_s = rel.to_string_lossy().replace('\\', "/");
        let is_md = rel_s.ends_with(".md");
        // A page under docs/rules/ cites its own sections without naming itself.
        let own_page = RULE_PAGES
            .iter()
            .find(|p| rel_s == format!("docs/rules/{p}.md"))
            .copied();
        let mut fence = false;
        for (i, line) in text.lines().enumerate() {
            let at = format!("{rel_s}:{}", i + 1);
            if is_md
                && (line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~"))
            {
                fence = !fence;
            }
            self.check_doc_paths(&at, line);
            if is_md && !fence {
                self.check_md_links(&at, path, line);
            }
            self.check_rule_page_names(&at, line, rel_s.starts_with("docs/rules/"));
            self.check_sections(&at, line, own_page);
            self.check_rule_tags(&at, line);
        }
    }

    /// A markdown path under docs, with an optional anchor, anywhere: from the repository root.
    fn check_doc_paths(&mut self, at: &str, line: &str) {
        let bytes = line.as_bytes();
        let mut from = 0;
        while let Some(k) = line[from..].find("docs/") {
            let start = from + k;
            from = start + 5;
            if start > 0 {
                let prev = bytes[start - 1];
                let relative_up = line[..start].ends_with("../");
                if prev.is_ascii_alphanumeric() || prev == b'_' || prev == b'-' {
                    continue;
                }
                if prev == b'/' && !relative_up {
                    continue;
                }
            }
            let token: String = line[start..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "_./#-".contains(*c))
                .collect();
            let token = token.trim_end_matches(['.', '-', '#']);
            let (file, anchor) = match token.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (token, None),
            };
            if !file.ends_with(".md") {
                continue;
            }
            let p = self.root.join(file);
            self.resolve(at, &p, anchor, token);
        }
    }

    /// `[text](target)` in markdown: relative to the file (or `#anchor` in it).
    fn check_md_links(&mut self, at: &str, path: &Path, line: &str) {
        let mut rest = line;
        while let Some(k) = rest.find("](") {
            rest = &rest[k + 2..];
            let Some(end) = rest.find(')') else {
                break;
            };
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            rest = &rest[end..];
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target, None),
            };
            let p = if file.is_empty() {
                path.to_path_buf()
            } else {
                path.parent().unwrap_or(Path::new(".")).join(file)
            };
            self.resolve(at, &p, anchor, &format!("link ({target})"));
            self.check_in_guide(at, path, &p, target);
        }
    }

    /// A page of the guide (under docs/) links only to files under docs/: the built book holds
    /// nothing else, so a link to the README, a source file or a directory works on the
    /// repository and is dead in the book (scripts/check-guide-links.sh checks the HTML).
    fn check_in_guide(&mut self, at: &str, page: &Path, target: &Path, text: &str) {
        let docs = self.root.join("docs");
        if !page.starts_with(&docs) {
            return;
        }
        let (Ok(t), Ok(d)) = (target.canonicalize(), docs.canonicalize()) else {
            return;
        };
        if !t.starts_with(&d) {
            self.errors.push(format!(
                "{at}: link ({text}) leaves docs/: dead in the built guide (name the file in code instead)"
            ));
        } else if t.is_dir() {
            self.errors.push(format!(
                "{at}: link ({text}) is a directory: dead in the built guide (link a page in it)"
            ));
        }
    }

    /// The rule pages are cited as `docs/rules/<page>.md` (`rules/<page>.md` from docs/).
    fn check_rule_page_names(&mut self, at: &str, line: &str, in_rules: bool) {
        for page in RULE_PAGES {
            let name = format!("{page}.md");
            let mut from = 0;
            while let Some(k) = line[from..].find(&name) {
                let start = from + k;
                from = start + name.len();
                let before = &line[..start];
                if before
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-')
                {
                    continue;
                }
                // Under docs/rules/ a bare name is a link to its sibling (checked as a link).
                if !before.ends_with("rules/") && !in_rules {
                    self.errors.push(format!(
                        "{at}: `{name}` is not in the repository: cite docs/rules/{name}"
                    ));
                }
            }
        }
    }

    /// Section `a.b` after `rules/<page>.md` on the same line: the page has `#sa-b`.
    fn check_sections(&mut self, at: &str, line: &str, own_page: Option<&str>) {
        for (k, _) in line.match_indices(SECTION) {
            let before = &line[..k];
            let page = RULE_PAGES
                .iter()
                .filter_map(|p| before.rfind(&format!("rules/{p}.md")).map(|i| (i, *p)))
                .max()
                .map(|(_, p)| p)
                .or(own_page);
            let Some(page) = page else {
                self.errors.push(format!(
                    "{at}: a {SECTION} section without its document: write docs/rules/<page>.md {SECTION}N on the same line"
                ));
                continue;
            };
            let num: String = line[k + SECTION.len_utf8()..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let num = num.trim_end_matches('.');
            if num.is_empty() {
                self.errors
                    .push(format!("{at}: {SECTION} without a section number"));
                continue;
            }
            let anchor = format!("s{}", num.replace('.', "-"));
            let file = self.rule_page(page);
            self.resolve(
                at,
                &file,
                Some(&anchor),
                &format!("docs/rules/{page}.md {SECTION}{num}"),
            );
        }
    }

    /// `R29` (a c10d rule) or `sglang R11`: the rule's page has `#r29` / `#r11`.
    fn check_rule_tags(&mut self, at: &str, line: &str) {
        let bytes = line.as_bytes();
        let mut sglang_run = false;
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'R'
                || (i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_'))
            {
                i += 1;
                continue;
            }
            let digits = bytes[i + 1..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            let end = i + 1 + digits;
            if digits == 0
                || (end < bytes.len() && (bytes[end].is_ascii_alphabetic() || bytes[end] == b'_'))
            {
                i += 1;
                continue;
            }
            let before = line[..i].trim_end_matches(['[', ' ']);
            // `sglang R1-R3`, `sglang R1–R4, R11`: the run continues through `-`, `–`, `,`, `/`.
            let joined = before.ends_with(['-', '–', ',', '/']);
            sglang_run = before.ends_with("sglang")
                || before.ends_with("sglang rule")
                || (sglang_run && joined);
            let page = if sglang_run { "sglang" } else { "c10d" };
            let anchor = format!("r{}", &line[i + 1..end]);
            let file = self.rule_page(page);
            self.resolve(
                at,
                &file,
                Some(&anchor),
                &format!("rule {} of docs/rules/{page}.md", &line[i..end]),
            );
            i = end;
        }
    }
}

#[test]
fn doc_references_resolve() {
    let root = root().to_path_buf();
    let mut files = Vec::new();
    for r in ROOTS {
        let p = root.join(r);
        if p.is_dir() {
            walk(&p, &mut files);
        } else if p.is_file() {
            files.push(p);
        }
    }
    files.sort();
    assert!(
        files.len() > 100,
        "the walk found only {} files",
        files.len()
    );
    let mut c = Checker {
        root,
        anchors: HashMap::new(),
        errors: Vec::new(),
    };
    for f in &files {
        c.check_file(f);
    }
    assert!(
        c.errors.is_empty(),
        "{} broken document reference(s):\n{}",
        c.errors.len(),
        c.errors.join("\n")
    );
}

#[test]
fn github_slugs() {
    assert_eq!(
        slug(" What is modelled, and what not yet"),
        "what-is-modelled-and-what-not-yet"
    );
    assert_eq!(
        slug(" TORCH_DISTRIBUTED_DEBUG=DETAIL"),
        "torch_distributed_debugdetail"
    );
    assert_eq!(
        slug(" `scen doctor` on the machine (2 cores)"),
        "scen-doctor-on-the-machine-2-cores"
    );
    let a = anchors_of("# A\n## A\n```\n# not\n```\n<a id=\"r1\"></a>\n");
    assert!(a.contains("a") && a.contains("a-1") && a.contains("r1") && !a.contains("not"));
}
