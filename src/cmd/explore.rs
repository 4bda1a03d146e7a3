//! `scen explore`: many seeds of one scenario grouped into verdict classes, sharded and merged.
//!
//! Exit codes: 0 the expectations hold for every seed, 1 some seed breaks them, 2 invalid input
//! (a bad scenario, --shard, or a merge of different scenarios, launchers or a repeated shard),
//! 3 an internal error. With `--launcher both` the expectations are judged under the scenario's
//! own launcher (they were written for it); the other's classes are compared, not judged (an
//! internal error under either is still 3).

use super::{fail, stem};
use crate::cli::{ExploreArgs, Format};
use scen::exit_code::Exit;
use scen::explore;
use scen::launcher::{other, Choice};
use scen_core::scenario::Launcher;
use std::path::PathBuf;

pub fn explore(args: ExploreArgs) -> Exit {
    let result = if args.merge {
        merge(&args.files).map(|e| vec![e])
    } else {
        by_launcher(&args)
    };
    let runs = match result {
        Ok(e) => e,
        Err(code) => return code,
    };
    let printed = match (&runs[..], args.format) {
        ([one], Format::Human) => Ok(explore::render(one)),
        ([one], Format::Json) => serde_json::to_string_pretty(one).map(|j| format!("{j}\n")),
        (_, Format::Human) => Ok(explore::render_by_launcher(&explore::compare(runs.clone()))),
        (_, Format::Json) => {
            serde_json::to_string_pretty(&explore::compare(runs.clone())).map(|j| format!("{j}\n"))
        }
    };
    match printed {
        Ok(text) => print!("{text}"),
        Err(err) => return fail(err.to_string()),
    }
    if runs.iter().any(|e| !e.internal_errors.is_empty()) {
        Exit::Internal
    } else if runs[0].seeds_failing > 0 {
        Exit::Failed
    } else {
        Exit::Ok
    }
}

/// The exploration under `--launcher`'s launcher, or (`both`) under the scenario's own and then
/// the other.
fn by_launcher(args: &ExploreArgs) -> Result<Vec<explore::Exploration>, Exit> {
    let choice = args.launcher;
    let first = run(args, choice.and_then(Choice::single))?;
    if choice != Some(Choice::Both) {
        return Ok(vec![first]);
    }
    let own = Launcher::parse(&first.launcher).unwrap_or_default();
    let second = run(args, Some(other(own)))?;
    Ok(vec![first, second])
}

fn merge(files: &[PathBuf]) -> Result<explore::Exploration, Exit> {
    let mut parts = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).map_err(|e| fail(format!("{}: {e}", f.display())))?;
        let part = serde_json::from_str::<explore::Exploration>(&text).map_err(|e| {
            fail(format!(
                "{}: not an `scen explore --format json` output: {e}",
                f.display()
            ))
        })?;
        parts.push(part);
    }
    explore::merge(parts).map_err(|e| fail(e.to_string()))
}

fn run(args: &ExploreArgs, launcher: Option<Launcher>) -> Result<explore::Exploration, Exit> {
    let [file] = args.files.as_slice() else {
        return Err(fail(
            "explore takes one scenario file (or --merge with shard outputs)".into(),
        ));
    };
    let (i, n) = args
        .shard
        .as_deref()
        .map(explore::parse_shard)
        .transpose()
        .map_err(|e| fail(e.to_string()))?
        .unwrap_or((0, 1));
    let list: Vec<u64> = (0..args.seeds).filter(|s| s % n == i).collect();
    let text = std::fs::read_to_string(file)
        .map_err(|e| fail(format!("{}: cannot read the scenario: {e}", file.display())))?;
    // indicatif draws only when stderr is a terminal.
    let bar = indicatif::ProgressBar::new(list.len() as u64);
    let r = explore::explore(
        &text,
        (&file.display().to_string(), &stem(file)),
        launcher,
        (i, n),
        &list,
        args.jobs,
        &|| bar.inc(1),
    );
    bar.finish_and_clear();
    r.map_err(|e| fail(e.to_string()))
}
