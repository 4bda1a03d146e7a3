//! Choosing a per-op cost's form by how well it predicts sizes it did not see. One (op,
//! algorithm, ranks) group's times are fitted by a continuous piecewise-linear function of the
//! schedule's bytes: a line, or a line whose slope changes at one or two measured sizes
//! ("knees"; two knees at neighbouring sizes make a ramp across a protocol switch between them).
//! A form with a knee fits the calibration sweep at least as well as the line, so the fit
//! cannot choose by its in-sample error: each form is scored by leave-one-size-out (every
//! interior size predicted by the form fitted to the other sizes), and the held-out error of
//! the whole procedure (selection included) is what the calibration reports.

use super::median;
use super::model::rel_error;

/// One measured size of a group: the busiest member's messages and wire bytes (perf/schedule.rs)
/// and the measured time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub bytes: usize,
    pub messages: f64,
    pub wire_bytes: f64,
    pub time_us: f64,
}

/// Where the slope changes: at a measured size (its bytes and its schedule's wire bytes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KneeAt {
    pub bytes: usize,
    pub wire_bytes: f64,
}

/// A fitted form: `alpha_us` per message, and per segment (below the first knee, then above
/// each knee) microseconds per wire byte.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    pub alpha_us: f64,
    pub us_per_byte: Vec<f64>,
    pub knees: Vec<KneeAt>,
}

impl Fitted {
    /// Predicted microseconds of `messages` messages of `wire_bytes` in all.
    pub fn predict_us(&self, messages: f64, wire_bytes: f64) -> f64 {
        let mut t = self.alpha_us * messages + self.us_per_byte[0] * wire_bytes;
        for (k, w) in self.knees.iter().zip(self.us_per_byte.windows(2)) {
            t += (w[1] - w[0]) * (wire_bytes - k.wire_bytes).max(0.0);
        }
        t
    }
}

/// Least squares `t ≈ Σ coef_i x_i` on relative error (weights 1/t²); `None` when singular.
pub fn least_squares(rows: &[(Vec<f64>, f64)], k: usize) -> Option<Vec<f64>> {
    weighted_least_squares(rows, k, &vec![1.0; rows.len()])
}

/// [`least_squares`] with each row's weight also multiplied by `extra[row]`.
// Index loops read as the normal equations and the elimination they are.
#[allow(clippy::needless_range_loop)]
fn weighted_least_squares(rows: &[(Vec<f64>, f64)], k: usize, extra: &[f64]) -> Option<Vec<f64>> {
    let mut a = vec![vec![0.0f64; k]; k];
    let mut b = vec![0.0f64; k];
    for ((x, t), e) in rows.iter().zip(extra).filter(|((_, t), _)| *t > 0.0) {
        let w = e / (t * t);
        for i in 0..k {
            b[i] += w * x[i] * t;
            for j in 0..k {
                a[i][j] += w * x[i] * x[j];
            }
        }
    }
    // Gauss-Jordan elimination with partial pivoting, scaled by each column's size.
    let scale: Vec<f64> = (0..k).map(|i| a[i][i].abs().sqrt().max(1e-300)).collect();
    for i in 0..k {
        for j in 0..k {
            a[i][j] /= scale[i] * scale[j];
        }
        b[i] /= scale[i];
    }
    for col in 0..k {
        let piv = (col..k).max_by(|&p, &q| a[p][col].abs().total_cmp(&a[q][col].abs()))?;
        if a[piv][col].abs() < 1e-9 {
            return None;
        }
        a.swap(col, piv);
        b.swap(col, piv);
        for r in 0..k {
            if r != col {
                let f = a[r][col] / a[col][col];
                for c in col..k {
                    a[r][c] -= f * a[col][c];
                }
                b[r] -= f * b[col];
            }
        }
    }
    Some((0..k).map(|i| b[i] / a[i][i] / scale[i]).collect())
}

