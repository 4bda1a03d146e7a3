//! The communication of one denoise step of the diffusion models in the users' notes
//! (seeds/002): Wan/Hunyuan Ulysses sequence parallelism, Flux/QwenImage tensor parallelism and
//! CFG parallelism, as the collectives (op, size) each step issues and how often.

use super::BenchOp;
use std::fmt;

/// The knobs of a pattern; each pattern reads the ones it needs.
#[derive(Debug, Clone, PartialEq)]
pub struct PatternParams {
    /// Tokens per rank (the notes' `seq_len`, the local shard of the sequence).
    pub seq: usize,
    pub heads: usize,
    pub head_dim: usize,
    pub hidden: usize,
    /// Transformer blocks per denoise step.
    pub layers: usize,
    /// Tokens of the prompt embedding CFG broadcasts.
    pub text_len: usize,
    pub elem_bytes: usize,
}

/// Which pattern, with its parallel degree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternKind {
    /// `sequence_model_parallel_all_to_all_4D` on `[3, seq, heads, head_dim]` (scatter dim 2,
    /// gather dim 1) before attention and its inverse on `[seq, heads, head_dim]` after.
    WanUlysses { ulysses: usize },
    /// RowParallelLinear's all_reduce of `[seq, hidden]` after attention and after the MLP.
    FluxTp { tp: usize },
    /// The prompt embedding's broadcast and the all_gather of every CFG branch's prediction.
    Cfg { cfg: usize },
}

/// One collective of a step.
#[derive(Debug, Clone, PartialEq)]
pub struct PatternOp {
    pub label: String,
    pub op: BenchOp,
    /// The per-rank tensor's shape (elements).
    pub shape: Vec<usize>,
    /// nccl-tests' size of the call in bytes.
    pub size_bytes: usize,
    /// How many times one denoise step issues it.
    pub per_step: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    pub name: &'static str,
    pub ranks: usize,
    /// Transformer blocks per denoise step (one attention layer each).
    pub layers: usize,
    pub ops: Vec<PatternOp>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("unknown pattern `{0}` (wan-ulysses, flux-tp, cfg)")]
    Unknown(String),
    #[error("{0}")]
    Invalid(String),
}

impl PatternKind {
    /// `name` with its degree (`--ulysses`, `--tp`, `--cfg`).
    pub fn parse(name: &str, degree: usize) -> Result<PatternKind, PatternError> {
        Ok(match name {
            "wan-ulysses" | "ulysses" => PatternKind::WanUlysses { ulysses: degree },
            "flux-tp" | "tp" => PatternKind::FluxTp { tp: degree },
            "cfg" => PatternKind::Cfg { cfg: degree },
            other => return Err(PatternError::Unknown(other.to_string())),
        })
    }
}

fn op(
    label: &str,
    op: BenchOp,
    shape: Vec<usize>,
    ranks: usize,
    p: &PatternParams,
    per_step: usize,
) -> PatternOp {
    let elems: usize = shape.iter().product();
    let size_bytes = match op {
        BenchOp::AllGather => elems * ranks * p.elem_bytes,
        _ => elems * p.elem_bytes,
    };
    PatternOp {
        label: label.to_string(),
        op,
        shape,
        size_bytes,
        per_step,
    }
}

