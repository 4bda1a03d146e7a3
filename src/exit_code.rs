//! scen's exit codes, in one place: every subcommand returns an [`Exit`], `main` turns it into
//! the process status, and [`TABLE`] says which codes each command can give. README.md's exit
//! table is tested against [`TABLE`] (tests/sim/cli.rs), and `scen --help` prints [`help`], so
//! the code, the help and the README cannot drift apart.

use std::process::ExitCode;

/// How a command ended, as its process status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 0: the expectations hold; the command did what was asked.
    Ok,
    /// 1: the expectations do not hold (a verdict against the scenario, a failing seed or
    /// scenario, a benchmark's wrong values): the report says why.
    Failed,
    /// 2: invalid input (a file with file:line:col, an argument, an output path onto an input,
    /// one of scen's limits), or the requested mode cannot run here.
    Invalid,
    /// 3: an internal error in scen: no verdict; the seed and a replay command are printed.
    Internal,
    /// 128 + N: a real run (`run --hw`, `run --torch`) ended by signal N; the report was
    /// printed first.
    Signal(i32),
    /// A rank process's own status (the hidden `__hw-rank`, `__bench-rank`, `__hw-reaper`
    /// commands), read by the launcher that started it, never by a user.
    Rank(i32),
}

impl Exit {
    /// The process status: 0–3, 128 + the signal, or the rank's own (clamped to 0–255).
    pub fn code(self) -> u8 {
        let clamp = |c: i32| c.clamp(0, 255) as u8;
        match self {
            Exit::Ok => 0,
            Exit::Failed => 1,
            Exit::Invalid => 2,
            Exit::Internal => 3,
            Exit::Signal(sig) => clamp(128 + sig),
            Exit::Rank(code) => clamp(code),
        }
    }

    /// `Ok` when `holds`, else `Failed`: the verdict as an exit.
    pub fn verdict(holds: bool) -> Exit {
        if holds {
            Exit::Ok
        } else {
            Exit::Failed
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e.code())
    }
}

/// The codes 0–3 each user-facing command can give (README.md's table, row by row). `run`
/// with `--hw` or `--torch` can also give 128 + a signal's number ([`Exit::Signal`]).
pub const TABLE: &[(&str, &[Exit])] = {
    use Exit::*;
    &[
        ("run", &[Ok, Failed, Invalid, Internal]),
        ("replay", &[Ok, Failed, Invalid, Internal]),
        ("test", &[Ok, Failed, Invalid]),
        ("explore", &[Ok, Failed, Invalid, Internal]),
        ("check", &[Ok, Invalid]),
        ("shrink", &[Ok, Invalid, Internal]),
        ("doctor", &[Ok]),
        ("export", &[Ok, Invalid]),
        ("import-fr", &[Ok, Invalid]),
        ("record", &[Ok, Invalid, Internal]),
        ("bench", &[Ok, Failed, Invalid]),
    ]
};

/// `scen --help`'s summary of the codes (README.md has them per command).
pub fn help() -> String {
    let lines = [
        (Exit::Ok, "the scenario's expectations hold (the command did what was asked)"),
        (Exit::Failed, "they do not (the verdict says why)"),
        (
            Exit::Invalid,
            "invalid input (file, argument, output path, a limit of scen) or the requested mode cannot run",
        ),
        (
            Exit::Internal,
            "internal error in scen: no verdict; the seed and a replay command are printed",
        ),
    ];
    let mut s = String::from("Exit codes:\n");
    for (e, what) in lines {
        s.push_str(&format!("  {}  {what}\n", e.code()));
    }
    s.push_str("  128+N  run --hw/--torch ended by signal N (130 for Ctrl-C), after the report");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_documented_numbers() {
        assert_eq!(
            [Exit::Ok, Exit::Failed, Exit::Invalid, Exit::Internal].map(Exit::code),
            [0, 1, 2, 3]
        );
        assert_eq!(Exit::Signal(2).code(), 130);
        assert_eq!(Exit::Signal(15).code(), 143);
        assert_eq!(Exit::Rank(300).code(), 255);
        assert_eq!(Exit::Rank(-1).code(), 0);
        assert_eq!(Exit::verdict(false), Exit::Failed);
    }
}
