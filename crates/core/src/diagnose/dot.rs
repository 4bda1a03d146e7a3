//! The wait-for graph as Graphviz DOT (`scen run --graph out.dot`): a node per rank saying where
//! it is, an edge from each stuck rank to each rank it waits for, labelled with the call and
//! whether the awaited rank never joined it; the edges of a cycle in red.

use super::hang::{Hang, RankAt};
use super::report::Diagnosis;
use std::fmt::Write;

/// DOT text for the diagnosis' hang (ranks without edges when nothing hangs).
pub fn render(d: &Diagnosis, world_size: usize, file: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "digraph scen {{");
    let _ = writeln!(out, "  rankdir=LR;");
    let _ = writeln!(
        out,
        "  node [shape=box, style=rounded, fontname=\"monospace\", fontsize=10];"
    );
    let _ = writeln!(out, "  edge [fontname=\"monospace\", fontsize=9];");
    let Some(h) = &d.hang else {
        for r in 0..world_size {
            let _ = writeln!(out, "  r{r} [label=\"rank {r}\\nno hang\"];");
        }
        let _ = writeln!(out, "}}");
        return out;
    };
    for r in 0..world_size.max(h.ranks.len()) {
        let _ = writeln!(out, "  r{r} [{}];", node_attrs(h, r, file));
    }
    for s in &h.stuck {
        for p in &s.waits_for {
            let mut label = s
                .call
                .as_ref()
                .map(|c| esc(&c.name))
                .unwrap_or_else(|| esc(&s.label));
            if s.never_joined.contains(p) {
                label.push_str("\\nnever joined");
            }
            let red = in_cycle(h, s.rank, *p);
            let _ = writeln!(
                out,
                "  r{} -> r{p} [label=\"{}\"{}];",
                s.rank,
                label,
                if red {
                    ", color=red, fontcolor=red, penwidth=2"
                } else {
                    ""
                }
            );
        }
    }
    let _ = writeln!(out, "}}");
    out
}

fn node_attrs(h: &Hang, r: usize, file: &str) -> String {
    let at = h.ranks.get(r).cloned().unwrap_or(RankAt::Busy);
    let mut label = format!("rank {r}\\n{}", esc(&at.describe(file)));
    if let Some(s) = h.stuck.iter().find(|s| s.rank == r) {
        if let Some(c) = &s.call {
            let _ = write!(label, "\\nin {}", esc(&c.name));
        }
    }
    let style = match at {
        RankAt::Stuck { .. } => ", color=red",
        RankAt::Finished => ", style=\"rounded,dashed\"",
        RankAt::Failed { .. } => ", color=orange",
        RankAt::Busy => "",
    };
    format!("label=\"{label}\"{style}")
}

fn in_cycle(h: &Hang, a: usize, b: usize) -> bool {
    h.cycle.windows(2).any(|w| w[0] == a && w[1] == b)
}

/// Escapes a DOT string body (the `\n` line breaks are added by the callers).
fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}