/// The collectives of one denoise step.
pub fn build(kind: PatternKind, p: &PatternParams) -> Result<Pattern, PatternError> {
    let bad = |m: String| Err(PatternError::Invalid(m));
    match kind {
        PatternKind::WanUlysses { ulysses: u } => {
            if u < 2 {
                return bad("wan-ulysses needs --ulysses 2 or more".into());
            }
            if !p.heads.is_multiple_of(u) {
                return bad(format!(
                    "wan-ulysses: --heads {} is not divisible by --ulysses {u} (all_to_all_4D scatters the heads)",
                    p.heads
                ));
            }
            Ok(Pattern {
                name: "wan-ulysses",
                ranks: u,
                layers: p.layers,
                ops: vec![
                    op(
                        "all_to_all_4D qkv [3, seq, heads, head_dim] scatter 2 gather 1",
                        BenchOp::AllToAll,
                        vec![3, p.seq, p.heads, p.head_dim],
                        u,
                        p,
                        p.layers,
                    ),
                    op(
                        "all_to_all_4D out [seq*u, heads/u, head_dim] scatter 1 gather 2",
                        BenchOp::AllToAll,
                        vec![p.seq * u, p.heads / u, p.head_dim],
                        u,
                        p,
                        p.layers,
                    ),
                ],
            })
        }
        PatternKind::FluxTp { tp } => {
            if tp < 2 {
                return bad("flux-tp needs --tp 2 or more".into());
            }
            Ok(Pattern {
                name: "flux-tp",
                ranks: tp,
                layers: p.layers,
                ops: vec![
                    op(
                        "all_reduce RowParallelLinear [seq, hidden] (attention out + MLP)",
                        BenchOp::AllReduce,
                        vec![p.seq, p.hidden],
                        tp,
                        p,
                        2 * p.layers,
                    ),
                    op(
                        "all_gather embedding [seq, hidden/tp]",
                        BenchOp::AllGather,
                        vec![p.seq, p.hidden / tp],
                        tp,
                        p,
                        1,
                    ),
                ],
            })
        }
        PatternKind::Cfg { cfg } => {
            if cfg < 2 {
                return bad("cfg needs --cfg 2 or more".into());
            }
            Ok(Pattern {
                name: "cfg",
                ranks: cfg,
                layers: p.layers,
                ops: vec![
                    op(
                        "broadcast prompt embeddings [text_len, hidden]",
                        BenchOp::Broadcast,
                        vec![p.text_len, p.hidden],
                        cfg,
                        p,
                        1,
                    ),
                    op(
                        "all_gather noise prediction [seq, hidden]",
                        BenchOp::AllGather,
                        vec![p.seq, p.hidden],
                        cfg,
                        p,
                        1,
                    ),
                ],
            })
        }
    }
}

/// Time of one denoise step from per-op times (same order as `pattern.ops`).
pub fn step_us(pattern: &Pattern, op_us: &[f64]) -> f64 {
    pattern
        .ops
        .iter()
        .zip(op_us)
        .map(|(o, t)| o.per_step as f64 * t)
        .sum()
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {} ranks", self.name, self.ranks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> PatternParams {
        PatternParams {
            seq: 4096,
            heads: 16,
            head_dim: 64,
            hidden: 3072,
            layers: 30,
            text_len: 512,
            elem_bytes: 2,
        }
    }

    #[test]
    fn wan_ulysses_is_the_notes_tensor() {
        let p = build(PatternKind::WanUlysses { ulysses: 2 }, &params()).unwrap();
        assert_eq!(p.ops[0].shape, vec![3, 4096, 16, 64]);
        assert_eq!(p.ops[0].size_bytes, 3 * 4096 * 16 * 64 * 2);
        assert_eq!(p.ops[1].size_bytes, 8192 * 8 * 64 * 2);
        assert_eq!(step_us(&p, &[10.0, 5.0]), 30.0 * 15.0);
        let e = build(PatternKind::WanUlysses { ulysses: 3 }, &params()).unwrap_err();
        assert!(e.to_string().contains("not divisible"), "{e}");
    }

    #[test]
    fn flux_and_cfg_sizes() {
        let f = build(PatternKind::FluxTp { tp: 2 }, &params()).unwrap();
        assert_eq!(f.ops[0].size_bytes, 4096 * 3072 * 2);
        assert_eq!(f.ops[0].per_step, 60);
        // all_gather's size is the gathered output
        assert_eq!(f.ops[1].size_bytes, 4096 * 3072 * 2);
        let c = build(PatternKind::Cfg { cfg: 2 }, &params()).unwrap();
        assert_eq!(c.ops[0].op, BenchOp::Broadcast);
        assert!(PatternKind::parse("nope", 2).is_err());
    }
}
