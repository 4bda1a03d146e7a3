//! `scen bench`'s human output: the nccl-tests-style table of a report (with the columns its rows
//! have) and the `--compare` table, plus `--compare`'s JSON document. Text only, no printing, so
//! the CLI prints it and tests pin it.

use super::compare::{model_expected_gain_pct, Bucket, Comparison};
use super::model;
use super::pattern::Pattern;
use super::result::{BenchReport, BenchRow};
use super::sweep::human_size;
use std::fmt::Write;

/// Which optional columns a report's rows have.
struct Columns {
    hw: bool,
    raw: bool,
    sim: bool,
    median: bool,
}

impl Columns {
    fn of(rows: &[BenchRow]) -> Columns {
        let any = |f: fn(&BenchRow) -> bool| rows.iter().any(f);
        Columns {
            hw: any(|x| x.hw.is_some()),
            raw: any(|x| x.raw.is_some()),
            sim: any(|x| x.sim.is_some()),
            median: any(|x| x.hw_median_us.is_some()),
        }
    }

    fn head(&self) -> String {
        let mut head = format!(
            "{:>14} {:>10} {:>10} {:>5} {:>5}",
            "op", "size", "count", "type", "redop"
        );
        if self.hw {
            head += &format!(
                " {:>10} {:>8} {:>8} {:>6}",
                "time_us", "algbw", "busbw", "#wrong"
            );
        }
        if self.raw {
            head += &format!(" {:>10} {:>8} {:>7}", "raw_us", "raw_bus", "%raw");
        }
        if self.sim {
            head += &format!(" {:>10} {:>8}", "sim_us", "sim_bus");
            if self.hw {
                if self.median {
                    head += &format!(" {:>10}", "med_us");
                }
                head += &format!(" {:>7}", "err%");
            }
        }
        head
    }

    fn line(&self, x: &BenchRow) -> String {
        let mut line = format!(
            "{:>14} {:>10} {:>10} {:>5} {:>5}",
            x.op.name(),
            x.size_bytes,
            x.count,
            x.dtype,
            x.redop
        );
        if let Some(h) = x.hw {
            line += &format!(
                " {:>10.1} {:>8.3} {:>8.3} {:>6}",
                h.time_us,
                h.algbw_gbps,
                h.busbw_gbps,
                x.wrong.unwrap_or(0)
            );
        }
        if let (Some(w), Some(h)) = (x.raw, x.hw) {
            line += &format!(
                " {:>10.1} {:>8.3} {:>6.1}%",
                w.time_us,
                w.busbw_gbps,
                100.0 * h.busbw_gbps / w.busbw_gbps.max(f64::MIN_POSITIVE)
            );
        }
        if let Some(m) = x.sim {
            line += &format!(" {:>10.1} {:>8.3}", m.time_us, m.busbw_gbps);
            if let Some(t) = x.measured_us() {
                if self.median {
                    line += &format!(" {:>10.1}", x.hw_median_us.unwrap_or(t));
                }
                line += &format!(" {:>+6.1}%", model::rel_error(m.time_us, t) * 100.0);
            }
        }
        line
    }
}

/// The `# scen bench: ...` line.
fn title(r: &BenchReport) -> String {
    let env: Vec<String> = r.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let by: Vec<String> = [
        ("backend", &r.backend),
        ("torch", &r.torch),
        ("oneCCL", &r.oneccl),
    ]
    .iter()
    .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k} {v}")))
    .collect();
    let path = if by.is_empty() {
        r.path.clone()
    } else {
        format!("{} ({})", r.path, by.join(", "))
    };
    format!(
        "# scen bench: {} ranks on {} node(s), path {}, warmup {}, iters {}{}\n",
        r.ranks,
        r.nodes,
        path,
        r.warmup,
        r.iters,
        if env.is_empty() {
            String::new()
        } else {
            format!(", env {}", env.join(" "))
        }
    )
}

/// A report as `scen bench` prints it: title, model and pattern lines, the table, the notes.
pub fn render(r: &BenchReport, p: Option<&Pattern>) -> String {
    let mut s = title(r);
    if let Some(m) = &r.model {
        s.push_str(&format!("# model: {m}\n"));
    }
    if let Some(p) = p {
        s.push_str(&format!("# pattern: {p}\n"));
    }
    let cols = Columns::of(&r.rows);
    s.push_str(&format!("#{}\n", &cols.head()[1..]));
    for x in &r.rows {
        s.push_str(&cols.line(x));
        s.push('\n');
    }
    for n in &r.notes {
        s.push_str(&format!("# {n}\n"));
    }
    s
}

