//! `scen bench --compare A.json B.json` (and `--ab`'s comparison): reads two `--format json`
//! reports and gives the comparison (core's perf/compare.rs) as the text to print, a table or a
//! JSON document. A torch.distributed report against a device-path (oneCCL) one is ordered as the
//! users' notes do (compare_perf.py baseline_pytorch.json baseline_pynccl.json): A = torch, the
//! baseline; B = the device communicator, whose gain the notes' expected ranges are.

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

/// Two named reports, A first.
pub type Named<'a> = (&'a BenchReport, String);

/// Swaps a (device path, torch) pair into the notes' order; says so when it did.
pub fn order<'a>(a: Named<'a>, b: Named<'a>) -> (Named<'a>, Named<'a>, bool) {
    if a.0.path != "torch" && a.0.path != "sim" && b.0.path == "torch" {
        (b, a, true)
    } else {
        (a, b, false)
    }
}

/// B against A: the table, or with `json` the document (each ending in a newline).
pub fn render(a: Named, b: Named, json: bool) -> anyhow::Result<String> {
    let ((ra, an), (rb, bn), swapped) = order(a, b);
    let c = compare(ra, rb);
    let v = verdict(&c, &an, &bn);
    if json {
        let mut doc = compare_json(&c, &an, &bn, &v);
        doc["reordered"] = swapped.into();
        return Ok(format!("{}\n", serde_json::to_string_pretty(&doc)?));
    }
    let mut s = String::new();
    if swapped {
        s.push_str("# ordered as the notes' compare_perf.py: A = torch.distributed (the baseline), B = the device communicator\n");
    }
    s.push_str(&compare_table(&c, (ra, &an), (rb, &bn), &v));
    Ok(s)
}
