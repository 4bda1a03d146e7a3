//! How a plot tells its series apart: one colour per op, fixed by the op itself (the same op is
//! the same colour in every picture, whatever the command's order), and one line style and
//! marker per report (A solid with circles, B dashed with triangles, C dotted with squares);
//! the model's prediction thin, in long dashes, without markers. Bars take a colour from their
//! path's name (oneccl, torch, gloo, sim), not from their place on the command line.

use plotters::prelude::*;
use scen_core::perf::BenchOp;

/// The op's colour (Tableau 10, distinct for the six ops and readable on white).
pub fn op_color(op: BenchOp) -> RGBColor {
    match op {
        BenchOp::AllReduce => RGBColor(31, 119, 180),
        BenchOp::AllGather => RGBColor(255, 127, 14),
        BenchOp::ReduceScatter => RGBColor(44, 160, 44),
        BenchOp::AllToAll => RGBColor(214, 39, 40),
        BenchOp::Broadcast => RGBColor(148, 103, 189),
        BenchOp::Reduce => RGBColor(140, 86, 75),
    }
}

/// A path's bar colour, from its name; an unknown name gets grey-violet.
pub fn path_color(path: &str) -> RGBColor {
    match path {
        "oneccl" => RGBColor(31, 119, 180),
        "torch" => RGBColor(255, 127, 14),
        "gloo" => RGBColor(44, 160, 44),
        "sim" => RGBColor(127, 127, 127),
        _ => RGBColor(148, 103, 189),
    }
}

/// `c` halfway to white: the second report of the same path in one bar chart.
pub fn lighten(c: RGBColor) -> RGBColor {
    let half = |x: u8| x / 2 + 128;
    RGBColor(half(c.0), half(c.1), half(c.2))
}

/// A line's dash pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dash {
    Solid,
    /// Dash and gap, pixels.
    Dashed(u32, u32),
}

/// A point marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    None,
    Circle,
    Triangle,
    Square,
}

/// How one series is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Look {
    pub color: RGBColor,
    pub dash: Dash,
    pub marker: Marker,
    pub width: u32,
}

/// The look of report `index`'s measured (or, without measurements, predicted) line of `op`.
pub fn report_look(op: BenchOp, index: usize) -> Look {
    let (dash, marker) = match index % 3 {
        0 => (Dash::Solid, Marker::Circle),
        1 => (Dash::Dashed(9, 5), Marker::Triangle),
        _ => (Dash::Dashed(2, 4), Marker::Square),
    };
    Look {
        color: op_color(op),
        dash,
        marker,
        width: 2,
    }
}

/// The look of a model's prediction beside measurements: the op's colour, thin, long
/// dashes with wide gaps, no markers.
pub fn model_look(op: BenchOp) -> Look {
    Look {
        color: op_color(op),
        dash: Dash::Dashed(14, 6),
        marker: Marker::None,
        width: 1,
    }
}