/// `--compare` as a table: A and B named `an` and `bn`, each size's speedup, each bucket's, and
/// the `verdict` line.
pub fn compare_table(
    c: &Comparison,
    (ra, an): (&BenchReport, &str),
    (rb, bn): (&BenchReport, &str),
    verdict: &str,
) -> String {
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(s, "# A = {an} ({})", describe(ra));
    let _ = writeln!(s, "# B = {bn} ({})", describe(rb));
    let _ = writeln!(
        s,
        "{:>14} {:>10} {:>12} {:>12} {:>9} {:>9}",
        "op", "size", "A_us", "B_us", "speedup", "bucket"
    );
    for x in &c.sizes {
        let _ = writeln!(
            s,
            "{:>14} {:>10} {:>12.1} {:>12.1} {:>8.2}x {:>9}",
            x.op.name(),
            human_size(x.size_bytes),
            x.a_us,
            x.b_us,
            x.speedup(),
            Bucket::of(x.size_bytes).label()
        );
    }
    s.push_str("# by bucket (geometric mean of B's speedup over A; the notes' expected gain of the device communicator over torch.distributed beside it):\n");
    for b in &c.buckets {
        let (lo, hi) = b.bucket.expected_gain_pct();
        let _ = writeln!(
            s,
            "{:>10}: {:.2}x over {} sizes ({:+.1}%)   notes expect +{lo:.0}-{hi:.0}%",
            b.bucket.label(),
            b.speedup,
            b.sizes,
            (b.speedup - 1.0) * 100.0
        );
    }
    if let Some(st) = &c.step {
        let (la, lb) = st.per_layer_us();
        let _ = writeln!(
            s,
            "# per denoise step ({}, {} layers): A {:.3} ms, B {:.3} ms ({:.2}x); per attention layer: A {:.1} us, B {:.1} us",
            st.name,
            st.layers,
            st.a_step_us / 1e3,
            st.b_step_us / 1e3,
            st.speedup(),
            la,
            lb
        );
        for (label, k, a, b) in &st.ops {
            let _ = writeln!(
                s,
                "#   {label} x{k}: A {:.3} ms, B {:.3} ms per step",
                a / 1e3,
                b / 1e3
            );
        }
        if let Some((model, lo, hi)) = model_expected_gain_pct(&st.name) {
            let _ = writeln!(
                s,
                "# notes expect for {model}: +{lo:.0}-{hi:.0}% end to end (the whole generation, of which communication is a part)"
            );
        }
    }
    if c.unmatched > 0 {
        let _ = writeln!(
            s,
            "# {} rows appear in only one file and are not compared",
            c.unmatched
        );
    }
    let _ = writeln!(s, "verdict: {verdict}");
    s
}

/// A report's provenance for the compare header: ranks, path, backend and versions.
fn describe(r: &BenchReport) -> String {
    let mut d = format!("{} ranks, path {}", r.ranks, r.path);
    for (k, v) in [
        ("backend", &r.backend),
        ("torch", &r.torch),
        ("oneCCL", &r.oneccl),
    ] {
        if let Some(v) = v {
            d += &format!(", {k} {v}");
        }
    }
    d
}

