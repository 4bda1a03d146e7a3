//! The one emitter of scenario text into the generated Python program.
//!
//! A scenario is data from others (suites, pull requests, recordings): nothing in it may ever run
//! as code. Torch mode writes a scenario's strings into a Python file, in two positions: inside
//! string literals (labels, URLs, handles, env values, raise texts) and inside comments (the
//! description, the scenario's own lines quoted above each step). Every such string goes through
//! this module and nowhere else:
//!
//! - [`str_lit`] writes a double-quoted literal in plain ASCII: every byte outside printable ASCII
//!   is a `\x`, `\u` or `\U` escape, so no character of the text can end the literal or the line,
//!   and the file stays valid whatever the text holds (NUL, `\r`, U+2028, a lone quote).
//! - [`comment`] writes one comment line: every character Python or an editor could take as the
//!   end of a line (`\n`, `\r`, the other C0/C1 controls, U+2028/U+2029) and every other
//!   non-printing character is shown as an escape, so the next code line stays the next one.
//!
//! Rust's `{:?}` is not a Python literal (`\u{7f}` is a syntax error in Python), so the
//! translation never formats a scenario string with it.

/// `s` as a Python string literal (double quotes, ASCII only).
pub fn str_lit(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            ' '..='~' => out.push(c),
            _ => escape(c, &mut out),
        }
    }
    out.push('"');
    out
}

/// `text` as one comment line (`# ` + the text), whatever the text holds.
pub fn comment(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push_str("# ");
    for c in text.chars() {
        if c == '\\' {
            // Kept apart from the escapes below, so an escape in the comment is always ours.
            out.push_str("\\\\");
        } else if breaks_or_hides(c) {
            escape(c, &mut out);
        } else {
            out.push(c);
        }
    }
    out
}

/// Characters a comment must not hold as they are: controls (a line end for Python: `\n`,
/// `\r`; for editors and `str.splitlines`: `\x0b`, `\x0c`, `\x1c`-`\x1e`, `\x85`), the Unicode
/// line and paragraph separators, and the invisible format characters (bidirectional overrides
/// among them, which could show a reader another line than the one Python runs).
fn breaks_or_hides(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}')
        || matches!(c as u32, 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x2069 | 0xFEFF)
}

fn escape(c: char, out: &mut String) {
    use std::fmt::Write;
    let n = c as u32;
    let _ = match n {
        0..=0xFF => write!(out, "\\x{n:02x}"),
        0x100..=0xFFFF => write!(out, "\\u{n:04x}"),
        _ => write!(out, "\\U{n:08x}"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_ascii_and_escape_what_ends_them() {
        assert_eq!(str_lit("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(str_lit("x\ny\rz\0"), r#""x\ny\rz\x00""#);
        assert_eq!(str_lit("\u{2028}é\u{1F600}"), r#""\u2028\xe9\U0001f600""#);
        assert!(str_lit("\u{7f}").is_ascii());
    }

    #[test]
    fn comments_stay_one_line() {
        let c = comment("x\nimport os\r\u{2028}\u{85}\u{202e}y\\n");
        assert_eq!(c, r"# x\x0aimport os\x0d\u2028\x85\u202ey\\n");
        assert!(!c.contains(['\n', '\r']));
        assert_eq!(comment("café — ok"), "# café — ok");
    }
}
