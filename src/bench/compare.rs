//! `scen bench --compare A.json B.json`: reads two `--format json` reports and gives the
//! comparison (core's perf/compare.rs) as the text to print, a table or a JSON document.

use anyhow::Context;
use scen_core::perf::compare::{compare, verdict};
use scen_core::perf::render::{compare_json, compare_table};
use scen_core::perf::result::BenchReport;
use std::path::Path;

/// Reads a `scen bench --format json` report (a parse error names file, line and column).
pub fn load_report(p: &Path) -> anyhow::Result<BenchReport> {
    let text =
        std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}:{}:{}: not a `scen bench --format json` report: {e}",
            p.display(),
            e.line(),
            e.column()
        )
    })
}

/// B against A: the table, or with `json` the document (each ending in a newline).
pub fn run(a: &Path, b: &Path, json: bool) -> anyhow::Result<String> {
    let (ra, rb) = (load_report(a)?, load_report(b)?);
    let c = compare(&ra, &rb);
    let (an, bn) = (a.display().to_string(), b.display().to_string());
    let v = verdict(&c, &an, &bn);
    if json {
        let doc = compare_json(&c, &an, &bn, &v);
        return Ok(format!("{}\n", serde_json::to_string_pretty(&doc)?));
    }
    Ok(compare_table(&c, (&ra, &an), (&rb, &bn), &v))
}
