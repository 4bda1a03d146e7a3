//! `scen bench`'s human output: the nccl-tests-style table of a report (with the columns its rows
//! have) and the `--compare` table, plus `--compare`'s JSON document. Text only, no printing, so
//! the CLI prints it and tests pin it.

use super::compare::{Bucket, Comparison};
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
    format!(
        "# scen bench: {} ranks on {} node(s), path {}, warmup {}, iters {}{}\n",
        r.ranks,
        r.nodes,
        r.path,
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
    let _ = writeln!(s, "# A = {an} ({} ranks, path {})", ra.ranks, ra.path);
    let _ = writeln!(s, "# B = {bn} ({} ranks, path {})", rb.ranks, rb.path);
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
    s.push_str("# by bucket (geometric mean of B's speedup over A):\n");
    for b in &c.buckets {
        let _ = writeln!(
            s,
            "{:>10}: {:.2}x over {} sizes ({:+.1}%)",
            b.bucket.label(),
            b.speedup,
            b.sizes,
            (b.speedup - 1.0) * 100.0
        );
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

/// `--compare --format json`: the same comparison as one document.
pub fn compare_json(c: &Comparison, an: &str, bn: &str, verdict: &str) -> serde_json::Value {
    serde_json::json!({
        "a": an, "b": bn,
        "sizes": c.sizes.iter().map(|s| serde_json::json!({
            "op": s.op, "size_bytes": s.size_bytes, "a_us": s.a_us, "b_us": s.b_us, "speedup": s.speedup()
        })).collect::<Vec<_>>(),
        "buckets": c.buckets.iter().map(|b| serde_json::json!({
            "bucket": b.bucket.label(), "sizes": b.sizes, "speedup": b.speedup
        })).collect::<Vec<_>>(),
        "overall": c.overall,
        "unmatched": c.unmatched,
        "verdict": verdict,
    })
}
