//! The legend of a plot, drawn in its own panel right of the chart so that it never covers data:
//! a sample of each series (line style and marker, or a bar's swatch) and its label.

use super::style::{Dash, Look, Marker};
use plotters::coord::Shift;
use plotters::prelude::*;

/// One legend entry's sample.
pub enum Swatch {
    Line(Look),
    Bar(RGBColor),
    /// A line of text only (a note under the entries).
    Note,
}

const ROW_PX: i32 = 20;

/// Draws `entries` top-down in `area` (the panel beside the chart).
pub fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[(String, Swatch)],
) -> anyhow::Result<()> {
    let e = super::err;
    for (i, (label, swatch)) in entries.iter().enumerate() {
        let y = 50 + i as i32 * ROW_PX;
        let text_x = match swatch {
            Swatch::Line(look) => {
                sample_line(area, *look, y)?;
                52
            }
            Swatch::Bar(c) => {
                area.draw(&Rectangle::new([(8, y - 6), (40, y + 6)], c.filled()))
                    .map_err(e)?;
                52
            }
            Swatch::Note => 8,
        };
        area.draw(&Text::new(
            label.clone(),
            (text_x, y - 7),
            ("sans-serif", 13).into_font(),
        ))
        .map_err(e)?;
    }
    Ok(())
}

/// A 36-pixel sample of a line at height `y`, its marker in the middle.
fn sample_line<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    look: Look,
    y: i32,
) -> anyhow::Result<()> {
    let e = super::err;
    let style = look.color.stroke_width(look.width);
    let (x0, x1) = (6, 42);
    match look.dash {
        Dash::Solid => area
            .draw(&PathElement::new(vec![(x0, y), (x1, y)], style))
            .map_err(e)?,
        Dash::Dashed(on, off) => {
            let mut x = x0;
            while x < x1 {
                let end = (x + on as i32).min(x1);
                area.draw(&PathElement::new(vec![(x, y), (end, y)], style))
                    .map_err(e)?;
                x = end + off as i32;
            }
        }
    }
    marker_at(area, look, (24, y))
}

/// The look's marker at pixel `p` of `area`.
fn marker_at<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    look: Look,
    p: (i32, i32),
) -> anyhow::Result<()> {
    let e = super::err;
    let fill = look.color.filled();
    match look.marker {
        Marker::None => {}
        Marker::Circle => area.draw(&Circle::new(p, 4, fill)).map_err(e)?,
        Marker::Triangle => area.draw(&TriangleMarker::new(p, 5, fill)).map_err(e)?,
        Marker::Square => area
            .draw(&Rectangle::new(
                [(p.0 - 4, p.1 - 4), (p.0 + 4, p.1 + 4)],
                fill,
            ))
            .map_err(e)?,
    }
    Ok(())
}