/// Tukey's bisquare: a point whose relative residual is this many robust scales (1.4826 × the
/// median absolute residual) off gets no weight; nearer ones less the farther they are.
const BISQUARE_C: f64 = 4.685;
/// Below this relative scale (2%) nothing is down-weighted: a tight fit is left alone.
const MIN_SCALE: f64 = 0.02;
const ROBUST_ROUNDS: usize = 10;

/// [`least_squares`] made robust to a size the machine's load spoiled (a call that waited for a
/// descheduled peer: 3x its neighbours on this VM) by iteratively reweighting with Tukey's
/// bisquare on the relative residuals. With fewer than 3 points beyond the unknowns there is no
/// telling an outlier from the shape: plain least squares.
fn robust_least_squares(rows: &[(Vec<f64>, f64)], k: usize) -> Option<Vec<f64>> {
    let mut coef = least_squares(rows, k)?;
    if rows.len() < k + 3 {
        return Some(coef);
    }
    for _ in 0..ROBUST_ROUNDS {
        let r: Vec<f64> = rows
            .iter()
            .map(|(x, t)| (x.iter().zip(&coef).map(|(a, c)| a * c).sum::<f64>() - t) / t)
            .collect();
        let scale = (1.4826 * median(r.iter().map(|e| e.abs()).collect())).max(MIN_SCALE);
        let w: Vec<f64> = r
            .iter()
            .map(|e| (1.0 - (e / (BISQUARE_C * scale)).powi(2)).max(0.0).powi(2))
            .collect();
        if w.iter().filter(|w| **w > 0.0).count() < k + 1 {
            break;
        }
        let Some(next) = weighted_least_squares(rows, k, &w) else {
            break;
        };
        let moved = next
            .iter()
            .zip(&coef)
            .any(|(n, c)| (n - c).abs() > 1e-9 * c.abs().max(1e-12));
        coef = next;
        if !moved {
            break;
        }
    }
    Some(coef)
}

/// A line needs two points; a form with knees a point at or below the first knee, one above the
/// last, and more points than unknowns (a fit, not an interpolation through given points).
fn supported(pts: &[Point], knees: &[KneeAt]) -> bool {
    let (Some(first), Some(last)) = (knees.first(), knees.last()) else {
        return pts.len() >= 2;
    };
    if pts.len() < knees.len() + 3 {
        return false;
    }
    pts.iter().any(|p| p.bytes <= first.bytes) && pts.iter().any(|p| p.bytes > last.bytes)
}

/// The design row of a point: messages, wire bytes, and the wire bytes beyond each knee.
fn row(p: &Point, knees: &[KneeAt], with_alpha: bool) -> Vec<f64> {
    let mut x = Vec::with_capacity(knees.len() + 2);
    if with_alpha {
        x.push(p.messages);
    }
    x.push(p.wire_bytes);
    x.extend(knees.iter().map(|k| (p.wire_bytes - k.wire_bytes).max(0.0)));
    x
}

/// Fits the form with `knees` to `pts` (robustly, [`robust_least_squares`]): alpha >= 0 (refitted without it when it comes out
/// negative) and every segment's slope > 0. `None` when the points do not support the form or
/// no such fit exists.
pub fn fit(pts: &[Point], knees: &[KneeAt]) -> Option<Fitted> {
    if !supported(pts, knees) {
        return None;
    }
    let solve = |with_alpha: bool| {
        let rows: Vec<(Vec<f64>, f64)> = pts
            .iter()
            .map(|p| (row(p, knees, with_alpha), p.time_us))
            .collect();
        let mut coef = robust_least_squares(&rows, knees.len() + 1 + usize::from(with_alpha))?;
        let alpha_us = if with_alpha { coef.remove(0) } else { 0.0 };
        let us_per_byte: Vec<f64> = coef
            .iter()
            .scan(0.0, |c, d| {
                *c += d;
                Some(*c)
            })
            .collect();
        Some(Fitted {
            alpha_us,
            us_per_byte,
            knees: knees.to_vec(),
        })
    };
    let f = solve(true)
        .filter(|f| f.alpha_us >= 0.0)
        .or_else(|| solve(false))?;
    f.us_per_byte.iter().all(|c| *c > 0.0).then_some(f)
}

