//! The scenario file exactly as written: serde structs mirroring the TOML, with spans.
//!
//! Kept apart from the typed model (model.rs) so that serde's job is only syntax: unknown keys
//! and wrong types are rejected here with a location, and every semantic check happens once in
//! load.rs, where it can name the step and field it is about.

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    #[serde(default)]
    pub scenario: RawMeta,
    pub world: Spanned<RawWorld>,
    #[serde(default)]
    pub step: Vec<Spanned<RawStep>>,
    #[serde(default)]
    pub expect: Vec<Spanned<RawExpect>>,
    #[serde(default)]
    pub sim: RawSim,
    #[serde(default)]
    pub faults: Vec<Spanned<RawFault>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMeta {
    pub name: Option<String>,
    pub description: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSim {
    pub seed: Option<u64>,
    pub latency_ms: Option<Spanned<[u64; 2]>>,
    pub random_order: Option<bool>,
    pub payloads: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWorld {
    pub nodes: Option<Spanned<i64>>,
    pub ranks_per_node: Option<Spanned<i64>>,
    pub platform: Option<Spanned<String>>,
    pub devices_per_node: Option<Spanned<i64>>,
    pub master_addr: Option<Spanned<String>>,
    pub master_port: Option<Spanned<i64>>,
    pub launcher: Option<Spanned<String>>,
    /// How long a rank's process lives after its program ends (the interpreter's teardown).
    pub exit_ms: Option<Spanned<i64>>,
    /// When in that teardown the program's globals (its own stores) are freed.
    pub globals_freed_ms: Option<Spanned<i64>>,
    /// Under torchrun: how long after the first failed worker's process ended the agent's
    /// check sees it, and how long after that check its stop of the others takes effect.
    pub agent_check_ms: Option<Spanned<i64>>,
    pub agent_stop_ms: Option<Spanned<i64>>,
    #[serde(default)]
    pub env: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    pub node: Vec<Spanned<RawNode>>,
    #[serde(default)]
    pub rank: Vec<Spanned<RawRankEnv>>,
    #[serde(default)]
    pub service: Vec<Spanned<RawService>>,
    /// The timing model's link costs (crates/core/src/perf/model.rs).
    pub links: Option<Spanned<RawLinks>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLinks {
    /// A model file (`scen bench --calibrate --model-out`), relative to the scenario file.
    pub model: Option<Spanned<String>>,
    pub intra: Option<Spanned<RawLinkCost>>,
    pub inter: Option<Spanned<RawLinkCost>>,
    pub host: Option<Spanned<RawLinkCost>>,
    pub store: Option<Spanned<RawLinkCost>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLinkCost {
    pub alpha_us: Option<Spanned<f64>>,
    pub beta_gbps: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNode {
    pub node: Spanned<i64>,
    pub platform: Option<Spanned<String>>,
    pub devices: Option<Spanned<i64>>,
    #[serde(default)]
    pub env: BTreeMap<String, Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRankEnv {
    pub on: Spanned<RawSelector>,
    #[serde(default)]
    pub env: BTreeMap<String, Spanned<String>>,
    /// These ranks' own teardown (`[world] exit_ms` for them; a recording's measured one).
    pub exit_ms: Option<Spanned<i64>>,
    /// When in it their program's globals are freed (a recording's measured one).
    pub globals_freed_ms: Option<Spanned<i64>>,
}

/// A TCP store left running by another job (for port-reuse scenarios).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawService {
    pub kind: Spanned<String>,
    pub node: Spanned<i64>,
    pub port: Spanned<i64>,
    pub world_size: Spanned<i64>,
    pub label: Option<String>,
    /// The other job's keys already in its store (`"init/" = "2"`, its group keys).
    #[serde(default)]
    pub keys: BTreeMap<String, String>,
}

/// `on = [0, 2]`, `on = 3` or `on = "rank % 2 == 0"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RawSelector {
    Rank(i64),
    Ranks(Vec<i64>),
    Expr(String),
}

/// `rank = 3` or `rank = "{rank}"`-style values that depend on the rank.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RawIntOrExpr {
    Int(i64),
    Expr(String),
}

/// `step = "mesh"` (an id) or `step = 3` (1-based position).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RawStepRef {
    Index(i64),
    Id(String),
}

/// `error = "text"` or `error = ["text", "other text"]` (any one of them).
#[derive(Debug, Clone)]
pub enum RawErrors {
    One(String),
    Any(Vec<String>),
}

/// By hand, not `untagged`: a wrong value is named ("expected a text or a list of texts"),
/// not "did not match any variant".
impl<'de> Deserialize<'de> for RawErrors {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Texts;
        impl<'de> serde::de::Visitor<'de> for Texts {
            type Value = RawErrors;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a text or a list of texts (the error contains one of them)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawErrors, E> {
                Ok(RawErrors::One(v.to_string()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<RawErrors, A::Error> {
                let mut texts = Vec::new();
                while let Some(t) = a.next_element::<String>()? {
                    texts.push(t);
                }
                Ok(RawErrors::Any(texts))
            }
        }
        d.deserialize_any(Texts)
    }
}

/// `input_split_sizes = [1, 2]` or `= "rank + j + 1"` (a formula over the rank and `j`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RawSplits {
    List(Vec<i64>),
    Expr(String),
}

/// One entry of `batch_isend_irecv`'s `ops = [{ op = "isend", peer = 1, tag = 3 }, ...]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawP2pOp {
    pub op: Spanned<String>,
    pub peer: Spanned<RawIntOrExpr>,
    pub tag: Option<Spanned<i64>>,
}

/// One `[[step]]`: the union of every op's fields. load.rs checks which belong to `op`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStep {
    pub op: Option<Spanned<String>>,
    pub id: Option<Spanned<String>>,
    pub on: Option<Spanned<RawSelector>>,
    // init_process_group / new_group
    pub backend: Option<Spanned<String>>,
    pub init_method: Option<Spanned<String>>,
    pub device_id: Option<Spanned<String>>,
    pub timeout_s: Option<Spanned<f64>>,
    pub rank: Option<Spanned<RawIntOrExpr>>,
    pub world_size: Option<Spanned<RawIntOrExpr>>,
    pub ranks: Option<Spanned<Vec<i64>>>,
    pub use_local_synchronization: Option<Spanned<bool>>,
    pub sort_ranks: Option<Spanned<bool>>,
    // split_group: lists of parent-group ranks
    pub split_ranks: Option<Spanned<Vec<Vec<i64>>>>,
    // shrink_group
    pub ranks_to_exclude: Option<Spanned<Vec<i64>>>,
    pub shrink_flags: Option<Spanned<i64>>,
    // monitored_barrier
    pub wait_all_ranks: Option<Spanned<bool>>,
    #[serde(rename = "as")]
    pub as_name: Option<Spanned<String>>,
    // collectives
    pub group: Option<Spanned<String>>,
    pub dtype: Option<Spanned<String>>,
    pub shape: Option<Spanned<Vec<i64>>>,
    pub device: Option<Spanned<String>>,
    pub fill: Option<Spanned<String>>,
    pub reduce_op: Option<Spanned<String>>,
    pub src: Option<Spanned<i64>>,
    pub dst: Option<Spanned<i64>>,
    pub expect: Option<Spanned<String>>,
    pub expect_ulps: Option<Spanned<i64>>,
    pub count: Option<Spanned<i64>>,
    pub input_split_sizes: Option<Spanned<RawSplits>>,
    pub output_split_sizes: Option<Spanned<RawSplits>>,
    pub async_op: Option<Spanned<bool>>,
    /// send / recv
    pub tag: Option<Spanned<i64>>,
    pub work: Option<Spanned<String>>,
    pub ops: Option<Spanned<Vec<Spanned<RawP2pOp>>>>,
    // store_set / store_get / store_add / store_check / store_wait (load/store.rs)
    pub key: Option<Spanned<String>>,
    pub keys: Option<Spanned<Vec<String>>>,
    pub value: Option<Spanned<String>>,
    pub amount: Option<Spanned<i64>>,
    pub expected_value: Option<Spanned<String>>,
    pub desired_value: Option<Spanned<String>>,
    // tcp_store / prefix_store, and the store a store step calls (load/store.rs)
    pub host: Option<Spanned<String>>,
    pub port: Option<Spanned<RawIntOrExpr>>,
    pub is_master: Option<Spanned<bool>>,
    pub wait_for_workers: Option<Spanned<bool>>,
    pub prefix: Option<Spanned<String>>,
    pub store: Option<Spanned<String>>,
    // log / sleep
    pub message: Option<Spanned<String>>,
    pub ms: Option<Spanned<i64>>,
    // raise: `error = "ValueError: text"` (load/raise.rs)
    pub error: Option<Spanned<String>>,
    // exit: `code = 3` or `signal = "SIGKILL"` (load/raise.rs)
    pub code: Option<Spanned<i64>>,
    pub signal: Option<Spanned<String>>,
    pub teardown: Option<Spanned<bool>>,
    // sglang (load/sglang.rs)
    pub version: Option<Spanned<String>>,
    pub tp: Option<Spanned<i64>>,
    pub ulysses: Option<Spanned<i64>>,
    pub ring: Option<Spanned<i64>>,
    pub sp: Option<Spanned<i64>>,
    pub cfg: Option<Spanned<i64>>,
    pub dp: Option<Spanned<i64>>,
    pub pp: Option<Spanned<i64>>,
    pub vae: Option<Spanned<i64>>,
    pub usp_fallback: Option<Spanned<bool>>,
    pub scatter_dim: Option<Spanned<i64>>,
    pub gather_dim: Option<Spanned<i64>>,
    pub direction: Option<Spanned<String>>,
    pub batch: Option<Spanned<i64>>,
    pub seq: Option<Spanned<i64>>,
    pub heads: Option<Spanned<i64>>,
    pub head_dim: Option<Spanned<i64>>,
    pub layers: Option<Spanned<i64>>,
    pub payload_bytes: Option<Spanned<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExpect {
    pub on: Option<Spanned<RawSelector>>,
    pub outcome: Spanned<String>,
    pub error: Option<Spanned<RawErrors>>,
    pub step: Option<Spanned<RawStepRef>>,
    /// `running`: the rank had not ended this many seconds after the run started.
    pub after_s: Option<Spanned<f64>>,
}

/// One `[[faults]]` entry: the union of every fault kind's fields. load/faults.rs checks which
/// belong to `kind`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFault {
    pub kind: Option<Spanned<String>>,
    pub on: Option<Spanned<RawSelector>>,
    pub node: Option<Spanned<i64>>,
    pub a: Option<Spanned<Vec<i64>>>,
    pub b: Option<Spanned<Vec<i64>>>,
    pub at_ms: Option<Spanned<i64>>,
    pub until_ms: Option<Spanned<i64>>,
    pub at_step: Option<Spanned<RawStepRef>>,
    pub oneway: Option<Spanned<bool>>,
    pub rate: Option<Spanned<f64>>,
    pub max_ms: Option<Spanned<i64>>,
    pub fixed_ms: Option<Spanned<i64>>,
    pub factor: Option<Spanned<f64>>,
    pub step_ms: Option<Spanned<i64>>,
    pub delay_ms: Option<Spanned<i64>>,
    pub env: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
}
