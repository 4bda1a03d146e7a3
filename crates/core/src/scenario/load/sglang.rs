//! The sglang steps of the scenario format: their fields, defaults and located errors.
//!
//! Kept beside load.rs (whose `Cx` it extends) so the generic c10d steps and sglang's start-up
//! and traffic steps (docs/rules/sglang.md) are each in one place. The group handles these steps
//! create (`tp`, `tp_cpu`, `ulysses`, ...) are registered here, so later steps can name them.

use super::super::expr::Expr;
use super::super::model::*;
use super::super::raw::RawStep;
use super::{Cx, R};
use crate::dtype::DType;
use crate::scenario::limits;
use toml::Spanned;

/// Coordinators whose device group a rank can name by kind, and `<kind>_cpu` for the gloo group.
pub const COORDINATOR_HANDLES: [&str; 8] = [
    "dp",
    "cfg",
    "pp",
    "sp",
    "tp",
    "replica",
    "encoder_dp",
    "vae_decode",
];
/// Bare groups (no cpu twin).
pub const BARE_HANDLES: [&str; 4] = ["ulysses", "ring", "dit", "vae"];
/// The world GroupCoordinator's device and cpu groups (not the default group, `WORLD`).
pub const WORLD_HANDLES: [&str; 2] = ["world_group", "world_group_cpu"];

/// Variables of an `all_to_all_4d` / `usp_all_to_all` fill: global coordinates and the rank.
pub const A2A_VARS: [&str; 9] = [
    "rank",
    "local_rank",
    "node",
    "world_size",
    "local_world_size",
    "b",
    "s",
    "h",
    "d",
];
const A2A_DEFAULT_FILL: &str = "s * 10000 + h * 100 + d";

pub fn op_fields(op: &str) -> Option<Vec<&'static str>> {
    Some(match op {
        "init_distributed_environment" => vec!["version", "init_method", "timeout_s"],
        "initialize_model_parallel" => vec![
            "version",
            "tp",
            "ulysses",
            "ring",
            "sp",
            "cfg",
            "dp",
            "pp",
            "vae",
            "usp_fallback",
        ],
        "all_to_all_4d" => vec![
            "group",
            "shape",
            "dtype",
            "fill",
            "scatter_dim",
            "gather_dim",
        ],
        "usp_all_to_all" => vec!["group", "shape", "dtype", "fill", "direction"],
        "broadcast_pyobj" => vec!["payload_bytes"],
        "denoise_step" => vec![
            "batch",
            "seq",
            "heads",
            "head_dim",
            "layers",
            "dtype",
            "payload_bytes",
        ],
        _ => return None,
    })
}

