//! What a `scen bench` request means before anything runs: the ops and `--env` pairs it names,
//! how many ranks, which link class and whose algorithms the prediction charges, and a diffusion
//! pattern's collectives from its name and shape. Pure, so the same rules hold for the CLI, the
//! `scen` library and the tests, and each is unit-tested here.

use super::model::LinkClass;
use super::pattern::{self, Pattern, PatternError, PatternKind, PatternParams};
use super::schedule::{AllReduceChoice, Library};
use super::BenchOp;

/// Why a request cannot be planned (the messages are the CLI's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BenchRequestError {
    #[error(transparent)]
    Op(#[from] super::UnknownBenchOp),
    #[error("--env `{0}`: expected KEY=VALUE")]
    Env(String),
    #[error("--env CCL_ALLREDUCE={value}: {why}")]
    AllReduce {
        value: String,
        why: super::schedule::AllReduceChoiceError,
    },
    #[error("--ranks must be at least 1")]
    NoRanks,
}

/// `--op`: a comma-separated list of collectives, or `all`.
pub fn parse_ops(s: &str) -> Result<Vec<BenchOp>, BenchRequestError> {
    if s == "all" {
        return Ok(BenchOp::ALL.to_vec());
    }
    s.split(',')
        .map(|o| o.trim().parse::<BenchOp>().map_err(BenchRequestError::Op))
        .collect()
}

/// `--env K=V` pairs, in order (the value may hold `=`; the key may not be empty).
pub fn parse_env(env: &[String]) -> Result<Vec<(String, String)>, BenchRequestError> {
    env.iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(BenchRequestError::Env(kv.clone())),
        })
        .collect()
}

/// The world size: the pattern's, else `--ranks`, else `--nproc-per-node` x `--nnodes`, else
/// two per node.
pub fn ranks(
    pattern: Option<usize>,
    ranks: Option<usize>,
    nproc_per_node: Option<usize>,
    nnodes: usize,
) -> Result<usize, BenchRequestError> {
    let n = pattern
        .or(ranks)
        .unwrap_or_else(|| nproc_per_node.unwrap_or(2) * nnodes);
    if n == 0 {
        return Err(BenchRequestError::NoRanks);
    }
    Ok(n)
}

/// The link the prediction charges: the host link on the gloo path, else inter-node when the
/// run spans nodes, else intra-node.
pub fn link_class(host_path: bool, nnodes: usize) -> LinkClass {
    match (host_path, nnodes > 1) {
        (true, _) => LinkClass::Host,
        (_, true) => LinkClass::Inter,
        _ => LinkClass::Intra,
    }
}

/// Whose algorithms the prediction charges: scen's on the host (gloo) path, else oneCCL's
/// selection table, with the all-reduce `--env CCL_ALLREDUCE=...` names (what the measured
/// processes run). A name the model has no schedule for is an error only when something is
/// `predicted`: real oneCCL runs any algorithm.
pub fn library(
    host_path: bool,
    ccl_allreduce: Option<&str>,
    predicted: bool,
) -> Result<Library, BenchRequestError> {
    match (host_path, ccl_allreduce) {
        (true, _) => Ok(Library::Scen),
        (false, None) => Ok(Library::OnecclCpu),
        (false, Some(v)) => match AllReduceChoice::parse(v) {
            Ok(c) => Ok(Library::OnecclCpuWith(c)),
            Err(_) if !predicted => Ok(Library::OnecclCpu),
            Err(why) => Err(BenchRequestError::AllReduce {
                value: v.to_string(),
                why,
            }),
        },
    }
}

/// `--pattern NAME` with its shape flags, as given (unset degrees are 2, unset layers the
/// model's own count).
#[derive(Debug, Clone, PartialEq)]
pub struct PatternRequest {
    pub name: String,
    pub seq: usize,
    pub heads: usize,
    pub head_dim: usize,
    pub hidden: usize,
    pub layers: Option<usize>,
    pub text_len: usize,
    pub ulysses: Option<usize>,
    pub tp: Option<usize>,
    pub cfg: Option<usize>,
}

