//! `scen bench --plot FILE.svg`: bus bandwidth against size ([`sweep`]), or a `--pattern`
//! comparison as bars per op and per denoise step ([`pattern`]). Series are told apart by the
//! op's colour and the report's line style ([`style`]); the legend has its own panel beside the
//! chart ([`legend`]). Drawn with plotters' SVG backend into a string (the caller writes it
//! through output.rs).

pub mod legend;
pub mod pattern;
pub mod style;
pub mod sweep;

use scen_core::perf::result::BenchReport;

/// The chart's size in pixels; the legend panel is [`LEGEND_W`] more to its right.
const W: u32 = 900;
const H: u32 = 560;
const LEGEND_W: u32 = 340;

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("drawing the plot: {e}")
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
        pattern::svg(reports, &format!("scen bench: {}", names.join(" vs ")))
    } else {
        sweep::svg(
            reports,
            &format!("scen bench: bus bandwidth, {}", names.join(" vs ")),
        )
    }
}

#[cfg(test)]
mod tests;