/// `--compare --format json`: the same comparison as one document.
pub fn compare_json(c: &Comparison, an: &str, bn: &str, verdict: &str) -> serde_json::Value {
    serde_json::json!({
        "a": an, "b": bn,
        "sizes": c.sizes.iter().map(|s| serde_json::json!({
            "op": s.op, "size_bytes": s.size_bytes, "a_us": s.a_us, "b_us": s.b_us, "speedup": s.speedup()
        })).collect::<Vec<_>>(),
        "buckets": c.buckets.iter().map(|b| serde_json::json!({
            "bucket": b.bucket.label(), "sizes": b.sizes, "speedup": b.speedup,
            "expected_gain_pct": b.bucket.expected_gain_pct(),
        })).collect::<Vec<_>>(),
        "overall": c.overall,
        "headline": c.headline,
        "band": c.band,
        "step": c.step.as_ref().map(|st| serde_json::json!({
            "pattern": st.name, "layers": st.layers, "a_step_us": st.a_step_us,
            "b_step_us": st.b_step_us, "speedup": st.speedup(),
            "a_layer_us": st.per_layer_us().0, "b_layer_us": st.per_layer_us().1,
            "expected_gain_pct": model_expected_gain_pct(&st.name).map(|(_, lo, hi)| (lo, hi)),
        })),
        "unmatched": c.unmatched,
        "verdict": verdict,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::compare::compare;
    use crate::perf::result::{Timing, SCHEMA};
    use crate::perf::BenchOp;

    fn row(op: BenchOp, bytes: usize, hw: Option<f64>, sim: Option<f64>) -> BenchRow {
        BenchRow {
            op,
            size_bytes: bytes,
            count: bytes / 4,
            dtype: "f32".into(),
            redop: if op.reduces() { "sum" } else { "-" }.into(),
            hw: hw.map(|t| Timing::of(op, bytes, 2, t)),
            raw: None,
            sim: sim.map(|t| Timing::of(op, bytes, 2, t)),
            hw_median_us: None,
            wrong: hw.map(|_| 3),
            hw_repeats_us: Vec::new(),
        }
    }

    fn report(rows: Vec<BenchRow>) -> BenchReport {
        BenchReport {
            schema: SCHEMA,
            path: "oneccl".into(),
            ranks: 2,
            nodes: 1,
            warmup: 5,
            iters: 20,
            env: vec![("CCL_ATL_SHM".into(), "1".into())],
            model: Some("intra 10.0us".into()),
            model_source: None,
            seed: 0,
            rows,
            notes: vec!["a note".into()],
            backend: None,
            torch: None,
            oneccl: None,
            pattern: None,
        }
    }

    #[test]
    fn a_two_row_report_renders_as_nccl_tests_columns() {
        let r = report(vec![
            row(BenchOp::AllReduce, 1 << 20, Some(100.0), Some(110.0)),
            row(BenchOp::Broadcast, 4096, Some(20.0), Some(10.0)),
        ]);
        let want = "\
# scen bench: 2 ranks on 1 node(s), path oneccl, warmup 5, iters 20, env CCL_ATL_SHM=1
# model: intra 10.0us
#           op       size      count  type redop    time_us    algbw    busbw #wrong     sim_us  sim_bus    err%
    all_reduce    1048576     262144   f32   sum      100.0   10.486   10.486      3      110.0    9.533  +10.0%
     broadcast       4096       1024   f32     -       20.0    0.205    0.205      3       10.0    0.410  -50.0%
# a note
";
        assert_eq!(render(&r, None), want);
    }

    #[test]
    fn a_predicted_only_report_has_no_measured_columns() {
        let mut r = report(vec![row(BenchOp::AllGather, 8192, None, Some(5.0))]);
        r.env.clear();
        r.notes.clear();
        let got = render(&r, None);
        let lines: Vec<&str> = got.lines().collect();
        assert_eq!(
            lines[0],
            "# scen bench: 2 ranks on 1 node(s), path oneccl, warmup 5, iters 20"
        );
        assert_eq!(
            lines[2],
            "#           op       size      count  type redop     sim_us  sim_bus"
        );
        assert_eq!(
            lines[3],
            "    all_gather       8192       2048   f32     -        5.0    0.819"
        );
        assert_eq!(lines.len(), 4);
    }

    #[test]
    fn compare_prints_each_size_each_bucket_and_the_verdict() {
        let a = report(vec![
            row(BenchOp::AllReduce, 4096, Some(20.0), None),
            row(BenchOp::AllReduce, 2 << 20, Some(400.0), None),
            row(BenchOp::Broadcast, 4096, Some(9.0), None),
        ]);
        let b = report(vec![
            row(BenchOp::AllReduce, 4096, Some(10.0), None),
            row(BenchOp::AllReduce, 2 << 20, Some(400.0), None),
        ]);
        let c = compare(&a, &b);
        let got = compare_table(&c, (&a, "a.json"), (&b, "b.json"), "V");
        let want = "\
# A = a.json (2 ranks, path oneccl)
# B = b.json (2 ranks, path oneccl)
            op       size         A_us         B_us   speedup    bucket
    all_reduce         4K         20.0         10.0     2.00x    <1 MiB
    all_reduce         2M        400.0        400.0     1.00x  1-10 MiB
# by bucket (geometric mean of B's speedup over A; the notes' expected gain of the device communicator over torch.distributed beside it):
    <1 MiB: 2.00x over 1 sizes (+100.0%)   notes expect +0-10%
  1-10 MiB: 1.00x over 1 sizes (+0.0%)   notes expect +10-30%
# 1 rows appear in only one file and are not compared
verdict: V
";
        assert_eq!(got, want);
        let doc = compare_json(&c, "a.json", "b.json", "V");
        assert_eq!(doc["sizes"][0]["speedup"], 2.0);
        assert_eq!(doc["buckets"][1]["bucket"], "1-10 MiB");
        assert_eq!(
            (doc["unmatched"].as_u64(), doc["verdict"].as_str()),
            (Some(1), Some("V"))
        );
    }
}
