//! The program's own ends, which real programs reach between their torch.distributed calls:
//! the `raise` step (an `assert`, a shape check, sglang's checks after init) and the `exit`
//! step (`sys.exit(3)`, a rank that kills itself).
//!
//! `error` is the exception as Python prints its last line, `Type: text` (or `Type` alone, as a
//! bare `assert` prints `AssertionError`). The type is required: a text without one is refused
//! rather than guessed, so `scen record`'s steps and a hand-written step mean the same thing.

use super::{Cx, R};
use crate::scenario::model::{ProgramExit, StepKind};
use crate::scenario::raw::RawStep;

/// Python's keywords: no class can have these names.
const KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Builtins that are not `Exception`s: their process ends differently (an exit code, no
/// traceback, or an interrupt), which a raise step does not model.
const NOT_EXCEPTIONS: [&str; 5] = [
    "BaseException",
    "BaseExceptionGroup",
    "SystemExit",
    "KeyboardInterrupt",
    "GeneratorExit",
];

/// Why a raise step's `error` is not an exception as Python prints it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RaiseTextError {
    #[error("error must start with the exception's type, as Python prints it: \"ValueError: text\", or \"AssertionError\" alone (got {0:?})")]
    NoType(String),
    #[error("{0} is not an Exception (its process ends otherwise): raise steps take Exception classes (ValueError, RuntimeError, AssertionError, the program's own ...)")]
    NotAnException(String),
}

/// `ValueError: text` as `(ValueError, text)`; `AssertionError` as `(AssertionError, "")`.
pub fn parse_error(text: &str) -> Result<(String, String), RaiseTextError> {
    let (ty, message) = match text.split_once(':') {
        Some((t, m)) => (t, m.strip_prefix(' ').unwrap_or(m)),
        None => (text, ""),
    };
    let ident = ty
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && ty.chars().all(|c| c.is_alphanumeric() || c == '_');
    if !ident || KEYWORDS.contains(&ty) {
        return Err(RaiseTextError::NoType(text.to_string()));
    }
    if NOT_EXCEPTIONS.contains(&ty) {
        return Err(RaiseTextError::NotAnException(ty.to_string()));
    }
    Ok((ty.to_string(), message.trim_end().to_string()))
}

/// The signals an `exit` step may send its own process: those whose default action ends it
/// (SIGINT is not one in Python: it raises KeyboardInterrupt).
const EXIT_SIGNALS: [(&str, i32); 5] = [
    ("SIGHUP", 1),
    ("SIGABRT", 6),
    ("SIGKILL", 9),
    ("SIGSEGV", 11),
    ("SIGTERM", 15),
];

impl Cx<'_> {
    pub(super) fn raise_step(&self, r: &RawStep, op_at: usize) -> R<StepKind> {
        let Some(e) = &r.error else {
            return Err(self.err(
                op_at,
                "raise needs `error = \"ValueError: text\"` (the exception as Python prints it)",
            ));
        };
        let (exception, message) =
            parse_error(e.get_ref()).map_err(|m| self.at(e, m.to_string()))?;
        Ok(StepKind::Raise { exception, message })
    }

    pub(super) fn exit_step(&self, r: &RawStep, op_at: usize) -> R<StepKind> {
        let end = match (&r.code, &r.signal) {
            (Some(c), None) => match i32::try_from(*c.get_ref()) {
                Ok(code @ 0..=255) => ProgramExit::Code {
                    code,
                    teardown: r.teardown.as_ref().is_none_or(|t| *t.get_ref()),
                },
                _ => {
                    return Err(self.at(
                        c,
                        "code must be between 0 and 255 (a process's exit status)",
                    ))
                }
            },
            (None, Some(sig)) if r.teardown.is_none() => {
                let name = sig.get_ref().as_str();
                match EXIT_SIGNALS.iter().find(|(n, _)| *n == name) {
                    Some((_, number)) => ProgramExit::Signal(*number),
                    None => {
                        let names: Vec<&str> = EXIT_SIGNALS.iter().map(|(n, _)| *n).collect();
                        return Err(self.at(
                            sig,
                            format!(
                                "signal must be one of {} (a signal whose default action ends the process), got {name:?}",
                                names.join(", ")
                            ),
                        ));
                    }
                }
            }
            (None, Some(_)) => {
                let t = r.teardown.as_ref().expect("checked by the arm above");
                return Err(self.at(
                    t,
                    "teardown goes with `code` (os._exit is `teardown = false`): a signal's default action ends the process at once",
                ));
            }
            (Some(_), Some(sig)) => {
                return Err(self.at(
                    sig,
                    "exit takes `code` (sys.exit) or `signal` (a signal the rank sends itself), not both",
                ))
            }
            (None, None) => {
                return Err(self.err(
                    op_at,
                    "exit needs `code = 3` (sys.exit(3)) or `signal = \"SIGKILL\"` (os.kill(os.getpid(), signal.SIGKILL))",
                ))
            }
        };
        Ok(StepKind::Exit(end))
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_error, RaiseTextError};

    #[test]
    fn the_type_comes_first_as_python_prints_it() {
        let ok = |s: &str| parse_error(s).unwrap();
        assert_eq!(
            ok("ValueError: bad shape"),
            ("ValueError".into(), "bad shape".into())
        );
        assert_eq!(
            ok("AssertionError"),
            ("AssertionError".into(), String::new())
        );
        assert_eq!(ok("KeyError: 'x': y"), ("KeyError".into(), "'x': y".into()));
        assert_eq!(
            ok("ShapeError: 3 != 4"),
            ("ShapeError".into(), "3 != 4".into())
        );
        assert!(matches!(
            parse_error("shape mismatch: 3"),
            Err(RaiseTextError::NoType(_))
        ));
        assert!(parse_error("").is_err());
        assert!(parse_error("class: x").is_err());
        assert_eq!(
            parse_error("SystemExit: 1"),
            Err(RaiseTextError::NotAnException("SystemExit".into()))
        );
    }
}
