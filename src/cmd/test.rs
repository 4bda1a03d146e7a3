//! `scen test`: run a suite of scenarios, one line each and a summary; `--update` and
//! `--review` for snapshots, `--junit` for CI.
//!
//! Exit codes: 0 every scenario passed (or was updated), 1 one or more failed, 2 invalid input
//! (a bad path, scen.toml or scenario file, `--review` without a terminal, no scenario found).

use super::fail;
use crate::cli::TestArgs;
use scen::exit::Exit;
use scen::suite::{self, snapshot, Outcome, Problem, Settings, Status};
use std::io::{BufRead, IsTerminal, Write as _};
use std::path::PathBuf;

pub fn test(args: TestArgs) -> Exit {
    if args.review && !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        return fail(
            "--review asks about each changed snapshot on a terminal, and stdin/stdout is not one; \
             use --update to accept every change, or `cargo insta review` on the .snap.new files \
             that INSTA_UPDATE=new writes"
                .into(),
        );
    }
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from("scenarios")]
    } else {
        args.paths.clone()
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let (snapshots, root) = match suite::locate_snapshots(
        args.snapshots.as_deref(),
        paths.first().map(PathBuf::as_path),
        &cwd,
    ) {
        Ok(x) => x,
        Err(e) => return fail(e.to_string()),
    };
    let files = match suite::discover(&paths, args.pattern.as_deref()) {
        Ok(f) if f.is_empty() => return fail(no_scenarios(&paths, args.pattern.as_deref())),
        Ok(f) => f,
        Err(e) => return fail(e.to_string()),
    };
    let settings = Settings {
        snapshots,
        root,
        write: if args.update {
            suite::Write::Overwrite
        } else {
            suite::Write::No
        },
        determinism_seeds: Vec::new(),
    };
    let mut outcomes = suite::run_all(&files, &settings, args.jobs, &mut |o| {
        println!("{}", line(o))
    });
    if args.review {
        if let Err(e) = review(&mut outcomes) {
            return fail(format!("{e:#}"));
        }
    } else {
        print_failures(&outcomes);
    }
    println!("{}", summary(&outcomes));
    if let Some(path) = &args.junit {
        let written = suite::junit::render(&outcomes)
            .and_then(|xml| scen::output::write_whole(path, xml.as_bytes()));
        if let Err(e) = written {
            return fail(format!("--junit: {e:#}"));
        }
    }
    exit_code(&outcomes)
}

fn no_scenarios(paths: &[PathBuf], pattern: Option<&str>) -> String {
    let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    match pattern {
        Some(p) => format!(
            "no scenario under {} has `{p}` in its name",
            list.join(", ")
        ),
        None => format!("no scenario (*.toml) under {}", list.join(", ")),
    }
}

fn line(o: &Outcome) -> String {
    match o.status {
        Status::Passed => format!("ok       {}", o.name),
        Status::Updated => format!("updated  {} (snapshot written)", o.name),
        Status::Failed => format!("FAILED   {}: {}", o.name, brief(&o.problems)),
        Status::Invalid => format!("INVALID  {}: {}", o.name, brief(&o.problems)),
    }
}

/// The first problem, and how many more there are (the details follow the list).
fn brief(problems: &[Problem]) -> String {
    match problems {
        [] => String::new(),
        [one] => one.to_string(),
        [first, rest @ ..] => format!("{first} (+{} more)", rest.len()),
    }
}

fn print_failures(outcomes: &[Outcome]) {
    for o in outcomes.iter().filter(|o| o.status == Status::Failed) {
        println!("\n--- {} ({}):", o.name, o.file.display());
        for p in &o.problems {
            println!("  {p}");
        }
        if let Some(c) = &o.snapshot {
            print!("{}", change_diff(c));
        }
    }
}

fn change_diff(c: &suite::SnapChange) -> String {
    match &c.old {
        Some(old) => snapshot::diff(&old.body, &c.new_body),
        None => format!("(new snapshot)\n{}\n", c.new_body.trim_end()),
    }
}

/// Asks about each changed snapshot: accept writes it, reject and skip leave the scenario failed.
fn review(outcomes: &mut [Outcome]) -> anyhow::Result<()> {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut accept_all = false;
    for o in outcomes.iter_mut() {
        let Some(c) = &o.snapshot else { continue };
        if o.status != Status::Failed {
            continue;
        }
        println!("\n--- {} ({}):", o.name, c.path.display());
        print!("{}", change_diff(c));
        let answer = if accept_all {
            'a'
        } else {
            ask(&mut input, &o.name)?
        };
        match answer {
            'A' => {
                accept_all = true;
                o.accept_snapshot()?;
            }
            'a' => o.accept_snapshot()?,
            'r' => println!("rejected: {} keeps its old snapshot", o.name),
            _ => println!("skipped: {}", o.name),
        }
    }
    Ok(())
}

fn ask(input: &mut dyn BufRead, name: &str) -> anyhow::Result<char> {
    loop {
        print!("{name}: [a]ccept, [r]eject, [s]kip, [A]ccept all? ");
        std::io::stdout().flush()?;
        let mut text = String::new();
        if input.read_line(&mut text)? == 0 {
            return Ok('s');
        }
        match text.trim() {
            "a" | "accept" => return Ok('a'),
            "A" => return Ok('A'),
            "r" | "reject" => return Ok('r'),
            "s" | "skip" | "" => return Ok('s'),
            other => println!("`{other}`: answer a, r, s or A"),
        }
    }
}

fn summary(outcomes: &[Outcome]) -> String {
    let count = |s: Status| outcomes.iter().filter(|o| o.status == s).count();
    let (passed, updated) = (count(Status::Passed), count(Status::Updated));
    let (failed, invalid) = (count(Status::Failed), count(Status::Invalid));
    let word = if failed + invalid == 0 {
        "ok"
    } else {
        "FAILED"
    };
    let mut text = format!(
        "\ntest result: {word}. {passed} passed, {failed} failed, {invalid} invalid, {updated} updated ({} scenarios)",
        outcomes.len()
    );
    if failed > 0
        && outcomes
            .iter()
            .any(|o| o.snapshot.is_some() && o.status == Status::Failed)
    {
        text.push_str(
            "\nchanged snapshots: `scen test --review` to look at each, `--update` to accept all",
        );
    }
    text
}

fn exit_code(outcomes: &[Outcome]) -> Exit {
    if outcomes.iter().any(|o| o.status == Status::Invalid) {
        Exit::Invalid
    } else if outcomes.iter().any(|o| o.status == Status::Failed) {
        Exit::Failed
    } else {
        Exit::Ok
    }
}
