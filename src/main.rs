//! The `scen` command line: run a scenario in the simulator (or on hardware), test a suite of
//! scenarios, validate one, explore seeds, shrink a failing one.
//!
//! Exit codes: 0 when the scenario's expectations hold, 1 when they do not, 2 on invalid input
//! (a bad scenario file or argument) or when the requested mode cannot run.

// One allowed exception: src/alloc.rs sets an allocator option through mimalloc's C API.
#![deny(unsafe_code)]

/// `println!` and `print!` for the whole binary: a closed stdout (`scen run FILE | head`) drops
/// the rest of the output instead of panicking (src/stdout.rs). Defined before the modules so
/// that their uses resolve here, not to std's.
macro_rules! println {
    () => { $crate::stdout::write(format_args!(""), true) };
    ($($arg:tt)*) => { $crate::stdout::write(format_args!($($arg)*), true) };
}
macro_rules! print {
    ($($arg:tt)*) => { $crate::stdout::write(format_args!($($arg)*), false) };
}

mod cli;
mod cmd;
mod stdout;

mod alloc;

use clap::Parser;
use cli::{Cli, Cmd};
use scen::exit_code::Exit;
use std::process::ExitCode;

fn main() -> ExitCode {
    alloc::keep_freed_memory();
    let cli = Cli::parse();
    ExitCode::from(dispatch(cli))
}

fn dispatch(cli: Cli) -> Exit {
    // Every output of every command, checked before anything is written (src/output.rs).
    if let Err(e) = cli.check_outputs() {
        return cmd::fail(e.to_string());
    }
    let log_file = match scen::logging::init(cli.verbose, cli.log_file.as_deref()) {
        Ok(pending) => pending,
        Err(e) => return cmd::fail(format!("{e:#}")),
    };
    let code = run(cli.cmd);
    // The log file is whole once the command has ended (src/output.rs).
    match log_file.map(|f| f.commit()).transpose() {
        Ok(_) => code,
        Err(e) => cmd::fail(e.to_string()),
    }
}

fn run(command: Cmd) -> Exit {
    match command {
        Cmd::Run(args) => cmd::run::run(args),
        Cmd::Test(args) => cmd::test::test(args),
        Cmd::Check { file } => cmd::check::check(&file),
        Cmd::Doctor => cmd::check::doctor(),
        Cmd::Bench(args) => cmd::bench::run(args),
        Cmd::BenchRank => Exit::Rank(scen_hw::bench::rank::rank_main()),
        Cmd::HwRank { file } => cmd::run::hw_rank(&file),
        Cmd::HwReaper => Exit::Rank(scen_hw::reaper::main()),
        Cmd::Replay(args) => cmd::run::replay(args),
        Cmd::Explore(args) => cmd::explore::explore(args),
        Cmd::Shrink(args) => cmd::shrink::shrink(args),
        Cmd::ImportFr(a) => cmd::fr::import_cmd(&a),
        Cmd::Record(args) => cmd::record::record(args),
        Cmd::Export(args) => cmd::torch::export(&args.file, args.out.as_deref(), args.time_scale),
    }
}
