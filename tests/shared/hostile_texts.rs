//! Scenarios whose every text field holds hostile strings, for the tests that check no scenario
//! text runs as code in torch mode: tests/sim/hostile_strings.rs (Python's tokenizer judges the
//! generated programs) and tests/torch/hostile.rs (real PyTorch runs them).

/// Python that runs the payload: it creates `MARK` (replaced by a path) when executed.
pub const PAYLOAD: &str = "__import__('pathlib').Path('MARK').touch()";

/// The strings of one scenario, one per text field.
pub struct Texts {
    pub description: String,
    pub env: String,
    pub id: String,
    pub handle: String,
    pub work: String,
    pub log: String,
    pub raise: String,
}

impl Texts {
    pub fn plain() -> Texts {
        Texts {
            description: "d".into(),
            env: "v".into(),
            id: "s".into(),
            handle: "g".into(),
            work: "w".into(),
            log: "m".into(),
            raise: "r".into(),
        }
    }
}

/// A TOML basic string of `s` (every control character escaped, as TOML requires).
fn toml_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() && c != '\t' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The log message as the file's own bytes where TOML allows (a multi-line literal string keeps
/// its line breaks and other characters raw, so the scenario lines quoted above the step hold
/// them too), else escaped. TOML refuses a lone `\r` even there.
fn toml_raw_or_str(s: &str) -> String {
    let raw_ok = !s.contains("'''")
        && !s.ends_with('\'')
        && !s.starts_with(['\n', '\r'])
        && !s.replace("\r\n", "").contains('\r')
        && s.chars()
            .all(|c| !c.is_control() || matches!(c, '\t' | '\n' | '\r'));
    if raw_ok {
        format!("'''{s}'''")
    } else {
        toml_str(s)
    }
}

/// A two-rank gloo program using every text field; rank 1 raises at its end.
pub fn scenario(t: &Texts) -> String {
    let handle = toml_str(&t.handle);
    let work = toml_str(&t.work);
    format!(
        r#"# Hostile strings in every text field (tests/sim/hostile_strings.rs).
[scenario]
description = {description}

[world]
ranks_per_node = 2
platform = "cpu"
env = {{ SCEN_HOSTILE = {env} }}

[[step]]
op = "init_process_group"
backend = "gloo"

[[step]]
id = {id}
op = "new_group"
ranks = [0, 1]
as = {handle}

[[step]]
op = "all_reduce"
group = {handle}
async_op = true
work = {work}
fill = "rank"
expect = "1"

[[step]]
op = "log"
message = {log}

[[step]]
op = "wait"
work = {work}

[[step]]
op = "raise"
on = "rank == 1"
error = {raise}

[[expect]]
on = "rank == 0"
outcome = "completes"

[[expect]]
on = "rank == 1"
outcome = "fails"
"#,
        description = toml_str(&t.description),
        env = toml_str(&t.env.replace(['{', '}'], "")),
        id = toml_str(&t.id),
        // Env values and log messages are templates: `{formula}` is code by design, so braces
        // are kept out of their hostile part, and one formula stands in both twins' message.
        log = toml_raw_or_str(&format!("[{{rank}}] {}", t.log.replace(['{', '}'], ""))),
        raise = toml_str(&format!("ValueError: r{}", t.raise)),
    )
}

/// Pieces hostile strings are made of: every way to end a comment or a literal, Python's
/// quotes and code, and characters Rust's `{:?}` writes as escapes Python cannot read.
fn pieces(payload: &str) -> Vec<String> {
    [
        "\n",
        "\r",
        "\r\n",
        "\"",
        "'",
        "\\",
        "\0",
        "\x0b",
        "\x0c",
        "\x1c",
        "\x1e",
        "\u{85}",
        "\u{2028}",
        "\u{2029}",
        "\u{202e}",
        "\u{feff}",
        "\u{7f}",
        "\x1b[2J",
        "\"\"\"",
        "'''",
        "#",
        "{",
        "}",
        "${",
        "é",
        "\u{1F600}",
        " ",
        "\t",
        "\"); ",
        "\" + str(",
        ") + \"",
        "]",
        "x",
    ]
    .iter()
    .map(|p| p.to_string())
    .chain([payload.to_string(), format!("\n{payload}\n#")])
    .collect()
}

/// A small deterministic generator (xorshift), so a failing case is the same on every run.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
    fn text(&mut self, pieces: &[String]) -> String {
        (0..1 + self.below(6))
            .map(|_| pieces[self.below(pieces.len())].as_str())
            .collect()
    }
}

/// Hostile texts for case `seed`.
pub fn hostile(seed: u64, payload: &str) -> Texts {
    let p = pieces(payload);
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    Texts {
        description: r.text(&p),
        env: r.text(&p),
        id: format!("s{}", r.text(&p)),
        handle: format!("g{}", r.text(&p)),
        work: r.text(&p),
        log: r.text(&p),
        raise: r.text(&p),
    }
}
