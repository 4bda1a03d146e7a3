//! A scenario's text never runs as code on real PyTorch: `scen run --torch` of scenarios whose
//! every text field is hostile (a description that breaks its comment line into Python code, a
//! work name that closes its literal and calls, generated mixes of line breaks, quotes, NUL and
//! non-ASCII) must run the scenario's program as written (its expectations hold: rank 0
//! completes, rank 1 raises its ValueError) and never the payload, which would create a file.
//! Before torch mode's one emitter (crates/torch/src/translate/py.rs) the first two ran it.

use std::path::Path;
use std::process::Command;

#[path = "../shared/hostile_texts.rs"]
mod hostile_texts;
use hostile_texts::{hostile, scenario, Texts, PAYLOAD};

/// The two ways out seen in the generated program before: a comment line and a literal.
fn classic(payload: &str) -> Texts {
    Texts {
        description: format!("x\n{payload}\n#"),
        work: format!("w\" + str({payload}) + \""),
        ..Texts::plain()
    }
}

pub fn text_never_runs(root: &Path, python: &Path) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mark = dir.path().join("RAN");
    let payload = PAYLOAD.replace("MARK", &mark.to_string_lossy());
    let cases = [
        ("classic", classic(&payload)),
        ("mix1", hostile(1, &payload)),
        ("mix2", hostile(2, &payload)),
    ];
    for (name, texts) in cases {
        let file = dir.path().join(format!("{name}.toml"));
        std::fs::write(&file, scenario(&texts)).map_err(|e| e.to_string())?;
        let out = Command::new(env!("CARGO_BIN_EXE_scen"))
            .args(["run", "--torch"])
            .arg(&file)
            .arg("--python")
            .arg(python)
            .current_dir(root)
            .output()
            .map_err(|e| e.to_string())?;
        if mark.exists() {
            return Err(format!(
                "{name}: the scenario's text ran as code (it created {})",
                mark.display()
            ));
        }
        if out.status.code() != Some(0) {
            return Err(format!(
                "{name}: scen run --torch exited {:?}\n{}{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    Ok(())
}