/// The signed relative error of predicting `pts[i]` from a fit of `knees` to the other points.
fn held_out_error(pts: &[Point], i: usize, knees: &[KneeAt]) -> Option<f64> {
    let rest: Vec<Point> = pts
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != i)
        .map(|(_, p)| *p)
        .collect();
    let f = fit(&rest, knees)?;
    let p = pts[i];
    Some(rel_error(f.predict_us(p.messages, p.wire_bytes), p.time_us))
}

/// The mean absolute held-out error of every interior size (the smallest and largest are not
/// held out: predicting them would be extrapolating); mean absolute, not root mean square, so
/// that one spoiled size does not decide the form. `None` if a fold cannot be fitted.
pub fn loo_error(pts: &[Point], knees: &[KneeAt]) -> Option<f64> {
    let interior = 1..pts.len().saturating_sub(1);
    if interior.is_empty() {
        return fit(pts, knees).map(|_| 0.0);
    }
    let n = interior.len() as f64;
    let mut sum = 0.0;
    for i in interior {
        sum += held_out_error(pts, i, knees)?.abs();
    }
    Some(sum / n)
}

/// A form with more knees is chosen only when it cuts the held-out error by this fraction and
/// by [`MIN_GAIN`] at least: an extra knee must earn its place against the noise.
pub const REL_GAIN: f64 = 0.10;
pub const MIN_GAIN: f64 = 0.005;

/// Up to this many knees per group.
pub const MAX_KNEES: usize = 2;

/// Where a knee may sit: every interior size and the geometric middle (in whole KiB) between
/// neighbouring sizes (a knee between two measured sizes is where the lines fitted on either side meet; with
/// candidates at the sizes alone, a held-out knee size could only be bridged by a ramp).
fn knee_sites(pts: &[Point]) -> Vec<KneeAt> {
    let mut at = Vec::new();
    for (i, w) in pts.windows(2).enumerate() {
        if i > 0 {
            at.push(KneeAt {
                bytes: w[0].bytes,
                wire_bytes: w[0].wire_bytes,
            });
        }
        let mid = ((w[0].bytes as f64) * (w[1].bytes as f64)).sqrt();
        // Whole KiB where the sizes are that large (a knee at 362K reads better than 370728).
        let unit = if w[0].bytes >= 1024 { 1024.0 } else { 1.0 };
        let mid = ((mid / unit).round() * unit) as usize;
        if mid > w[0].bytes && mid < w[1].bytes {
            let f = (mid - w[0].bytes) as f64 / (w[1].bytes - w[0].bytes) as f64;
            at.push(KneeAt {
                bytes: mid,
                wire_bytes: w[0].wire_bytes + f * (w[1].wire_bytes - w[0].wire_bytes),
            });
        }
    }
    at
}

/// The candidate knee sets with `n` knees.
fn candidates(pts: &[Point], n: usize) -> Vec<Vec<KneeAt>> {
    let at = knee_sites(pts);
    match n {
        0 => vec![Vec::new()],
        1 => at.iter().map(|k| vec![*k]).collect(),
        _ => (0..at.len())
            .flat_map(|i| (i + 1..at.len()).map(move |j| (i, j)))
            .map(|(i, j)| vec![at[i], at[j]])
            .collect(),
    }
}

/// The chosen form and its mean held-out (leave-one-size-out) error, with the best score of each
/// knee count for the notes.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub knees: Vec<KneeAt>,
    pub error: f64,
    /// Per knee count (0, 1, 2): the best mean held-out error, where some form of it fits.
    pub by_knees: Vec<Option<f64>>,
}

