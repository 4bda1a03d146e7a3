//! `scen test`: run a suite of scenarios, one line each and a summary; `--update` and
//! `--review` for snapshots, `--junit` for CI.
//!
//! Exit codes: 0 every scenario passed (or was updated, or only lacks a snapshot), 1 one or more
//! failed (or, under CI, lacks a snapshot), 2 invalid input (a bad path, scen.toml or scenario
//! file, `--review` without a terminal, no scenario found, `--update`/`--review` with
//! `--launcher processes|torchrun`). `--launcher both` adds notes, never a failure.
//!
//! A scenario without a snapshot is its own state, `NEW`: its expectations were checked and
//! hold, there is just nothing to compare with yet. A first `scen test` on a suite says so at
//! the top instead of failing every scenario. Under CI (`CI` set, as insta reads it) a missing
//! snapshot fails: a scenario committed without one would otherwise pin nothing.

use super::fail;
use crate::cli::TestArgs;
use scen::exit_code::Exit;
use scen::launcher::Choice;
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
    if args.launcher.is_some_and(|l| l != Choice::Both) && (args.update || args.review) {
        return fail(
            "--launcher processes|torchrun checks the scenarios under a launcher that may not be \
             their own, and --update/--review would write those verdicts as their snapshots; \
             drop one of them (--launcher both keeps each scenario's own launcher)"
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
        launcher: args.launcher.and_then(Choice::single),
        compare_launchers: args.launcher == Some(Choice::Both),
    };
    if let Some(notice) = no_snapshots_notice(&settings.snapshots, &files).filter(|_| !args.update)
    {
        println!("{notice}");
    }
    let strict = under_ci();
    let mut outcomes = suite::run_all(&files, &settings, args.jobs, &mut |o| {
        println!("{}", line(o, strict));
        for n in &o.notes {
            println!("{n}");
        }
    });
    if args.review {
        if let Err(e) = review(&mut outcomes) {
            return fail(format!("{e:#}"));
        }
    } else {
        print_failures(&outcomes);
    }
    println!("{}", summary(&outcomes, strict));
    if settings.compare_launchers {
        let differ = outcomes.iter().filter(|o| !o.notes.is_empty()).count();
        println!(
            "launchers: the verdict differs under the other launcher for {differ} of {} scenarios",
            outcomes.len()
        );
    }
    if let Some(path) = &args.junit {
        let written = scen::render::junit::render(&outcomes, strict)
            .and_then(|xml| scen::output::write_whole(path, xml.as_bytes()));
        if let Err(e) = written {
            return fail(format!("--junit: {e:#}"));
        }
    }
    exit_code(&outcomes, strict)
}

/// `CI` set (and not `false`/`0`), as insta decides it runs under CI.
fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "false" | "0"))
}

/// Said before any result when no scenario of the suite can have a snapshot yet (the snapshot
/// directory, or every scenario's directory for `beside`, holds no `.snap` file).
fn no_snapshots_notice(loc: &snapshot::Location, files: &[PathBuf]) -> Option<String> {
    let has_snap = |dir: &std::path::Path| {
        std::fs::read_dir(dir).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "snap"))
        })
    };
    let (empty, place) = match loc {
        snapshot::Location::Dir(d) => (!has_snap(d), d.display().to_string()),
        snapshot::Location::Beside => (
            files
                .iter()
                .all(|f| f.parent().is_none_or(|d| !has_snap(d))),
            "beside the scenarios".to_string(),
        ),
    };
    empty.then(|| {
        format!(
            "no snapshot yet ({place} has none): each scenario is checked against its [[expect]] \
             only; run `scen test --update` to write them"
        )
    })
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

fn line(o: &Outcome, strict: bool) -> String {
    match o.status {
        Status::NoSnapshot if strict => format!(
            "FAILED   {}: expectations hold, but no snapshot (a failure under CI): run `scen test --update` and commit it",
            o.name
        ),
        Status::Passed => format!("ok       {}", o.name),
        Status::Updated => format!("updated  {} (snapshot written)", o.name),
        Status::Failed => format!("FAILED   {}: {}", o.name, brief(&o.problems)),
        Status::Invalid => format!("INVALID  {}: {}", o.name, brief(&o.problems)),
        Status::NoSnapshot => format!(
            "NEW      {}: expectations hold; no snapshot yet: run `scen test --update`",
            o.name
        ),
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
        // A scenario without a snapshot has no diff to show (its verdict is above).
        if let Some(c) = o.snapshot.as_ref().filter(|c| c.old.is_some()) {
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
        if !matches!(o.status, Status::Failed | Status::NoSnapshot) {
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

fn summary(outcomes: &[Outcome], strict: bool) -> String {
    let count = |s: Status| outcomes.iter().filter(|o| o.status == s).count();
    let (passed, updated) = (count(Status::Passed), count(Status::Updated));
    let (failed, invalid) = (count(Status::Failed), count(Status::Invalid));
    let new = count(Status::NoSnapshot);
    let word = if failed + invalid == 0 && (new == 0 || !strict) {
        "ok"
    } else {
        "FAILED"
    };
    // Under CI a scenario without a snapshot fails, and the line counts it so.
    let counts = if strict && new > 0 {
        format!(
            "{passed} passed, {} failed ({new} without a snapshot: a failure under CI, commit the snapshots), {invalid} invalid, {updated} updated",
            failed + new
        )
    } else {
        format!(
            "{passed} passed, {failed} failed, {invalid} invalid, {updated} updated, {new} without snapshot"
        )
    };
    let mut text = format!(
        "\ntest result: {word}. {counts} ({} scenarios)",
        outcomes.len()
    );
    if new > 0 {
        text.push_str(&format!(
            "\nno snapshot yet for {new} scenario(s): `scen test --update` writes them"
        ));
    }
    if failed > 0
        && outcomes.iter().any(|o| {
            o.status == Status::Failed && o.snapshot.as_ref().is_some_and(|c| c.old.is_some())
        })
    {
        text.push_str(
            "\nchanged snapshots: `scen test --review` to look at each, `--update` to accept all",
        );
    }
    text
}

fn exit_code(outcomes: &[Outcome], strict: bool) -> Exit {
    let any = |s: Status| outcomes.iter().any(|o| o.status == s);
    if any(Status::Invalid) {
        Exit::Invalid
    } else if any(Status::Failed) || (strict && any(Status::NoSnapshot)) {
        Exit::Failed
    } else {
        Exit::Ok
    }
}
