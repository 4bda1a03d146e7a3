//! `scen explore`: many seeds of one scenario grouped into verdict classes, sharded and merged.
//!
//! Exit codes: 0 the expectations hold for every seed, 1 some seed breaks them, 2 invalid input
//! (a bad scenario, --shard, or a merge of different scenarios or a repeated shard).

use super::{fail, stem};
use crate::cli::{ExploreArgs, Format};
use scen::exit::Exit;
use scen::explore;
use std::path::PathBuf;

pub fn explore(args: ExploreArgs) -> Exit {
    let result = if args.merge {
        merge(&args.files)
    } else {
        run(&args)
    };
    let e = match result {
        Ok(e) => e,
        Err(code) => return code,
    };
    match args.format {
        Format::Human => print!("{}", explore::render(&e)),
        Format::Json => match serde_json::to_string_pretty(&e) {
            Ok(j) => println!("{j}"),
            Err(err) => return fail(err.to_string()),
        },
    }
    if !e.internal_errors.is_empty() {
        Exit::Internal
    } else if e.seeds_failing > 0 {
        Exit::Failed
    } else {
        Exit::Ok
    }
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
    explore::merge(parts).map_err(fail)
}

fn run(args: &ExploreArgs) -> Result<explore::Exploration, Exit> {
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
        .map_err(fail)?
        .unwrap_or((0, 1));
    let list: Vec<u64> = (0..args.seeds).filter(|s| s % n == i).collect();
    let text = std::fs::read_to_string(file)
        .map_err(|e| fail(format!("{}: cannot read the scenario: {e}", file.display())))?;
    // indicatif draws only when stderr is a terminal.
    let bar = indicatif::ProgressBar::new(list.len() as u64);
    let r = explore::explore(
        &text,
        &file.display().to_string(),
        &stem(file),
        (i, n),
        &list,
        args.jobs,
        &|| bar.inc(1),
    );
    bar.finish_and_clear();
    r.map_err(fail)
}