pub fn present_fields(r: &RawStep) -> Vec<(&'static str, usize)> {
    fn f<T>(name: &'static str, v: &Option<Spanned<T>>) -> Option<(&'static str, usize)> {
        v.as_ref().map(|s| (name, s.span().start))
    }
    [
        f("version", &r.version),
        f("tp", &r.tp),
        f("ulysses", &r.ulysses),
        f("ring", &r.ring),
        f("sp", &r.sp),
        f("cfg", &r.cfg),
        f("dp", &r.dp),
        f("pp", &r.pp),
        f("vae", &r.vae),
        f("usp_fallback", &r.usp_fallback),
        f("scatter_dim", &r.scatter_dim),
        f("gather_dim", &r.gather_dim),
        f("direction", &r.direction),
        f("batch", &r.batch),
        f("seq", &r.seq),
        f("heads", &r.heads),
        f("head_dim", &r.head_dim),
        f("layers", &r.layers),
        f("payload_bytes", &r.payload_bytes),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn register(handles: &mut Vec<String>, names: impl IntoIterator<Item = String>) {
    for n in names {
        if !handles.contains(&n) {
            handles.push(n);
        }
    }
}

impl Cx<'_> {
    pub(super) fn sglang_step_kind(
        &self,
        op: &str,
        r: &RawStep,
        handles: &mut Vec<String>,
    ) -> R<StepKind> {
        Ok(match op {
            "init_distributed_environment" => {
                register(handles, WORLD_HANDLES.iter().map(|h| h.to_string()));
                StepKind::InitDistributedEnvironment {
                    version: self.sg_version(&r.version)?.unwrap_or(SglangVersion::V2),
                    init_method: self.init_method(&r.init_method)?,
                    timeout_ms: self.timeout(&r.timeout_s)?,
                }
            }
            "initialize_model_parallel" => {
                register(
                    handles,
                    COORDINATOR_HANDLES
                        .iter()
                        .flat_map(|k| [k.to_string(), format!("{k}_cpu")])
                        .chain(BARE_HANDLES.iter().map(|h| h.to_string())),
                );
                let step = self.initialize_model_parallel(r)?;
                if let StepKind::InitializeModelParallel {
                    degrees,
                    usp_fallback,
                    ..
                } = &step
                {
                    // Groups whose members the degrees give (the rest count the world).
                    let (ulysses, ring) = if *usp_fallback {
                        (usize::MAX, usize::MAX)
                    } else {
                        (degrees.ulysses, degrees.ring)
                    };
                    for (h, n) in [
                        ("tp", degrees.tp),
                        ("sp", degrees.sp),
                        ("cfg", degrees.cfg),
                        ("dp", degrees.dp),
                        ("pp", degrees.pp),
                    ] {
                        self.note_group_size(h, n);
                        self.note_group_size(&format!("{h}_cpu"), n);
                    }
                    self.note_group_size("ulysses", ulysses);
                    self.note_group_size("ring", ring);
                }
                step
            }
            "all_to_all_4d" | "usp_all_to_all" => self.sp_all_to_all(op, r, handles)?,
            "broadcast_pyobj" => StepKind::BroadcastPyobj {
                payload_bytes: self.count(&r.payload_bytes, 64, 0, "payload_bytes")?,
            },
            _ => {
                let model = DenoiseModel {
                    batch: self.count(&r.batch, 1, 1, "batch")?,
                    seq: self.count(&r.seq, 64, 1, "seq")?,
                    heads: self.count(&r.heads, 12, 1, "heads")?,
                    head_dim: self.count(&r.head_dim, 8, 1, "head_dim")?,
                    layers: self.count(&r.layers, 2, 0, "layers")?,
                };
                self.check_denoise(&model, r)?;
                StepKind::DenoiseStep {
                    model,
                    dtype: self.dtype_or(&r.dtype, DType::BF16)?,
                    payload_bytes: self.count(&r.payload_bytes, 64, 0, "payload_bytes")?,
                }
            }
        })
    }

    /// A denoise step's activation and the program's total denoise work stay within
    /// [`limits::MAX_DENOISE_ELEMENTS`] and [`limits::MAX_DENOISE_WORK`].
    fn check_denoise(&self, m: &DenoiseModel, r: &RawStep) -> R<()> {
        let at = r.op.as_ref().map_or(0, |o| o.span().start);
        let elements = [m.batch, m.seq, m.heads, m.head_dim]
            .iter()
            .fold(1u64, |a, d| a.saturating_mul(*d as u64));
        if elements > limits::MAX_DENOISE_ELEMENTS {
            return Err(self.err(
                at,
                format!(
                    "denoise_step activation too large: batch x seq x heads x head_dim = {elements} elements (scen's limit is {})",
                    limits::MAX_DENOISE_ELEMENTS
                ),
            ));
        }
        let work = self
            .denoise_work
            .get()
            .saturating_add(elements.saturating_mul(m.layers.max(1) as u64));
        if work > limits::MAX_DENOISE_WORK {
            return Err(self.err(
                at,
                format!(
                    "denoise_step work too large: layers x activation elements over the program reach {work} (scen's limit is {}); use fewer layers or smaller dimensions",
                    limits::MAX_DENOISE_WORK
                ),
            ));
        }
        self.denoise_work.set(work);
        Ok(())
    }

    fn initialize_model_parallel(&self, r: &RawStep) -> R<StepKind> {
        let ulysses = self.count(&r.ulysses, 1, 1, "ulysses")?;
        let ring = self.count(&r.ring, 1, 1, "ring")?;
        Ok(StepKind::InitializeModelParallel {
            degrees: SglangDegrees {
                tp: self.count(&r.tp, 1, 1, "tp")?,
                ulysses,
                ring,
                sp: self.count(&r.sp, ulysses * ring, 1, "sp")?,
                cfg: self.count(&r.cfg, 1, 1, "cfg")?,
                dp: self.count(&r.dp, 1, 1, "dp")?,
                pp: self.count(&r.pp, 1, 1, "pp")?,
                vae: self.count(&r.vae, 0, 0, "vae")?,
            },
            version: self.sg_version(&r.version)?,
            usp_fallback: r.usp_fallback.as_ref().is_some_and(|b| *b.get_ref()),
        })
    }

    fn sp_all_to_all(&self, op: &str, r: &RawStep, handles: &[String]) -> R<StepKind> {
        let (a2a, default_group) = if op == "all_to_all_4d" {
            let scatter_dim = self.count(&r.scatter_dim, 2, 0, "scatter_dim")?;
            let gather_dim = self.count(&r.gather_dim, 1, 0, "gather_dim")?;
            let op = A2aOp::AllToAll4D {
                scatter_dim,
                gather_dim,
            };
            (op, "sp")
        } else {
            let op = match r.direction.as_ref().map(|d| d.get_ref().as_str()) {
                None | Some("input") => A2aOp::UspInput { head_dim: 2 },
                Some("output") => A2aOp::UspOutput { head_dim: 2 },
                Some(other) => {
                    let d = r.direction.as_ref().expect("direction");
                    return Err(self.at(d, format!("unknown direction `{other}` (input, output)")));
                }
            };
            (op, "ulysses")
        };
        let group = match &r.group {
            Some(_) => self.group_ref(&r.group, handles)?,
            None if handles.iter().any(|h| h == default_group) => Some(default_group.to_string()),
            None => {
                return Err(self.err(
                    r.op.as_ref().map_or(0, |o| o.span().start),
                    format!("{op} runs on the sglang `{default_group}` group: add an initialize_model_parallel step before it, or name a group"),
                ))
            }
        };
        Ok(StepKind::SpAllToAll {
            op: a2a,
            group,
            shape: self.shape4(&r.shape)?,
            dtype: self.dtype_or(&r.dtype, DType::F32)?,
            fill: match &r.fill {
                Some(f) => self.expr(f, &A2A_VARS)?,
                None => Expr::parse(A2A_DEFAULT_FILL, &A2A_VARS).expect("default fill parses"),
            },
        })
    }

    fn sg_version(&self, v: &Option<Spanned<String>>) -> R<Option<SglangVersion>> {
        let Some(v) = v else { return Ok(None) };
        match v.get_ref().as_str() {
            "v0" => Ok(Some(SglangVersion::V0)),
            "v1" => Ok(Some(SglangVersion::V1)),
            "v2" => Ok(Some(SglangVersion::V2)),
            "0.5.23" => Ok(Some(SglangVersion::V0_5_23)),
            other => Err(self.at(
                v,
                format!(
                    "unknown sglang version `{other}` (v0, v1, v2, 0.5.23: see docs/scenario-format.md)"
                ),
            )),
        }
    }

    /// A non-negative count field with a default and a lower bound.
    fn count(&self, v: &Option<Spanned<i64>>, default: usize, min: i64, what: &str) -> R<usize> {
        match v {
            None => Ok(default),
            Some(s) if (min..=1 << 20).contains(s.get_ref()) => Ok(*s.get_ref() as usize),
            Some(s) => Err(self.at(s, format!("{what} must be between {min} and {}", 1 << 20))),
        }
    }

    fn dtype_or(&self, d: &Option<Spanned<String>>, default: DType) -> R<DType> {
        match d {
            None => Ok(default),
            Some(d) => d.get_ref().parse::<DType>().map_err(|_| {
                self.at(
                    d,
                    format!(
                        "unknown dtype `{}` (f32, bf16, f16, f64, i64, i32, i8, u8, bool)",
                        d.get_ref()
                    ),
                )
            }),
        }
    }

    /// A 4-D per-rank shape `[b, s, h, d]` (default `[1, 8, 4, 2]`).
    fn shape4(&self, s: &Option<Spanned<Vec<i64>>>) -> R<[usize; 4]> {
        let Some(s) = s else { return Ok([1, 8, 4, 2]) };
        let dims = s.get_ref();
        if dims.len() != 4 || dims.iter().any(|d| !(1..=1 << 16).contains(d)) {
            return Err(self.at(
                s,
                "shape must be 4-D [b, s, h, d] with dimensions between 1 and 65536 (AllToAll4D requires 4-D input)",
            ));
        }
        let n = dims.iter().fold(1u64, |a, d| a.saturating_mul(*d as u64));
        if self.payloads_key.get() == Some(true) {
            // Symbolic: no element is computed or moved, so the documented per-tensor limit.
            if n > limits::MAX_TENSOR_ELEMENTS {
                return Err(self.at(s, "tensor too large (over scen's limit of 2^28 elements)"));
            }
        } else if n > limits::MAX_A2A_VALUE_ELEMENTS {
            return Err(self.at(
                s,
                "tensor too large for the simulator with values (over 2^22 elements; `[sim] payloads = \"symbolic\"` allows 2^28)",
            ));
        }
        Ok([
            dims[0] as usize,
            dims[1] as usize,
            dims[2] as usize,
            dims[3] as usize,
        ])
    }
}
