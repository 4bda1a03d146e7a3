//! The plots read back as SVG (roxmltree): every series of a picture is distinct, by colour (the
//! op) and by line style and marker (the report); the legend lies outside the data; the model's
//! line only for a chosen model; bars with the step total, error bars and path colours.

use super::style::{op_color, path_color};
use super::*;
use plotters::style::RGBColor;
use scen_core::perf::result::{BenchRow, ModelSource, PatternInfo, Timing};
use scen_core::perf::BenchOp;

fn row(op: BenchOp, size: usize, t_us: f64, sim: bool, repeats: &[f64]) -> BenchRow {
    let tm = Timing::of(op, size, 2, t_us);
    BenchRow {
        op,
        size_bytes: size,
        count: size / 4,
        dtype: "f32".into(),
        redop: "sum".into(),
        hw: Some(tm),
        raw: None,
        sim: sim.then_some(Timing::of(op, size, 2, t_us * 1.1)),
        hw_median_us: None,
        wrong: Some(0),
        hw_repeats_us: repeats.to_vec(),
    }
}

/// A measured report of `ops` over four sizes; `scale` makes one path slower.
fn report(path: &str, ops: &[BenchOp], scale: f64, sim: bool) -> BenchReport {
    let mut r = BenchReport::new(path, 2);
    for (k, op) in ops.iter().enumerate() {
        for (i, size) in [64usize << 10, 1 << 20, 8 << 20, 64 << 20]
            .iter()
            .enumerate()
        {
            let t = (20.0 + *size as f64 / 2e3) * scale * (1.0 + k as f64 * 0.3) + i as f64;
            r.rows.push(row(*op, *size, t, sim, &[]));
        }
    }
    r
}

fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// An element's attribute, upper-cased (colours).
fn attr(n: roxmltree::Node, name: &str) -> String {
    n.attribute(name).unwrap_or("").to_uppercase()
}

/// The x coordinates an element occupies (points, cx, x).
fn xs(n: roxmltree::Node) -> Vec<f64> {
    let mut out = Vec::new();
    for key in ["cx", "x"] {
        out.extend(n.attribute(key).and_then(|v| v.parse::<f64>().ok()));
    }
    if let Some(p) = n.attribute("points") {
        out.extend(
            p.split_whitespace()
                .filter_map(|xy| xy.split(',').next()?.parse::<f64>().ok()),
        );
    }
    out
}

fn texts(doc: &roxmltree::Document) -> Vec<(String, f64)> {
    doc.descendants()
        .filter(|n| n.tag_name().name() == "text")
        .filter_map(|n| {
            let x = n.attribute("x")?.parse().ok()?;
            Some((n.text()?.trim().to_string(), x))
        })
        .collect()
}

const OPS: [BenchOp; 3] = [BenchOp::AllReduce, BenchOp::AllGather, BenchOp::AllToAll];

#[test]
fn a_compare_of_two_paths_and_three_ops_draws_six_distinct_series() {
    let a = report("torch", &OPS, 2.0, false);
    let b = report("oneccl", &OPS, 1.0, false);
    let svg = svg(&[(&a, "torch.json".into()), (&b, "oneccl.json".into())]).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    let in_chart = |n: &roxmltree::Node| xs(*n).iter().all(|x| *x < W as f64);
    let mut seen = Vec::new();
    for op in OPS {
        let c = hex(op_color(op));
        // Path A: one solid polyline through its four sizes, and four circles.
        let lines: Vec<_> = doc
            .descendants()
            .filter(|n| n.tag_name().name() == "polyline" && attr(*n, "stroke") == c)
            .filter(in_chart)
            .collect();
        let solid = lines.iter().filter(|n| xs(**n).len() == 4).count();
        assert_eq!(solid, 1, "{op}: one solid line of 4 points: {lines:?}");
        // Path B: dashed, so drawn as many short segments of the same colour.
        assert!(lines.len() > 4, "{op}: dashed segments: {}", lines.len());
        let markers = |tag: &str| {
            doc.descendants()
                .filter(|n| n.tag_name().name() == tag && attr(*n, "fill") == c)
                .filter(in_chart)
                .count()
        };
        assert_eq!(markers("circle"), 4, "{op}: path A's circles");
        assert_eq!(markers("polygon"), 4, "{op}: path B's triangles");
        seen.push((c.clone(), "circle"));
        seen.push((c, "polygon"));
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 6, "six distinct (colour, marker) series");
    // The legend names every series, right of the chart: it covers no data.
    let t = texts(&doc);
    for name in ["torch.json", "oneccl.json"] {
        for op in OPS {
            let label = format!("{name} {op}");
            let x = t.iter().find(|(s, _)| *s == label).map(|p| p.1);
            assert!(x.is_some_and(|x| x > W as f64), "{label}: {t:?}");
        }
    }
}

