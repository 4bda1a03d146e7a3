//! Per-rank process environments, defaulted the way torchrun sets them.
//!
//! torchrun gives every worker MASTER_ADDR, MASTER_PORT, RANK, LOCAL_RANK, WORLD_SIZE,
//! LOCAL_WORLD_SIZE (and GROUP_RANK for the node). The scenario then layers its own values:
//! `[world.env]` for everyone, `[[world.node]] env` per node, `[[world.rank]] env` per selected
//! ranks, later layers winning. Values may use `{rank}`-style templates. String fields of steps
//! may read the environment with `${VAR}` / `${VAR:-default}`, like a shell.

use super::expr::interpolate;
use super::model::{RankSpec, Selector, RANK_VARS};
use std::collections::BTreeMap;

/// One layer of overrides: the ranks it applies to and (name, template, source offset).
#[derive(Debug, Clone)]
pub struct EnvLayer {
    pub on: Selector,
    pub vars: Vec<(String, String, usize)>,
}

/// The variables torchrun sets, in the order reports print them.
pub const TORCHRUN_VARS: [&str; 7] = [
    "MASTER_ADDR",
    "MASTER_PORT",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
];

/// Builds every rank's environment; errors carry the offset of the failing template.
pub fn build_rank_envs(
    nodes: usize,
    per_node: usize,
    master_addr: &str,
    master_port: u16,
    global: &EnvLayer,
    node_layers: &BTreeMap<usize, Vec<EnvLayer>>,
    rank_layers: &[EnvLayer],
) -> Result<Vec<RankSpec>, (usize, String)> {
    let world_size = nodes * per_node;
    let mut out = Vec::with_capacity(world_size);
    for rank in 0..world_size {
        let node = rank / per_node;
        let local_rank = rank % per_node;
        let lookup = |v: &str| -> f64 {
            match v {
                "rank" => rank as f64,
                "local_rank" => local_rank as f64,
                "node" => node as f64,
                "world_size" => world_size as f64,
                "local_world_size" => per_node as f64,
                _ => f64::NAN,
            }
        };
        let mut env = BTreeMap::new();
        let defaults = [
            ("MASTER_ADDR", master_addr.to_string()),
            ("MASTER_PORT", master_port.to_string()),
            ("RANK", rank.to_string()),
            ("LOCAL_RANK", local_rank.to_string()),
            ("WORLD_SIZE", world_size.to_string()),
            ("LOCAL_WORLD_SIZE", per_node.to_string()),
            ("GROUP_RANK", node.to_string()),
        ];
        for (k, v) in defaults {
            env.insert(k.to_string(), v);
        }
        let empty = Vec::new();
        let layers = std::iter::once(global)
            .chain(node_layers.get(&node).unwrap_or(&empty).iter())
            .chain(rank_layers.iter());
        for layer in layers {
            if !layer.on.matches_with(&lookup) {
                continue;
            }
            for (k, template, offset) in &layer.vars {
                let v = interpolate(template, &RANK_VARS, &lookup)
                    .map_err(|e| (*offset + 1 + e.offset, e.message))?;
                env.insert(k.clone(), v);
            }
        }
        out.push(RankSpec {
            rank,
            node,
            local_rank,
            env,
        });
    }
    Ok(out)
}

/// Expands `${VAR}` and `${VAR:-default}` from `env` (unset expands to "").
pub fn expand_env(s: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = &rest[start + 2..start + end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        match (env.get(name).filter(|v| !v.is_empty()), default) {
            (Some(v), _) => out.push_str(v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => {}
        }
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_style_expansion() {
        let mut env = BTreeMap::new();
        env.insert("B".to_string(), "gloo".to_string());
        assert_eq!(expand_env("${B:-xccl}", &env), "gloo");
        assert_eq!(expand_env("${C:-xccl}", &env), "xccl");
        assert_eq!(expand_env("tcp://${C}:1", &env), "tcp://:1");
    }
}
