//! `scen bench --plot FILE.svg`: bus bandwidth against size on log axes, one line per report
//! (and op), the notes' three size buckets shaded, the timing model's prediction dashed where a
//! report has it; a `--pattern` comparison as bars of communication per denoise step per op.
//! Drawn with plotters' SVG backend into a string (the caller writes it through output.rs).

use plotters::prelude::*;
use scen_core::perf::result::BenchReport;

const W: u32 = 900;
const H: u32 = 560;
const MIB: f64 = (1 << 20) as f64;

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("drawing the plot: {e}")
}

/// A log axis' tick in decimal units (its ticks fall on powers of ten): `100 kB`, `1 MB`.
fn si_bytes(x: f64) -> String {
    match x {
        x if x >= 1e9 => format!("{} GB", x / 1e9),
        x if x >= 1e6 => format!("{} MB", x / 1e6),
        x if x >= 1e3 => format!("{} kB", x / 1e3),
        x => format!("{x} B"),
    }
}

/// A line of the sweep plot: its label, dashed (a prediction) or not, and (bytes, busbw) points.
pub type Series = (String, bool, Vec<(f64, f64)>);

/// The lines of `reports` (named): measured busbw, and the prediction where there is one.
pub fn series(reports: &[(&BenchReport, String)]) -> Vec<Series> {
    let mut out = Vec::new();
    for (r, name) in reports {
        let mut ops: Vec<_> = r.rows.iter().map(|x| x.op).collect();
        ops.dedup();
        ops.sort();
        ops.dedup();
        for op in &ops {
            let label = if ops.len() == 1 {
                name.clone()
            } else {
                format!("{name} {op}")
            };
            let rows = r.rows.iter().filter(|x| x.op == *op);
            let pts = |f: fn(&scen_core::perf::result::BenchRow) -> Option<f64>| {
                rows.clone()
                    .filter_map(|x| f(x).map(|b| (x.size_bytes as f64, b)))
                    .filter(|(_, b)| *b > 0.0)
                    .collect::<Vec<_>>()
            };
            let hw = pts(|x| x.hw.map(|t| t.busbw_gbps));
            if !hw.is_empty() {
                out.push((label.clone(), false, hw));
            }
            let sim = pts(|x| x.sim.map(|t| t.busbw_gbps));
            if !sim.is_empty() {
                out.push((format!("{label} (model)"), true, sim));
            }
        }
    }
    out
}