#[test]
fn an_ops_colour_is_its_own_whatever_the_order() {
    let one = report("oneccl", &[BenchOp::AllToAll], 1.0, false);
    let three = report("oneccl", &OPS, 1.0, false);
    let red = hex(op_color(BenchOp::AllToAll));
    for r in [&one, &three] {
        let s = svg(&[(r, "x".into())]).unwrap();
        let doc = roxmltree::Document::parse(&s).unwrap();
        let circles: Vec<String> = doc
            .descendants()
            .filter(|n| n.tag_name().name() == "circle")
            .map(|n| attr(n, "fill"))
            .collect();
        assert!(circles.contains(&red), "{circles:?}");
    }
    let colours: Vec<RGBColor> = BenchOp::ALL.iter().map(|o| op_color(*o)).collect();
    for (i, c) in colours.iter().enumerate() {
        assert!(!colours[..i].contains(c), "two ops share {c:?}");
    }
}

#[test]
fn the_model_line_is_drawn_only_for_a_calibrated_or_named_model() {
    let mut r = report("oneccl", &[BenchOp::AllReduce], 1.0, true);
    let labels = |r: &BenchReport| -> Vec<String> {
        let s = svg(&[(r, "hw".into())]).unwrap();
        let doc = roxmltree::Document::parse(&s).unwrap();
        texts(&doc).into_iter().map(|t| t.0).collect()
    };
    r.model_source = Some(ModelSource::Default);
    assert!(
        !labels(&r).iter().any(|t| t.contains("model")),
        "{:?}",
        labels(&r)
    );
    r.model_source = None;
    assert!(!labels(&r).iter().any(|t| t.contains("model")));
    r.model_source = Some(ModelSource::Calibrated);
    let l = labels(&r);
    assert!(
        l.iter().any(|t| t == "hw all_reduce (calibrated model)"),
        "{l:?}"
    );
    // A prediction alone (no --hw) is the run itself: drawn, and said to be the default.
    let mut p = r.clone();
    for x in &mut p.rows {
        x.hw = None;
    }
    p.model_source = Some(ModelSource::Default);
    let l = labels(&p);
    assert!(
        l.iter()
            .any(|t| t == "hw all_reduce (predicted, default model)"),
        "{l:?}"
    );
}

#[test]
fn a_sweep_plot_has_log_axes_and_buckets() {
    let a = report("torch", &[BenchOp::AllReduce], 1.0, false);
    let s = svg(&[(&a, "torch.json".into())]).unwrap();
    let doc = roxmltree::Document::parse(&s).unwrap();
    let t: Vec<String> = texts(&doc).into_iter().map(|t| t.0).collect();
    for want in [
        "bus bandwidth (GB/s)",
        "bucket <1 MiB",
        "bucket >10 MiB",
        "100 kB",
        "1 MB",
        "10 MB",
    ] {
        assert!(t.iter().any(|x| x == want), "{want}: {t:?}");
    }
}

fn pattern_pair(first: &str, second: &str) -> (BenchReport, BenchReport) {
    let info = PatternInfo {
        name: "wan-ulysses".into(),
        layers: 30,
        per_step: vec![30, 30],
        labels: vec!["all_to_all_4D qkv".into(), "all_to_all_4D out".into()],
    };
    let mk = |path: &str, t: f64| {
        let mut r = BenchReport::new(path, 2);
        r.rows = vec![
            row(
                BenchOp::AllToAll,
                48 << 20,
                t,
                false,
                &[t * 0.9, t, t * 1.2],
            ),
            row(
                BenchOp::AllToAll,
                16 << 20,
                t / 3.0,
                false,
                &[t / 3.3, t / 3.0, t / 2.8],
            ),
        ];
        r.pattern = Some(info.clone());
        r
    };
    (mk(first, 60_000.0), mk(second, 40_000.0))
}

#[test]
fn a_pattern_plot_has_the_step_total_error_bars_and_path_colours() {
    let (a, b) = pattern_pair("torch", "oneccl");
    assert!(pattern::svg(&[], "t").is_err());
    let bars = pattern::bars(&[(&a, "a".into())], a.pattern.as_ref().unwrap());
    // Two ops and the total; the total's band sums repeat k of each op.
    assert_eq!(bars[0].len(), 3);
    let total = bars[0][2];
    assert!((total.ms - (bars[0][0].ms + bars[0][1].ms)).abs() < 1e-9);
    let (lo, hi) = total.band.unwrap();
    assert!(lo < total.ms && total.ms < hi, "{lo} {} {hi}", total.ms);
    let fills = |x: &BenchReport, y: &BenchReport| {
        let s = svg(&[(x, x.path.clone()), (y, y.path.clone())]).unwrap();
        let doc = roxmltree::Document::parse(&s).unwrap();
        let t: Vec<String> = texts(&doc).into_iter().map(|t| t.0).collect();
        assert!(t.iter().any(|x| x == "step total"), "{t:?}");
        assert!(t.iter().any(|x| x.starts_with("error bars")), "{t:?}");
        let rects: Vec<String> = doc
            .descendants()
            .filter(|n| n.tag_name().name() == "rect")
            .map(|n| attr(n, "fill"))
            .collect();
        rects
    };
    // The torch bars are torch's colour whether torch comes first or second.
    let torch = hex(path_color("torch"));
    let oneccl = hex(path_color("oneccl"));
    for r in [fills(&a, &b), fills(&b, &a)] {
        assert!(r.iter().filter(|f| **f == torch).count() >= 3, "{r:?}");
        assert!(r.iter().filter(|f| **f == oneccl).count() >= 3, "{r:?}");
    }
}
