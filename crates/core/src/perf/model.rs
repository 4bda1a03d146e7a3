//! The timing model: a message of `b` bytes on a link costs `alpha + b / beta`, with one
//! (alpha, beta) per link class. The simulator charges it per message sent (crates/sim), and
//! `scen bench` predicts a collective's time from the message schedule of the algorithm the
//! collective runs (ring, binomial tree, pairwise exchange; the schedules are checked against
//! the algorithms' real messages below). Defaults are documented in docs/bench.md; a scenario's
//! `[world.links]` or a model file (`scen bench --calibrate -o model.toml`) overrides them.

use super::BenchOp;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Which kind of link a message crosses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkClass {
    /// Device groups (xccl/nccl) between ranks of one node: the device fabric.
    Intra,
    /// Device groups between nodes: the scale-out network.
    Inter,
    /// Host (gloo) groups: TCP between processes.
    Host,
    /// TCPStore requests.
    Store,
}

impl LinkClass {
    pub const ALL: [LinkClass; 4] = [
        LinkClass::Intra,
        LinkClass::Inter,
        LinkClass::Host,
        LinkClass::Store,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LinkClass::Intra => "intra",
            LinkClass::Inter => "inter",
            LinkClass::Host => "host",
            LinkClass::Store => "store",
        }
    }

    /// The class of a message: device or host group, between ranks on one node or not.
    pub fn of(device: bool, same_node: bool) -> LinkClass {
        match (device, same_node) {
            (true, true) => LinkClass::Intra,
            (true, false) => LinkClass::Inter,
            (false, _) => LinkClass::Host,
        }
    }
}

/// One link class's cost: `alpha_us` per message plus bytes at `beta_gbps` (1e9 bytes/s).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkCost {
    pub alpha_us: f64,
    pub beta_gbps: f64,
}

impl LinkCost {
    /// Microseconds to move one message of `bytes`.
    pub fn message_us(&self, bytes: usize) -> f64 {
        let bw = if self.beta_gbps > 0.0 {
            bytes as f64 / (self.beta_gbps * 1e3)
        } else {
            0.0
        };
        self.alpha_us.max(0.0) + bw
    }
}

/// The cost of every link class. Defaults: a node of Intel GPUs on a device fabric (Xe Link
/// class, 10 us / 100 GB/s), a 100 Gb/s scale-out network (20 us / 12.5 GB/s), host TCP between
/// processes for gloo (50 us / 2 GB/s) and TCPStore round trips (100 us / 1 GB/s).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimingModel {
    #[serde(default = "default_intra")]
    pub intra: LinkCost,
    #[serde(default = "default_inter")]
    pub inter: LinkCost,
    #[serde(default = "default_host")]
    pub host: LinkCost,
    #[serde(default = "default_store")]
    pub store: LinkCost,
}

fn default_intra() -> LinkCost {
    LinkCost {
        alpha_us: 10.0,
        beta_gbps: 100.0,
    }
}
fn default_inter() -> LinkCost {
    LinkCost {
        alpha_us: 20.0,
        beta_gbps: 12.5,
    }
}
fn default_host() -> LinkCost {
    LinkCost {
        alpha_us: 50.0,
        beta_gbps: 2.0,
    }
}
fn default_store() -> LinkCost {
    LinkCost {
        alpha_us: 100.0,
        beta_gbps: 1.0,
    }
}

impl Default for TimingModel {
    fn default() -> Self {
        TimingModel {
            intra: default_intra(),
            inter: default_inter(),
            host: default_host(),
            store: default_store(),
        }
    }
}

/// A model file that does not parse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
}