impl PatternRequest {
    /// The pattern's collectives for elements of `elem_bytes`.
    pub fn build(&self, elem_bytes: usize) -> Result<Pattern, PatternError> {
        let kind = PatternKind::parse(&self.name, self.degree())?;
        let layers = self.layers.unwrap_or(match kind {
            PatternKind::WanUlysses { .. } => 30,
            PatternKind::FluxTp { .. } => 57,
            PatternKind::Cfg { .. } => 1,
        });
        let p = PatternParams {
            seq: self.seq,
            heads: self.heads,
            head_dim: self.head_dim,
            hidden: self.hidden,
            layers,
            text_len: self.text_len,
            elem_bytes,
        };
        pattern::build(kind, &p)
    }

    /// The parallel degree the pattern's name reads (`--ulysses`, `--tp` or `--cfg`).
    fn degree(&self) -> usize {
        match self.name.as_str() {
            "wan-ulysses" | "ulysses" => self.ulysses,
            "flux-tp" | "tp" => self.tp,
            _ => self.cfg,
        }
        .unwrap_or(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_parse_lists_and_all() {
        assert_eq!(parse_ops("all").unwrap(), BenchOp::ALL.to_vec());
        assert_eq!(
            parse_ops("all_reduce, broadcast").unwrap(),
            vec![BenchOp::AllReduce, BenchOp::Broadcast]
        );
        let e = parse_ops("all_reduce,gossip").unwrap_err();
        assert!(e.to_string().starts_with("unknown op `gossip`"), "{e}");
    }

    #[test]
    fn env_needs_a_key_and_an_equals_sign() {
        let ok = parse_env(&["A=1".into(), "B=x=y".into(), "C=".into()]).unwrap();
        assert_eq!(
            ok,
            vec![
                ("A".into(), "1".into()),
                ("B".into(), "x=y".into()),
                ("C".into(), String::new())
            ]
        );
        for bad in ["BAD", "=1"] {
            let e = parse_env(&["A=1".into(), bad.into()]).unwrap_err();
            assert_eq!(e, BenchRequestError::Env(bad.into()));
            assert_eq!(e.to_string(), format!("--env `{bad}`: expected KEY=VALUE"));
        }
    }

    #[test]
    fn ranks_come_from_the_pattern_then_the_flags() {
        assert_eq!(ranks(Some(4), Some(8), Some(2), 3), Ok(4));
        assert_eq!(ranks(None, Some(8), Some(2), 3), Ok(8));
        assert_eq!(ranks(None, None, Some(2), 3), Ok(6));
        assert_eq!(ranks(None, None, None, 3), Ok(6));
        assert_eq!(
            ranks(None, Some(0), None, 1),
            Err(BenchRequestError::NoRanks)
        );
    }

    #[test]
    fn link_class_and_library_follow_the_path() {
        assert_eq!(link_class(true, 2), LinkClass::Host);
        assert_eq!(link_class(false, 2), LinkClass::Inter);
        assert_eq!(link_class(false, 1), LinkClass::Intra);
        assert_eq!(library(true, Some("zzz"), true), Ok(Library::Scen));
        assert_eq!(library(false, None, true), Ok(Library::OnecclCpu));
        let ring = AllReduceChoice::parse("ring").unwrap();
        assert_eq!(
            library(false, Some("ring"), true),
            Ok(Library::OnecclCpuWith(ring))
        );
        assert_eq!(library(false, Some("zzz"), false), Ok(Library::OnecclCpu));
        let e = library(false, Some("zzz"), true).unwrap_err();
        assert!(
            e.to_string().starts_with("--env CCL_ALLREDUCE=zzz: "),
            "{e}"
        );
    }

    #[test]
    fn a_pattern_reads_its_own_degree_and_default_layers() {
        let mut r = PatternRequest {
            name: "wan-ulysses".into(),
            seq: 4096,
            heads: 16,
            head_dim: 64,
            hidden: 3072,
            layers: None,
            text_len: 512,
            ulysses: Some(4),
            tp: Some(8),
            cfg: None,
        };
        let p = r.build(4).unwrap();
        assert_eq!((p.ranks, p.ops[0].per_step), (4, 30));
        r.name = "flux-tp".into();
        assert_eq!(r.build(4).unwrap().ranks, 8);
        r.name = "cfg".into();
        assert_eq!(r.build(4).unwrap().ranks, 2);
        r.name = "nope".into();
        assert_eq!(r.build(4), Err(PatternError::Unknown("nope".into())));
    }
}
