//! The `scen` command's library: what the subcommands do beyond printing, kept here so the
//! repository's own tests (tests/*.rs) call the same code as the binary.

pub mod bench;
pub mod exit_code;
pub mod explore;
pub mod launcher;
pub mod logging;
pub mod output;
pub mod render;
pub mod shrink;
pub mod suite;