/// A model file: `[links.intra] alpha_us = .. beta_gbps = ..` (and inter, host, store), plus
/// optional notes the calibration wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelFile {
    #[serde(default)]
    pub links: TimingModel,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl TimingModel {
    pub fn cost(&self, class: LinkClass) -> &LinkCost {
        match class {
            LinkClass::Intra => &self.intra,
            LinkClass::Inter => &self.inter,
            LinkClass::Host => &self.host,
            LinkClass::Store => &self.store,
        }
    }

    pub fn cost_mut(&mut self, class: LinkClass) -> &mut LinkCost {
        match class {
            LinkClass::Intra => &mut self.intra,
            LinkClass::Inter => &mut self.inter,
            LinkClass::Host => &mut self.host,
            LinkClass::Store => &mut self.store,
        }
    }

    /// Microseconds one message of `bytes` costs on `class`.
    pub fn message_us(&self, class: LinkClass, bytes: usize) -> f64 {
        self.cost(class).message_us(bytes)
    }

    /// Predicted microseconds of `op` on `bytes` (the benchmark size) over `ranks` members
    /// whose slowest link is `class`.
    pub fn predict_us(&self, op: BenchOp, bytes: usize, ranks: usize, class: LinkClass) -> f64 {
        let s = schedule(op, ranks);
        let msg = (bytes as f64 * s.bytes_factor).round() as usize;
        s.rounds as f64 * self.message_us(class, msg)
    }

    /// Reads a model file (TOML).
    pub fn load(file: &str, text: &str) -> Result<TimingModel, ModelError> {
        toml::from_str::<ModelFile>(text)
            .map(|m| m.links)
            .map_err(|e| ModelError::Parse {
                file: file.to_string(),
                message: e.to_string(),
            })
    }
}

impl fmt::Display for TimingModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = LinkClass::ALL
            .iter()
            .map(|c| {
                let l = self.cost(*c);
                format!("{} {:.1}us+{:.3}GB/s", c.name(), l.alpha_us, l.beta_gbps)
            })
            .collect();
        f.write_str(&parts.join(", "))
    }
}

/// The critical path of one collective: `rounds` messages in sequence, each carrying
/// `bytes_factor` x the benchmark size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    pub rounds: usize,
    pub bytes_factor: f64,
}

/// The message schedule of the algorithm core runs `op` with (crates/core/src/algo).
pub fn schedule(op: BenchOp, ranks: usize) -> Schedule {
    let n = ranks.max(1);
    let log2 = usize::BITS as usize - (n - 1).leading_zeros() as usize;
    let (rounds, bytes_factor) = match op {
        BenchOp::AllReduce => (2 * (n - 1), 1.0 / n as f64),
        BenchOp::AllGather | BenchOp::ReduceScatter | BenchOp::AllToAll => (n - 1, 1.0 / n as f64),
        BenchOp::Broadcast | BenchOp::Reduce => (if n == 1 { 0 } else { log2 }, 1.0),
    };
    Schedule {
        rounds,
        bytes_factor,
    }
}

/// One measured point for calibration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub op: BenchOp,
    pub bytes: usize,
    pub ranks: usize,
    pub time_us: f64,
}

/// Fits one link class's alpha and beta to `samples` by least squares on relative error
/// (weights 1/t^2, so a 64 KiB point counts as much as a 64 MiB one): each sample says
/// `t = rounds * alpha + rounds * msg_bytes / beta`. `None` with fewer than two distinct
/// message shapes or a non-positive fit.
pub fn fit(samples: &[Sample]) -> Option<LinkCost> {
    // t = a * x1 + c * x2 with x1 = rounds, x2 = rounds * msg_bytes, c = 1 / (beta * 1e3).
    let (mut s11, mut s12, mut s22, mut s1t, mut s2t) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for p in samples.iter().filter(|p| p.time_us > 0.0) {
        let sc = schedule(p.op, p.ranks);
        let x1 = sc.rounds as f64;
        let x2 = sc.rounds as f64 * (p.bytes as f64 * sc.bytes_factor);
        let w = 1.0 / (p.time_us * p.time_us);
        s11 += w * x1 * x1;
        s12 += w * x1 * x2;
        s22 += w * x2 * x2;
        s1t += w * x1 * p.time_us;
        s2t += w * x2 * p.time_us;
    }
    let det = s11 * s22 - s12 * s12;
    if det.abs() <= f64::EPSILON * s11 * s22 || det == 0.0 {
        return None;
    }
    let a = (s1t * s22 - s2t * s12) / det;
    let c = (s11 * s2t - s12 * s1t) / det;
    if c <= 0.0 {
        return None;
    }
    Some(LinkCost {
        alpha_us: a.max(0.0),
        beta_gbps: 1.0 / (c * 1e3),
    })
}

