//! The bandwidth sweep plot: bus bandwidth against size on log axes, one series per report and
//! op (the op's colour, the report's line style and marker: style.rs), the notes' three size
//! buckets shaded, the legend in a panel beside the chart. A report's model prediction is drawn
//! only when its model was calibrated or given by name (`--model`): scen's built-in default is a
//! placeholder, not this machine. A report without measurements is a prediction; that is its
//! line.

use super::legend::{self, Swatch};
use super::style::{model_look, report_look, Dash, Look, Marker};
use super::{err, H, LEGEND_W, W};
use plotters::prelude::*;
use scen_core::perf::result::{BenchReport, BenchRow, ModelSource};
use scen_core::perf::BenchOp;

const MIB: f64 = (1 << 20) as f64;

/// One series: its label, how it is drawn, and its (bytes, busbw GB/s) points.
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub look: Look,
    pub points: Vec<(f64, f64)>,
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

/// The (bytes, busbw) points of `op`'s rows in `r` that `f` has a timing for.
fn points(r: &BenchReport, op: BenchOp, f: fn(&BenchRow) -> Option<f64>) -> Vec<(f64, f64)> {
    r.rows
        .iter()
        .filter(|x| x.op == op)
        .filter_map(|x| f(x).map(|b| (x.size_bytes as f64, b)))
        .filter(|(_, b)| *b > 0.0)
        .collect()
}

fn source_name(s: Option<ModelSource>) -> &'static str {
    match s {
        Some(ModelSource::Calibrated) => "calibrated",
        Some(ModelSource::File) => "--model",
        Some(ModelSource::Default) => "default",
        None => "unknown",
    }
}

/// The series of `reports` (named), report by report, op by op.
pub fn series(reports: &[(&BenchReport, String)]) -> Vec<Series> {
    let mut out = Vec::new();
    for (j, (r, name)) in reports.iter().enumerate() {
        let mut ops: Vec<BenchOp> = r.rows.iter().map(|x| x.op).collect();
        ops.sort();
        ops.dedup();
        let measured = r.rows.iter().any(|x| x.hw.is_some());
        let model_drawn = r.model_source.is_some_and(ModelSource::is_chosen);
        let model = source_name(r.model_source);
        for op in ops {
            let hw = points(r, op, |x| x.hw.map(|t| t.busbw_gbps));
            let sim = points(r, op, |x| x.sim.map(|t| t.busbw_gbps));
            if measured && !hw.is_empty() {
                let (label, look) = (format!("{name} {op}"), report_look(op, j));
                out.push(Series {
                    label,
                    look,
                    points: hw,
                });
            }
            if !measured && !sim.is_empty() {
                let label = format!("{name} {op} (predicted, {model} model)");
                let look = report_look(op, j);
                out.push(Series {
                    label,
                    look,
                    points: sim,
                });
            } else if model_drawn && !sim.is_empty() {
                let label = format!("{name} {op} ({model} model)");
                out.push(Series {
                    label,
                    look: model_look(op),
                    points: sim,
                });
            }
        }
    }
    out
}

/// The sweep plot of `reports` as an SVG document.
pub fn svg(reports: &[(&BenchReport, String)], title: &str) -> anyhow::Result<String> {
    let lines = series(reports);
    if lines.is_empty() {
        anyhow::bail!("--plot: no measured or predicted bandwidth to draw");
    }
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in lines.iter().flat_map(|l| l.points.iter()) {
        (x0, x1, y0, y1) = (x0.min(*x), x1.max(*x), y0.min(*y), y1.max(*y));
    }
    let (x0, x1) = (x0 / 1.5, x1 * 1.5);
    let (y0, y1) = (y0 / 2.0, y1 * 2.0);
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
        for s in &lines {
            draw_series(&mut chart, s)?;
        }
        let entries: Vec<(String, Swatch)> = lines
            .iter()
            .map(|s| (s.label.clone(), Swatch::Line(s.look)))
            .collect();
        legend::draw(&legend_area, &entries)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

type LogChart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<
        plotters::coord::combinators::LogCoord<f64>,
        plotters::coord::combinators::LogCoord<f64>,
    >,
>;

/// One series: its line in its dash pattern, then its markers.
fn draw_series(chart: &mut LogChart, s: &Series) -> anyhow::Result<()> {
    let look = s.look;
    let style = look.color.stroke_width(look.width);
    let pts = s.points.iter().copied();
    match look.dash {
        Dash::Solid => chart
            .draw_series(LineSeries::new(pts.clone(), style))
            .map(|_| ()),
        Dash::Dashed(on, off) => chart
            .draw_series(DashedLineSeries::new(pts.clone(), on, off, style))
            .map(|_| ()),
    }
    .map_err(err)?;
    let fill = look.color.filled();
    match look.marker {
        Marker::None => Ok(()),
        Marker::Circle => chart
            .draw_series(pts.map(|p| Circle::new(p, 4, fill)))
            .map(|_| ()),
        Marker::Triangle => chart
            .draw_series(pts.map(|p| TriangleMarker::new(p, 5, fill)))
            .map(|_| ()),
        Marker::Square => chart
            .draw_series(
                pts.map(|p| EmptyElement::at(p) + Rectangle::new([(-4, -4), (4, 4)], fill)),
            )
            .map(|_| ()),
    }
    .map_err(err)
}
