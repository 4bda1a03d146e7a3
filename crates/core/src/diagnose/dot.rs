//! The wait-for graph as Graphviz DOT (`scen run --graph out.dot`): a node per rank saying where
//! it is, an edge from each stuck rank to each rank it waits for, labelled with the call and
//! whether the awaited rank never joined it; the edges of a cycle in red.

use super::diagnosis::Diagnosis;
use super::hang::{Hang, RankAt};
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
    // Ranks stuck in the same call share a box (a cluster) named after the call.
    let mut clusters: std::collections::BTreeMap<String, Vec<usize>> = Default::default();
    for st in &h.stuck {
        if let Some(c) = &st.call {
            clusters.entry(c.name.clone()).or_default().push(st.rank);
        }
    }
    let mut placed: Vec<usize> = Vec::new();
    for (i, (name, ranks)) in clusters.iter().enumerate() {
        let _ = writeln!(out, "  subgraph cluster_{i} {{");
        let _ = writeln!(
            out,
            "    label=\"{}\"; fontname=\"monospace\"; fontsize=10; style=dashed; color=gray;",
            esc(name)
        );
        for r in ranks {
            let _ = writeln!(out, "    r{r} [{}];", node_attrs(h, *r, file));
            placed.push(*r);
        }
        let _ = writeln!(out, "  }}");
    }
    for r in 0..world_size.max(h.ranks.len()) {
        if !placed.contains(&r) {
            let _ = writeln!(out, "  r{r} [{}];", node_attrs(h, r, file));
        }
    }
    for s in &h.stuck {
        for p in &s.waits_for {
            // The call is the source's cluster label; the edge says why it waits.
            let label = if s.never_joined.contains(p) {
                "never joined".to_string()
            } else {
                match &s.call {
                    Some(_) => "joined, not finished".to_string(),
                    None => esc(&s.what),
                }
            };
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
    let label = match &at {
        RankAt::Stuck { label, line, .. } => {
            format!("rank {r}\\nstuck in {}\\n{}:{line}", esc(label), esc(file))
        }
        RankAt::Failed { label, line, .. } => {
            format!("rank {r}\\nfailed in {}\\n{}:{line}", esc(label), esc(file))
        }
        other => format!("rank {r}\\n{}", esc(&other.describe(file))),
    };
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