/// Chooses the form of `pts` (sorted by size, one point per size) by held-out error; `None`
/// when not even a line fits.
pub fn choose(pts: &[Point]) -> Option<Choice> {
    let mut chosen: Option<(Vec<KneeAt>, f64)> = None;
    let mut by_knees = Vec::new();
    for n in 0..=MAX_KNEES {
        let best = candidates(pts, n)
            .into_iter()
            .filter_map(|k| loo_error(pts, &k).map(|s| (k, s)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        by_knees.push(best.as_ref().map(|b| b.1));
        let Some((k, s)) = best else { continue };
        let better = match &chosen {
            None => true,
            Some((_, old)) => s < old * (1.0 - REL_GAIN) && old - s > MIN_GAIN,
        };
        if better {
            chosen = Some((k, s));
        }
    }
    let (knees, error) = chosen?;
    Some(Choice {
        knees,
        error,
        by_knees,
    })
}

/// How well the whole procedure (choose, then fit) predicts sizes it did not see: for each
/// interior size, the signed relative error of the form chosen and fitted without it.
pub fn procedure_errors(pts: &[Point]) -> Vec<(usize, f64)> {
    (1..pts.len().saturating_sub(1))
        .filter_map(|i| {
            let rest: Vec<Point> = pts
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, p)| *p)
                .collect();
            let c = choose(&rest)?;
            let f = fit(&rest, &c.knees)?;
            let p = pts[i];
            Some((
                p.bytes,
                rel_error(f.predict_us(p.messages, p.wire_bytes), p.time_us),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One message per call; the time of `us(bytes)` at sizes 64 KiB .. 64 MiB doubling.
    fn points(us: impl Fn(f64) -> f64) -> Vec<Point> {
        (16..=26)
            .map(|k| {
                let bytes = 1usize << k;
                Point {
                    bytes,
                    messages: 1.0,
                    wire_bytes: bytes as f64,
                    time_us: us(bytes as f64),
                }
            })
            .collect()
    }

    /// 50 us + 1 GB/s up to 2 MiB, 0.25 GB/s above: continuous, a kink at 2 MiB.
    fn kinked(b: f64) -> f64 {
        let knee = (2u64 << 20) as f64;
        50.0 + b / 1e3 + (b - knee).max(0.0) * (4.0 - 1.0) / 1e3
    }

    #[test]
    fn a_fit_is_continuous_at_its_knees() {
        let pts = points(kinked);
        let knee = KneeAt {
            bytes: 2 << 20,
            wire_bytes: (2u64 << 20) as f64,
        };
        let f = fit(&pts, &[knee]).expect("fit");
        let at = knee.wire_bytes;
        let (below, above) = (f.predict_us(1.0, at - 1e-3), f.predict_us(1.0, at + 1e-3));
        assert!((below - above).abs() < 1e-5, "{below} {above}");
        // Two knees at neighbouring sizes: a ramp, continuous at both ends.
        let two = [
            knee,
            KneeAt {
                bytes: 4 << 20,
                wire_bytes: (4u64 << 20) as f64,
            },
        ];
        let f = fit(&pts, &two).expect("fit");
        for k in two {
            let d = f.predict_us(1.0, k.wire_bytes + 1e-3) - f.predict_us(1.0, k.wire_bytes - 1e-3);
            assert!(d.abs() < 1e-4, "{d}");
        }
    }

    #[test]
    fn a_two_regime_dataset_is_recovered() {
        let c = choose(&points(kinked)).expect("choice");
        assert_eq!(c.knees.len(), 1, "{c:?}");
        assert_eq!(c.knees[0].bytes, 2 << 20);
        assert!(c.error < 1e-9, "{c:?}");
        let f = fit(&points(kinked), &c.knees).unwrap();
        assert!((f.alpha_us - 50.0).abs() < 1e-6, "{f:?}");
        assert!((f.us_per_byte[0] - 1e-3).abs() < 1e-12, "{f:?}");
        assert!((f.us_per_byte[1] - 4e-3).abs() < 1e-12, "{f:?}");
        // The whole procedure predicts every held-out size, the knee's own too: without it, the
        // lines on either side meet at the geometric middle of its neighbours, where it was.
        let errs = procedure_errors(&points(kinked));
        assert_eq!(errs.len(), 9);
        assert!(errs.iter().all(|e| e.1.abs() < 1e-9), "{errs:?}");
    }

    #[test]
    fn held_out_error_picks_the_knee_for_a_kink_and_the_line_without() {
        // A straight line, with ±3% noise alternating: a knee would only fit the noise.
        let noise = |i: usize| if i.is_multiple_of(2) { 1.03 } else { 0.97 };
        let mut line = points(|b| 80.0 + b / 2e3);
        for (i, p) in line.iter_mut().enumerate() {
            p.time_us *= noise(i);
        }
        let c = choose(&line).expect("choice");
        assert!(c.knees.is_empty(), "{c:?}");
        // The same noise on the kinked data: the knee wins by far.
        let mut kink = points(kinked);
        for (i, p) in kink.iter_mut().enumerate() {
            p.time_us *= noise(i);
        }
        let c = choose(&kink).expect("choice");
        assert!(!c.knees.is_empty(), "{c:?}");
        assert!(c.error < c.by_knees[0].unwrap() / 2.0, "{c:?}");
        // A jump between two sizes (fast up to 1 MiB, 10x slower per byte from 2 MiB on): two
        // knees between the neighbouring sizes, a ramp across the switch (where in between, the
        // sweep cannot tell).
        let jump = points(|b| {
            if b <= (1u64 << 20) as f64 {
                30.0 + b / 3e3
            } else {
                b / 3e2
            }
        });
        let c = choose(&jump).expect("choice");
        assert_eq!(c.knees.len(), 2, "{c:?}");
        assert!(
            c.knees
                .iter()
                .all(|k| (1 << 20..=2 << 20).contains(&k.bytes)),
            "{c:?}"
        );
        assert!(c.error < 1e-9, "{c:?}");
    }

    #[test]
    fn a_size_the_load_spoiled_does_not_bend_the_fit() {
        // 80 us + 0.5 GB/s, one size (4 MiB) measured 3x slow, the others within ±2%.
        let mut pts = points(|b| 80.0 + b / 5e2);
        for (i, p) in pts.iter_mut().enumerate() {
            p.time_us *= [1.02, 0.98, 1.0][i % 3];
        }
        pts[6].time_us *= 3.0;
        let f = fit(&pts, &[]).expect("fit");
        // (Plain least squares: alpha 75.6 us, slope 2.6% off.)
        assert!((f.alpha_us - 80.0).abs() < 4.0, "{f:?}");
        assert!((f.us_per_byte[0] * 5e2 - 1.0).abs() < 0.015, "{f:?}");
        let c = choose(&pts).expect("choice");
        assert!(c.knees.is_empty(), "{c:?}");
    }

    #[test]
    fn knees_may_sit_at_interior_sizes_and_between_neighbours() {
        let pts = points(|b| 10.0 + b / 1e3);
        let sites: Vec<usize> = knee_sites(&pts[..3]).iter().map(|k| k.bytes).collect();
        // 64K, 128K, 256K: the middles in whole KiB (90.5K -> 91K, 181K) and the interior size.
        assert_eq!(sites, vec![91 << 10, 128 << 10, 181 << 10]);
        let k = knee_sites(&pts[..2])[0];
        assert!((k.wire_bytes - k.bytes as f64).abs() < 1e-9, "{k:?}");
    }

    #[test]
    fn degenerate_groups_fit_a_line_or_nothing() {
        let pts = points(|b| 10.0 + b / 1e3);
        assert!(fit(&pts[..1], &[]).is_none());
        let c = choose(&pts[..3]).expect("three sizes fit a line");
        assert!(c.knees.is_empty());
        // A knee needs a size on each side and more sizes than unknowns.
        let at = |i: usize| KneeAt {
            bytes: pts[i].bytes,
            wire_bytes: pts[i].wire_bytes,
        };
        assert!(fit(&pts[..4], &[at(1)]).is_some());
        assert!(fit(&pts[..4], &[at(3)]).is_none());
        assert!(fit(&pts[..3], &[at(1)]).is_none());
        // A time falling with size has no positive slope: no fit.
        let falling = points(|b| 1e6 - b / 1e3);
        assert!(fit(&falling, &[]).is_none());
    }
}
