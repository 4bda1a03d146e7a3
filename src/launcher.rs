//! `--launcher`: run a scenario under another launcher than its `[world] launcher`, or under
//! both. The launcher decides who hosts the TCPStore (rank 0's `init_process_group`, or
//! torchrun's agent) and whether one failed worker makes the agent stop the others, so a verdict
//! can hold under one and not the other (docs/torch.md, "Launch semantics").

use clap::ValueEnum;
use scen_core::scenario::Launcher;

/// `scen run --launcher`: one launcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum One {
    Processes,
    Torchrun,
}

impl From<One> for Launcher {
    fn from(o: One) -> Launcher {
        match o {
            One::Processes => Launcher::Processes,
            One::Torchrun => Launcher::Torchrun,
        }
    }
}

/// `scen explore|test --launcher`: one launcher, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Choice {
    Processes,
    Torchrun,
    /// The scenario's own launcher, then the other one.
    Both,
}

impl Choice {
    /// The one launcher that replaces the scenario's; `None` for `both`.
    pub fn single(self) -> Option<Launcher> {
        match self {
            Choice::Processes => Some(Launcher::Processes),
            Choice::Torchrun => Some(Launcher::Torchrun),
            Choice::Both => None,
        }
    }
}

/// The launcher that is not `l`.
pub fn other(l: Launcher) -> Launcher {
    match l {
        Launcher::Processes => Launcher::Torchrun,
        Launcher::Torchrun => Launcher::Processes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_is_no_single_launcher_and_other_flips() {
        assert_eq!(Choice::Both.single(), None);
        assert_eq!(Choice::Torchrun.single(), Some(Launcher::Torchrun));
        assert_eq!(other(Launcher::Processes), Launcher::Torchrun);
        assert_eq!(other(Launcher::Torchrun), Launcher::Processes);
        assert_eq!(Launcher::from(One::Processes), Launcher::Processes);
    }
}
