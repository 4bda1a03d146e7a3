//! One test per scenario in scenarios/ (a libtest-mimic harness, so `cargo test missing_rank`
//! runs that scenario and a failing run lists every failing scenario): its expectations must
//! hold, its verdict and trace must equal its insta snapshot in snapshots/, and two runs of the
//! same seed (its own, 0 and 7) must give byte-identical traces. The same code as `scen test`
//! (src/suite). When behaviour changes on purpose: `scen test --review`, `cargo insta review`
//! or INSTA_UPDATE=always.

use libtest_mimic::{Arguments, Failed, Trial};
use scen::suite::{self, snapshot, Settings, Status};
use std::path::Path;

fn main() {
    let args = Arguments::from_args();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let settings = Settings {
        snapshots: snapshot::Location::Dir(root.join("snapshots")),
        root: root.to_path_buf(),
        write: suite::Write::from_insta_env(),
        determinism_seeds: vec![0, 7],
        launcher: None,
        compare_launchers: false,
    };
    let files = suite::discover(&[root.join("scenarios")], None).expect("scenarios/ exists");
    assert!(!files.is_empty(), "no scenarios in scenarios/");
    let trials = files
        .into_iter()
        .map(|file| {
            let name = file.file_stem().unwrap().to_string_lossy().to_string();
            let settings = settings.clone();
            Trial::test(name, move || check(&file, &settings))
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}

fn check(file: &Path, settings: &Settings) -> Result<(), Failed> {
    let o = suite::run_one(file, settings);
    match o.status {
        Status::Passed | Status::Updated => Ok(()),
        Status::Failed | Status::Invalid | Status::NoSnapshot => {
            let mut lines: Vec<String> = o.problems.iter().map(ToString::to_string).collect();
            if o.status == Status::NoSnapshot {
                lines.push(o.no_snapshot_text());
            }
            let mut msg = lines.join("\n");
            if let Some(c) = &o.snapshot {
                let old = c.old.as_ref().map(|s| s.body.as_str()).unwrap_or("");
                msg.push('\n');
                msg.push_str(&snapshot::diff(old, &c.new_body));
            }
            Err(msg.into())
        }
    }
}
