//! A `--pattern` comparison as bars: for each op, and for the whole denoise step, one bar per
//! report of its milliseconds per step (time per call x calls per step), each report in its
//! path's colour, with the min-max band of `--repeat`'s sweeps as an error bar where measured.

use super::legend::{self, Swatch};
use super::style::{lighten, path_color};
use super::{err, H, LEGEND_W, W};
use plotters::prelude::*;
use scen_core::perf::result::{BenchReport, PatternInfo};

/// One bar: the value, and the band of the repeats when there is one (ms per step).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bar {
    pub ms: f64,
    pub band: Option<(f64, f64)>,
}

/// Row `i`'s bar: its time per call times its calls per step.
fn op_bar(r: &BenchReport, info: &PatternInfo, i: usize) -> Bar {
    let k = info.per_step[i] as f64 / 1e3;
    let row = r.rows.get(i);
    let ms = row.and_then(|x| x.time_us()).map_or(0.0, |t| t * k);
    let band = row.filter(|x| x.hw_repeats_us.len() > 1).map(|x| {
        let lo = x.hw_repeats_us.iter().copied().fold(f64::MAX, f64::min);
        let hi = x.hw_repeats_us.iter().copied().fold(f64::MIN, f64::max);
        (lo * k, hi * k)
    });
    Bar { ms, band }
}

/// The step total: the sum of the ops' bars; its band over repeats, repeat k of every op
/// summed (the sweeps ran the ops together), when every row has the same repeats.
fn total_bar(r: &BenchReport, info: &PatternInfo) -> Bar {
    let n = info.per_step.len();
    let ms = (0..n).map(|i| op_bar(r, info, i).ms).sum();
    let reps = r.rows.first().map_or(0, |x| x.hw_repeats_us.len());
    let aligned = reps > 1 && r.rows.iter().take(n).all(|x| x.hw_repeats_us.len() == reps);
    let band = aligned.then(|| {
        let sums: Vec<f64> = (0..reps)
            .map(|k| {
                (0..n)
                    .map(|i| r.rows[i].hw_repeats_us[k] * info.per_step[i] as f64 / 1e3)
                    .sum()
            })
            .collect();
        let lo = sums.iter().copied().fold(f64::MAX, f64::min);
        let hi = sums.iter().copied().fold(f64::MIN, f64::max);
        (lo, hi)
    });
    Bar { ms, band }
}

/// Each report's bars: one per op, then the step total.
pub fn bars(reports: &[(&BenchReport, String)], info: &PatternInfo) -> Vec<Vec<Bar>> {
    reports
        .iter()
        .map(|(r, _)| {
            let mut b: Vec<Bar> = (0..info.per_step.len())
                .map(|i| op_bar(r, info, i))
                .collect();
            b.push(total_bar(r, info));
            b
        })
        .collect()
}

/// Each report's colour: its path's, lighter for a later report of the same path.
pub fn colors(reports: &[(&BenchReport, String)]) -> Vec<RGBColor> {
    reports
        .iter()
        .enumerate()
        .map(|(j, (r, _))| {
            let c = path_color(&r.path);
            let earlier = reports[..j]
                .iter()
                .filter(|(o, _)| o.path == r.path)
                .count();
            (0..earlier).fold(c, |c, _| lighten(c))
        })
        .collect()
}

/// The group labels: each op's first two words and calls per step, then the total.
fn group_labels(info: &PatternInfo) -> Vec<String> {
    let mut out: Vec<String> = info
        .labels
        .iter()
        .zip(&info.per_step)
        .map(|(l, k)| {
            let words: Vec<&str> = l.split_whitespace().take(2).collect();
            format!("{} x{k}", words.join(" "))
        })
        .collect();
    out.push("step total".into());
    out
}

/// The bar chart of `reports` (all of one pattern) as an SVG document.
pub fn svg(reports: &[(&BenchReport, String)], title: &str) -> anyhow::Result<String> {
    let Some(info) = reports.first().and_then(|r| r.0.pattern.clone()) else {
        anyhow::bail!("--plot: the reports carry no pattern");
    };
    let all = bars(reports, &info);
    let cols = colors(reports);
    let labels = group_labels(&info);
    let n = labels.len();
    let ymax = all
        .iter()
        .flatten()
        .map(|b| b.band.map_or(b.ms, |(_, hi)| hi.max(b.ms)))
        .fold(0.0, f64::max)
        * 1.15;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (W + LEGEND_W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot_area, legend_area) = root.split_horizontally(W);
        let mut chart = ChartBuilder::on(&plot_area)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..n as f64, 0.0..ymax.max(1e-3))
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n * 2 + 1)
            .x_label_formatter(&|x| {
                let i = x.floor() as usize;
                if (x - x.floor() - 0.5).abs() < 0.01 && i < n {
                    labels[i].clone()
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
        for (j, report_bars) in all.iter().enumerate() {
            let color = cols[j];
            let x_of = |i: usize| i as f64 + 0.1 + 0.8 * j as f64 / k;
            let rects = report_bars.iter().enumerate().map(|(i, b)| {
                Rectangle::new([(x_of(i), 0.0), (x_of(i) + 0.8 / k, b.ms)], color.filled())
            });
            chart.draw_series(rects).map_err(err)?;
            let whiskers = report_bars.iter().enumerate().filter_map(|(i, b)| {
                let (lo, hi) = b.band?;
                let mid = x_of(i) + 0.4 / k;
                let cap = 0.1 / k;
                Some(PathElement::new(
                    vec![
                        (mid - cap, lo),
                        (mid + cap, lo),
                        (mid, lo),
                        (mid, hi),
                        (mid - cap, hi),
                        (mid + cap, hi),
                    ],
                    BLACK.stroke_width(1),
                ))
            });
            chart.draw_series(whiskers).map_err(err)?;
        }
        let mut entries: Vec<(String, Swatch)> = reports
            .iter()
            .zip(&cols)
            .map(|((_, name), c)| (name.clone(), Swatch::Bar(*c)))
            .collect();
        if all.iter().flatten().any(|b| b.band.is_some()) {
            entries.push((
                "error bars: min-max of --repeat's sweeps".into(),
                Swatch::Note,
            ));
        }
        legend::draw(&legend_area, &entries)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}