/// Relative error of a prediction, signed: (predicted - measured) / measured.
pub fn rel_error(predicted_us: f64, measured_us: f64) -> f64 {
    if measured_us <= 0.0 {
        return 0.0;
    }
    (predicted_us - measured_us) / measured_us
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::testlink::{run_world, ChanLink};
    use crate::algo::{self, Link, LinkError};
    use crate::dtype::DType;
    use crate::reduce::ReduceOp;
    use crate::tensor::Tensor;
    use std::cell::RefCell;

    #[test]
    fn a_message_costs_alpha_plus_bytes_over_beta() {
        let l = LinkCost {
            alpha_us: 10.0,
            beta_gbps: 2.0,
        };
        assert_eq!(l.message_us(0), 10.0);
        assert_eq!(l.message_us(2_000_000), 1010.0);
        let m = TimingModel::default();
        // Ring all_reduce of 4 MB on 4 ranks: 6 messages of 1 MB.
        let p = m.predict_us(BenchOp::AllReduce, 4_000_000, 4, LinkClass::Host);
        assert!((p - 6.0 * (50.0 + 500.0)).abs() < 1e-6, "{p}");
        assert_eq!(
            m.predict_us(BenchOp::AllReduce, 1 << 20, 1, LinkClass::Intra),
            0.0
        );
    }

    #[test]
    fn fit_recovers_alpha_and_beta_from_exact_points() {
        let truth = LinkCost {
            alpha_us: 37.0,
            beta_gbps: 4.5,
        };
        let mut samples = Vec::new();
        for op in [BenchOp::AllReduce, BenchOp::AllGather, BenchOp::AllToAll] {
            for n in [2, 4] {
                for k in 10..=26 {
                    let bytes = 1usize << k;
                    let m = TimingModel {
                        intra: truth,
                        ..Default::default()
                    };
                    let t = m.predict_us(op, bytes, n, LinkClass::Intra);
                    samples.push(Sample {
                        op,
                        bytes,
                        ranks: n,
                        time_us: t,
                    });
                }
            }
        }
        let got = fit(&samples).expect("fit");
        assert!((got.alpha_us - 37.0).abs() < 1e-3, "{got:?}");
        assert!((got.beta_gbps - 4.5).abs() < 1e-6, "{got:?}");
    }

    #[test]
    fn fit_on_noisy_points_stays_close_and_degenerate_input_is_refused() {
        // +-5% alternating noise around alpha 100 us, beta 2 GB/s.
        let truth = TimingModel {
            intra: LinkCost {
                alpha_us: 100.0,
                beta_gbps: 2.0,
            },
            ..Default::default()
        };
        let samples: Vec<Sample> = (12..=26)
            .map(|k| {
                let bytes = 1usize << k;
                let t = truth.predict_us(BenchOp::AllReduce, bytes, 2, LinkClass::Intra);
                let noise = if k % 2 == 0 { 1.05 } else { 0.95 };
                Sample {
                    op: BenchOp::AllReduce,
                    bytes,
                    ranks: 2,
                    time_us: t * noise,
                }
            })
            .collect();
        let got = fit(&samples).expect("fit");
        assert!((got.alpha_us - 100.0).abs() < 15.0, "{got:?}");
        assert!((got.beta_gbps - 2.0).abs() < 0.2, "{got:?}");
        let one = [samples[0]];
        assert_eq!(fit(&one), None);
    }

    #[test]
    fn model_files_parse_and_name_the_file_on_error() {
        let m = TimingModel::load("m.toml", "[links.intra]\nalpha_us = 5.0\nbeta_gbps = 7.0\n")
            .unwrap();
        assert_eq!(m.intra.beta_gbps, 7.0);
        assert_eq!(m.host, TimingModel::default().host);
        let e = TimingModel::load("m.toml", "[links.intra]\nalpha = 5\n").unwrap_err();
        assert!(e.to_string().starts_with("m.toml: "), "{e}");
    }

    /// Counts rank 0's messages and their largest payload.
    struct Counting {
        inner: ChanLink,
        sent: RefCell<(usize, usize)>,
    }

    impl Link for Counting {
        fn rank(&self) -> usize {
            self.inner.rank()
        }
        fn size(&self) -> usize {
            self.inner.size()
        }
        async fn send(&self, to: usize, data: Vec<u8>) -> Result<(), LinkError> {
            {
                let mut s = self.sent.borrow_mut();
                s.0 += 1;
                s.1 = s.1.max(data.len() - 9);
            }
            self.inner.send(to, data).await
        }
        async fn recv(&self, from: usize) -> Result<Vec<u8>, LinkError> {
            self.inner.recv(from).await
        }
    }

    /// (messages, largest payload) of the member that sends most, running the real algorithm.
    fn measured(op: BenchOp, n: usize, bytes: usize) -> (usize, usize) {
        let per_rank = run_world(n, move |l| async move {
            let c = Counting {
                inner: l,
                sent: RefCell::new((0, 0)),
            };
            let count = op.send_count(bytes, 4, n);
            let mut t = Tensor::from_fn(DType::F32, vec![count], |i| i as f64);
            match op {
                BenchOp::AllReduce => algo::all_reduce(&c, &mut t, ReduceOp::Sum)
                    .await
                    .map(|_| ()),
                BenchOp::AllGather => algo::all_gather(&c, &t).await.map(|_| ()),
                BenchOp::ReduceScatter => algo::reduce_scatter(&c, &t, ReduceOp::Sum, &[count / n])
                    .await
                    .map(|_| ()),
                BenchOp::AllToAll => {
                    let chunk = bytes / n;
                    let sends = vec![vec![0u8; chunk]; n];
                    algo::all_to_all(&c, sends, &vec![chunk; n])
                        .await
                        .map(|_| ())
                }
                BenchOp::Broadcast => algo::broadcast(&c, &mut t, 0).await,
                BenchOp::Reduce => algo::reduce(&c, &mut t, ReduceOp::Sum, 0).await,
            }
            .expect("collective");
            c.sent.into_inner()
        });
        // The critical path: the most messages any member sends or (trees) the depth.
        let msgs = per_rank.iter().map(|p| p.0).max().unwrap_or(0);
        let big = per_rank.iter().map(|p| p.1).max().unwrap_or(0);
        (msgs, big)
    }

    #[test]
    fn schedules_match_the_algorithms_real_messages() {
        for n in [2usize, 3, 4, 8] {
            let bytes = 4 * 8 * 9 * 7 * 5; // divisible by every n and by the f32 width
            for op in BenchOp::ALL {
                let s = schedule(op, n);
                let (msgs, big) = measured(op, n, bytes);
                let want_big = (bytes as f64 * s.bytes_factor).round() as usize;
                match op {
                    // A binomial tree's root sends log2(n) messages (its critical path).
                    BenchOp::Broadcast => assert_eq!(msgs, s.rounds, "{op} n={n}"),
                    // Reduce: every member sends once; the root receives log2(n) in sequence.
                    BenchOp::Reduce => assert_eq!(msgs, 1, "{op} n={n}"),
                    _ => assert_eq!(msgs, s.rounds, "{op} n={n}"),
                }
                assert_eq!(big, want_big, "{op} n={n}");
            }
        }
    }
}