/// The sweep plot of `reports` as an SVG document.
pub fn sweep_svg(reports: &[(&BenchReport, String)], title: &str) -> anyhow::Result<String> {
    let lines = series(reports);
    let all = lines.iter().flat_map(|l| l.2.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in all {
        (x0, x1, y0, y1) = (x0.min(*x), x1.max(*x), y0.min(*y), y1.max(*y));
    }
    if lines.is_empty() {
        anyhow::bail!("--plot: no measured or predicted bandwidth to draw");
    }
    let (x0, x1) = (x0 / 1.5, x1 * 1.5);
    let (y0, y1) = (y0 / 2.0, y1 * 2.0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("size (bytes, nccl-tests' convention)")
            .y_desc("bus bandwidth (GB/s)")
            .x_label_formatter(&|x| si_bytes(*x))
            .draw()
            .map_err(err)?;
        let shades = [
            (x0, MIB, RGBColor(230, 240, 255), "<1 MiB"),
            (MIB, 10.0 * MIB, RGBColor(235, 255, 235), "1-10 MiB"),
            (10.0 * MIB, x1, RGBColor(255, 240, 230), ">10 MiB"),
        ];
        for (a, b, c, label) in shades {
            let (a, b) = (a.max(x0), b.min(x1));
            if a >= b {
                continue;
            }
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(a, y0), (b, y1)],
                    c.mix(0.6).filled(),
                )))
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("bucket {label}"),
                    (a * 1.05, y1 / 1.3),
                    ("sans-serif", 12),
                )))
                .map_err(err)?;
        }
        for (i, (label, dashed, pts)) in lines.iter().enumerate() {
            let color = Palette99::pick(i / 2 * 2 + usize::from(*dashed)).to_rgba();
            let style = color.stroke_width(2);
            let drawn = if *dashed {
                chart.draw_series(DashedLineSeries::new(pts.iter().copied(), 6, 4, style))
            } else {
                chart.draw_series(LineSeries::new(pts.iter().copied(), style))
            };
            drawn
                .map_err(err)?
                .label(label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// A `--pattern` comparison: for each op, one bar per report of its milliseconds per denoise
/// step (time per call x calls per step).
pub fn pattern_svg(reports: &[(&BenchReport, String)], title: &str) -> anyhow::Result<String> {
    let Some(info) = reports.first().and_then(|r| r.0.pattern.clone()) else {
        anyhow::bail!("--plot: the reports carry no pattern");
    };
    let per_step = |r: &BenchReport, i: usize| {
        r.rows
            .get(i)
            .and_then(|x| x.time_us())
            .map_or(0.0, |t| t * info.per_step[i] as f64 / 1e3)
    };
    let n = info.per_step.len();
    let ymax = (0..n)
        .flat_map(|i| reports.iter().map(move |r| per_step(r.0, i)))
        .fold(0.0, f64::max)
        * 1.2;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..n as f64, 0.0..ymax.max(1e-3))
            .map_err(err)?;
        let short: Vec<String> = info
            .labels
            .iter()
            .zip(&info.per_step)
            .map(|(l, k)| {
                let words: Vec<&str> = l.split_whitespace().take(2).collect();
                format!("{} x{k}", words.join(" "))
            })
            .collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n * 2 + 1)
            .x_label_formatter(&|x| {
                let i = x.floor() as usize;
                if (x - x.floor() - 0.5).abs() < 0.01 && i < n {
                    short[i].clone()
                } else {
                    String::new()
                }
            })
            .y_desc(format!(
                "ms of communication per denoise step ({})",
                info.name
            ))
            .draw()
            .map_err(err)?;
        let k = reports.len().max(1) as f64;
        for (j, (r, name)) in reports.iter().enumerate() {
            let color = Palette99::pick(j * 2).to_rgba();
            let bars = (0..n).map(|i| {
                let x = i as f64 + 0.1 + 0.8 * j as f64 / k;
                Rectangle::new([(x, 0.0), (x + 0.8 / k, per_step(r, i))], color.filled())
            });
            chart
                .draw_series(bars)
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// What `--plot` draws for these reports: bars per op when they all timed the same pattern,
/// else the bandwidth sweep.
pub fn svg(reports: &[(&BenchReport, String)]) -> anyhow::Result<String> {
    let first = reports.first().and_then(|r| r.0.pattern.as_ref());
    let same = first.is_some()
        && reports.len() > 1
        && reports.iter().all(|r| r.0.pattern.as_ref() == first);
    let names: Vec<&str> = reports.iter().map(|r| r.1.as_str()).collect();
    if same {
        pattern_svg(reports, &format!("scen bench: {}", names.join(" vs ")))
    } else {
        sweep_svg(
            reports,
            &format!("scen bench: bus bandwidth, {}", names.join(" vs ")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scen_core::perf::result::{BenchRow, PatternInfo, Timing};
    use scen_core::perf::BenchOp;

    fn report(path: &str, times: &[(usize, f64)], sim: bool) -> BenchReport {
        let mut r = BenchReport::new(path, 2);
        r.rows = times
            .iter()
            .map(|(s, t)| {
                let tm = Timing::of(BenchOp::AllReduce, *s, 2, *t);
                BenchRow {
                    op: BenchOp::AllReduce,
                    size_bytes: *s,
                    count: s / 4,
                    dtype: "f32".into(),
                    redop: "sum".into(),
                    hw: Some(tm),
                    raw: None,
                    sim: sim.then_some(Timing {
                        time_us: t * 1.1,
                        ..tm
                    }),
                    hw_median_us: None,
                    wrong: Some(0),
                    hw_repeats_us: Vec::new(),
                }
            })
            .collect();
        r
    }

    fn parse(svg: &str) -> (usize, usize, Vec<String>) {
        let doc = roxmltree::Document::parse(svg).expect("well-formed SVG");
        let count = |name: &str| {
            doc.descendants()
                .filter(|n| n.tag_name().name() == name)
                .count()
        };
        let texts = doc
            .descendants()
            .filter(|n| n.tag_name().name() == "text")
            .filter_map(|n| n.text().map(|t| t.trim().to_string()))
            .collect();
        (count("polyline"), count("rect"), texts)
    }

    #[test]
    fn a_sweep_plot_has_log_axes_buckets_and_one_line_per_report() {
        let sizes = [(64 << 10, 100.0), (2 << 20, 900.0), (32 << 20, 9000.0)];
        let a = report("torch", &sizes, false);
        let b = report("oneccl", &sizes, true);
        let svg = svg(&[(&a, "torch.json".into()), (&b, "oneccl.json".into())]).unwrap();
        let (lines, _, texts) = parse(&svg);
        assert!(
            texts.iter().any(|t| t == "bus bandwidth (GB/s)"),
            "{texts:?}"
        );
        assert!(
            texts.iter().any(|t| t.starts_with("size (bytes")),
            "{texts:?}"
        );
        for want in [
            "torch.json",
            "oneccl.json",
            "oneccl.json (model)",
            "bucket <1 MiB",
            "bucket >10 MiB",
        ] {
            assert!(texts.iter().any(|t| t == want), "{want}: {texts:?}");
        }
        // Two measured lines; the dashed prediction is drawn as segments.
        assert!(lines >= 2, "{lines}");
        // Log x axis: decades as tick labels.
        for decade in ["100 kB", "1 MB", "10 MB"] {
            assert!(texts.iter().any(|t| t == decade), "{decade}: {texts:?}");
        }
    }

    #[test]
    fn a_pattern_plot_has_one_bar_per_op_and_report() {
        let info = PatternInfo {
            name: "wan-ulysses".into(),
            layers: 30,
            per_step: vec![30, 30],
            labels: vec!["all_to_all_4D qkv".into(), "all_to_all_4D out".into()],
        };
        let mut a = report(
            "torch",
            &[(48 << 20, 60_000.0), (16 << 20, 12_000.0)],
            false,
        );
        let mut b = report(
            "oneccl",
            &[(48 << 20, 50_000.0), (16 << 20, 20_000.0)],
            false,
        );
        a.pattern = Some(info.clone());
        b.pattern = Some(info);
        assert!(pattern_svg(&[], "t").is_err());
        let svg = svg(&[(&a, "torch".into()), (&b, "oneccl".into())]).unwrap();
        let (_, rects, texts) = parse(&svg);
        // background + 4 bars + legend box + 2 legend swatches at least
        assert!(rects >= 5, "{rects}");
        assert!(
            texts.iter().any(|t| t.contains("per denoise step")),
            "{texts:?}"
        );
        assert!(
            texts.iter().any(|t| t == "all_to_all_4D qkv x30"),
            "{texts:?}"
        );
    }
}
