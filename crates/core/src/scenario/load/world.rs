//! `[world]` validation: nodes, ranks, platforms, link costs, services, env layers and rank
//! selectors, each error naming file:line:col like the rest of load.rs.

use super::{Cx, ScenarioError, R};
use crate::runtime::torchrun::AgentTiming;
use crate::scenario::env::{build_rank_envs, EnvLayer};
use crate::scenario::expr::{interpolate, Expr};
use crate::scenario::limits;
use crate::scenario::model::*;
use crate::scenario::raw::*;
use std::collections::BTreeMap;
use toml::Spanned;

impl Cx<'_> {
    pub(super) fn world(&self, sw: Spanned<RawWorld>) -> R<World> {
        let w = sw.into_inner();
        let n_nodes = self.positive(&w.nodes, 1, "nodes")?;
        let per_node = self.positive(&w.ranks_per_node, 1, "ranks_per_node")?;
        let (nodes, node_env) = self.nodes(&w, n_nodes, per_node)?;
        let (master_addr, master_port) = self.master(&w, n_nodes)?;
        let world_size = self.world_size(&w, n_nodes, per_node)?;
        let global = self.env_layer(&w.env, Selector::All)?;
        let mut rank_layers = Vec::new();
        for re in &w.rank {
            let re = re.get_ref();
            let on = self.selector(&re.on, world_size)?;
            rank_layers.push(self.env_layer(&re.env, on)?);
        }
        let ranks = build_rank_envs(
            n_nodes,
            per_node,
            &master_addr,
            master_port,
            &global,
            &node_env,
            &rank_layers,
        )
        .map_err(|(layer_offset, msg)| self.err(layer_offset, msg))?;
        let services = w
            .service
            .iter()
            .map(|s| self.service(s.get_ref(), n_nodes))
            .collect::<R<Vec<_>>>()?;
        let launcher = self.launcher(&w)?;
        let (links, op_costs) = match &w.links {
            Some(l) => self.link_costs(l.get_ref())?,
            None => Default::default(),
        };
        let mut world = World {
            nodes,
            ranks_per_node: per_node,
            ranks,
            services,
            launcher,
            links,
            op_costs,
            exit_ms: self.exit_ms(w.exit_ms.as_ref())?,
            rank_exit_ms: BTreeMap::new(),
            globals_freed_ms: self.teardown_ms(w.globals_freed_ms.as_ref(), "globals_freed_ms")?,
            rank_globals_freed_ms: BTreeMap::new(),
            agent: self.agent_timing(&w, launcher)?,
        };
        for re in &w.rank {
            let re = re.get_ref();
            if re.exit_ms.is_none() && re.globals_freed_ms.is_none() {
                continue;
            }
            let on = self.selector(&re.on, world_size)?;
            let hit: Vec<usize> = world
                .ranks
                .iter()
                .filter(|spec| on.matches(spec, &world))
                .map(|spec| spec.rank)
                .collect();
            if re.exit_ms.is_some() {
                let ms = self.exit_ms(re.exit_ms.as_ref())?;
                world.rank_exit_ms.extend(hit.iter().map(|r| (*r, ms)));
            }
            if let Some(ms) = self.teardown_ms(re.globals_freed_ms.as_ref(), "globals_freed_ms")? {
                world
                    .rank_globals_freed_ms
                    .extend(hit.iter().map(|r| (*r, ms)));
            }
        }
        Ok(world)
    }

    /// The nodes (the world's platform and devices, then each `[[world.node]]`'s own) and each
    /// node's env layers.
    #[allow(clippy::type_complexity)]
    fn nodes(
        &self,
        w: &RawWorld,
        n_nodes: usize,
        per_node: usize,
    ) -> R<(Vec<Node>, BTreeMap<usize, Vec<EnvLayer>>)> {
        let platform = match &w.platform {
            Some(p) => self.platform(p)?,
            None => Platform::Xpu,
        };
        let devices = match &w.devices_per_node {
            Some(d) if *d.get_ref() >= 0 => *d.get_ref() as usize,
            Some(d) => return Err(self.at(d, "devices_per_node must be >= 0")),
            None if platform == Platform::Cpu => 0,
            None => per_node,
        };
        let mut nodes: Vec<Node> = (0..n_nodes)
            .map(|index| Node {
                index,
                name: format!("node{index}"),
                platform,
                devices,
            })
            .collect();
        let mut node_env: BTreeMap<usize, Vec<EnvLayer>> = BTreeMap::new();
        for rn in &w.node {
            let rn = rn.get_ref();
            let idx = *rn.node.get_ref();
            if idx < 0 || idx as usize >= n_nodes {
                return Err(self.at(
                    &rn.node,
                    format!("node {idx} is out of range (nodes = {n_nodes})"),
                ));
            }
            let node = &mut nodes[idx as usize];
            if let Some(p) = &rn.platform {
                node.platform = self.platform(p)?;
            }
            if let Some(d) = &rn.devices {
                if *d.get_ref() < 0 {
                    return Err(self.at(d, "devices must be >= 0"));
                }
                node.devices = *d.get_ref() as usize;
            }
            node_env
                .entry(idx as usize)
                .or_default()
                .push(self.env_layer(&rn.env, Selector::All)?);
        }
        Ok((nodes, node_env))
    }

    /// `master_addr` and `master_port`, with their defaults (127.0.0.1 on one node, else node0;
    /// 29500).
    fn master(&self, w: &RawWorld, n_nodes: usize) -> R<(String, u16)> {
        let master_addr = match &w.master_addr {
            Some(a) => self.host(a, n_nodes)?,
            None if n_nodes == 1 => "127.0.0.1".to_string(),
            None => "node0".to_string(),
        };
        let master_port = match &w.master_port {
            Some(p) if (0..=65535).contains(p.get_ref()) => *p.get_ref() as u16,
            Some(p) => {
                return Err(self.at(
                    p,
                    format!("master_port must be 0..65535, got {}", p.get_ref()),
                ))
            }
            None => 29500,
        };
        Ok((master_addr, master_port))
    }

    /// nodes x ranks_per_node, within scen's world limit.
    fn world_size(&self, w: &RawWorld, n_nodes: usize, per_node: usize) -> R<usize> {
        let world_size = n_nodes * per_node;
        if world_size > limits::MAX_WORLD_SIZE {
            let at = w
                .ranks_per_node
                .as_ref()
                .or(w.nodes.as_ref())
                .map_or(0, |v| v.span().start);
            return Err(self.err(
                at,
                format!(
                    "world too large: {n_nodes} nodes x {per_node} ranks = {world_size} ranks (scen's limit is {} ranks)",
                    limits::MAX_WORLD_SIZE
                ),
            ));
        }
        Ok(world_size)
    }

    /// `launcher`: processes (the default) or torchrun.
    fn launcher(&self, w: &RawWorld) -> R<Launcher> {
        let Some(l) = &w.launcher else {
            return Ok(Launcher::Processes);
        };
        Launcher::parse(l.get_ref()).ok_or_else(|| {
            self.at(
                l,
                format!(
                    "unknown launcher `{}` (known: processes, torchrun)",
                    l.get_ref()
                ),
            )
        })
    }

    /// `agent_check_ms` / `agent_stop_ms`: torchrun's agent's check and stop after a failure,
    /// 0 to 60000 ms each, and only where torchrun launches the job.
    fn agent_timing(&self, w: &RawWorld, launcher: Launcher) -> R<AgentTiming> {
        let mut t = AgentTiming::default();
        for (key, v, out) in [
            ("agent_check_ms", &w.agent_check_ms, &mut t.check_ms),
            ("agent_stop_ms", &w.agent_stop_ms, &mut t.stop_ms),
        ] {
            let Some(v) = v else { continue };
            if launcher != Launcher::Torchrun {
                return Err(self.at(
                    v,
                    format!("{key} is torchrun's agent's: it needs launcher = \"torchrun\""),
                ));
            }
            *out = match *v.get_ref() {
                ms @ 0..=60_000 => ms as u64,
                _ => {
                    return Err(self.at(
                        v,
                        format!("{key} must be between 0 and 60000 (torchrun's agent's check after the first failed worker's exit, its stop after the check; in ms)"),
                    ))
                }
            };
        }
        Ok(t)
    }

    /// `exit_ms`: a process's teardown, 0 to 60000 ms.
    fn exit_ms(&self, v: Option<&Spanned<i64>>) -> R<u64> {
        Ok(self
            .teardown_ms(v, "exit_ms")?
            .unwrap_or(crate::scenario::model::DEFAULT_EXIT_MS))
    }

    /// A time within a process's teardown (`field`), 0 to 60000 ms.
    fn teardown_ms(&self, v: Option<&Spanned<i64>>, field: &str) -> R<Option<u64>> {
        match v {
            None => Ok(None),
            Some(v) if (0..=MAX_EXIT_MS as i64).contains(v.get_ref()) => {
                Ok(Some(*v.get_ref() as u64))
            }
            Some(v) => Err(self.at(
                v,
                format!(
                    "{field} must be between 0 and 60000 (a time in a process's teardown, in ms)"
                ),
            )),
        }
    }

    /// `[world.links]`: a model file's links and per-op costs (`model = "model.toml"`, relative
    /// to the scenario), then per class `alpha_us` (>= 0) and `beta_gbps` (> 0) on top;
    /// defaults elsewhere.
    pub(super) fn link_costs(
        &self,
        raw: &RawLinks,
    ) -> R<(
        crate::perf::model::TimingModel,
        Vec<crate::perf::model::OpCost>,
    )> {
        use crate::perf::model::{LinkClass, ModelError, ModelFile};
        let (mut m, ops) = match &raw.model {
            None => Default::default(),
            Some(rel) => {
                let dir = std::path::Path::new(self.file)
                    .parent()
                    .unwrap_or(std::path::Path::new(""));
                let path = dir.join(rel.get_ref());
                match ModelFile::load(&path) {
                    Ok(f) => (f.links, f.ops),
                    Err(ModelError::Parse {
                        file,
                        line,
                        col,
                        message,
                    }) => {
                        return Err(ScenarioError {
                            file,
                            line,
                            col,
                            message: format!("in the model file of [world.links]: {message}"),
                        })
                    }
                    Err(ModelError::Read { file, message }) => {
                        return Err(
                            self.at(rel, format!("cannot read the model file {file}: {message}"))
                        )
                    }
                }
            }
        };
        let classes = [
            (LinkClass::Intra, &raw.intra),
            (LinkClass::Inter, &raw.inter),
            (LinkClass::Host, &raw.host),
            (LinkClass::Store, &raw.store),
        ];
        for (class, c) in classes {
            let Some(c) = c else { continue };
            let cost = m.cost_mut(class);
            if let Some(a) = &c.get_ref().alpha_us {
                if !crate::perf::model::alpha_in_range(*a.get_ref()) {
                    return Err(self.at(a, crate::perf::model::ALPHA_RANGE));
                }
                cost.alpha_us = *a.get_ref();
            }
            if let Some(b) = &c.get_ref().beta_gbps {
                if !crate::perf::model::beta_in_range(*b.get_ref()) {
                    return Err(self.at(b, crate::perf::model::BETA_RANGE));
                }
                cost.beta_gbps = *b.get_ref();
            }
        }
        Ok((m, ops))
    }

    pub(super) fn host(&self, a: &Spanned<String>, n_nodes: usize) -> R<String> {
        let h = a.get_ref();
        let known = h == "localhost"
            || h == "127.0.0.1"
            || h.strip_prefix("node")
                .and_then(|n| n.parse::<usize>().ok())
                .is_some_and(|n| n < n_nodes);
        if known {
            Ok(h.clone())
        } else {
            Err(self.at(
                a,
                format!(
                    "unknown host `{h}`: use node0..node{}, localhost or 127.0.0.1",
                    n_nodes - 1
                ),
            ))
        }
    }

    pub(super) fn service(&self, s: &RawService, n_nodes: usize) -> R<Service> {
        if s.kind.get_ref() != "tcp_store" {
            return Err(self.at(&s.kind, "unknown service kind (only `tcp_store`)"));
        }
        let node = *s.node.get_ref();
        if node < 0 || node as usize >= n_nodes {
            return Err(self.at(&s.node, format!("node {node} is out of range")));
        }
        let port = *s.port.get_ref();
        if !(1..=65535).contains(&port) {
            return Err(self.at(&s.port, "port must be 1..65535"));
        }
        let ws = *s.world_size.get_ref();
        if ws < 1 {
            return Err(self.at(&s.world_size, "world_size must be >= 1"));
        }
        Ok(Service {
            node: node as usize,
            port: port as u16,
            world_size: ws as usize,
            label: s.label.clone().unwrap_or_else(|| "another job".into()),
            keys: s.keys.clone(),
        })
    }

    pub(super) fn env_layer(
        &self,
        env: &BTreeMap<String, Spanned<String>>,
        on: Selector,
    ) -> R<EnvLayer> {
        let mut vars = Vec::new();
        for (k, v) in env {
            // Check templates now so a typo is reported at its place, not per rank later.
            interpolate(v.get_ref(), &RANK_VARS, &|_| 0.0).map_err(|e| {
                self.err(
                    self.in_str(v.span().start, e.offset),
                    format!("in `{k}`: {e}"),
                )
            })?;
            if !v.get_ref().contains('{') {
                crate::c10d::ccl_env::check_syntax(k, v.get_ref())
                    .map_err(|why| self.err(v.span().start, format!("in `{k}`: {why}")))?;
            }
            vars.push((k.clone(), v.get_ref().clone(), v.span().start));
        }
        Ok(EnvLayer { on, vars })
    }

    pub(super) fn rank_in_range(&self, v: i64, at: usize, world_size: usize) -> R<usize> {
        if v < 0 || v as usize >= world_size {
            Err(self.err(
                at,
                format!(
                    "rank {v} is out of range: the world has ranks 0..{} (world_size={world_size})",
                    world_size - 1
                ),
            ))
        } else {
            Ok(v as usize)
        }
    }

    /// A `new_group` rank: any non-negative number is a program PyTorch runs. One outside the
    /// world is PyTorch's own run-time ValueError on every rank (`Rank 5 is out of range. Valid
    /// ranks are 0 to 1 (world_size=2)`), so it is the verdict's to report, not the loader's.
    pub(super) fn group_rank(&self, v: i64, at: usize) -> R<usize> {
        usize::try_from(v).map_err(|_| {
            self.err(
                at,
                format!("rank {v} is negative: a new_group rank is a global rank, 0 or more"),
            )
        })
    }

    pub(super) fn selector(&self, s: &Spanned<RawSelector>, world_size: usize) -> R<Selector> {
        let at = s.span().start;
        match s.get_ref() {
            RawSelector::Rank(r) => Ok(Selector::Ranks(vec![
                self.rank_in_range(*r, at, world_size)?
            ])),
            RawSelector::Ranks(list) => Ok(Selector::Ranks(
                list.iter()
                    .map(|r| self.rank_in_range(*r, at, world_size))
                    .collect::<R<_>>()?,
            )),
            RawSelector::Expr(src) => Expr::parse(src, &RANK_VARS)
                .map(Selector::Expr)
                .map_err(|e| self.err(self.in_str(at, e.offset), e.message)),
        }
    }
}
