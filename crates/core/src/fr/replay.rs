//! The replay scenario of an import: every rank's recorded calls as steps in the merged order
//! ([`super::import`]), what the dumps do not record assumed and said so in the file's header,
//! and expectations that say what the dumps show. Ranks that completed every call while others
//! are stuck sleep past the timeout, as the dumped job's processes stayed alive.

use super::import::{label, scen_backend, At, Call, Plan};
use crate::diagnose::hang::ranges;
use std::fmt::Write;

/// The scenario text, and where each rank's call is in it.
pub(super) fn scenario(p: &Plan, source: &str) -> (String, At) {
    let mut w = Writer {
        s: header(p, source),
        steps: 0,
    };
    w.step(&init_body(p));
    for (name, g) in &p.groups {
        if label(name, &g.desc) == "WORLD" {
            continue;
        }
        let timeout = match g.timeout_ms {
            0 => String::new(),
            t => format!("timeout_s = {}\n", t.div_ceil(1000)),
        };
        w.step(&format!(
            "op = \"new_group\" # pg {name} (desc \"{}\")\nranks = {:?}\nbackend = \"{}\"\n{timeout}as = \"{}\"\n",
            g.desc,
            g.ranks,
            scen_backend(&g.backend),
            label(name, &g.desc)
        ));
    }
    let mut at = At::new();
    for (who, c) in &p.steps {
        let place = w.step(&call_body(p, who, c));
        for r in who {
            at.insert((*r, c.clone()), place);
        }
    }
    if !p.open.is_empty() && !p.finished.is_empty() {
        w.step(&format!(
            "op = \"sleep\"\non = {:?}\nms = {}\n",
            p.finished,
            p.timeout_ms.max(1000) * 2
        ));
    }
    let mut s = w.s;
    expectations(&mut s, p, &at);
    (s, at)
}

/// Appends steps, counting them and noting each one's `op` line (the line reports point at).
struct Writer {
    s: String,
    steps: usize,
}

impl Writer {
    /// `(step index, line)` of the step just written.
    fn step(&mut self, body: &str) -> (usize, usize) {
        self.s.push_str("\n[[step]]\n");
        let line = self.s.lines().count() + 1;
        self.s.push_str(body);
        self.steps += 1;
        (self.steps - 1, line)
    }
}

fn header(p: &Plan, source: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Imported by `scen import-fr` from {source}: PyTorch flight-recorder dumps (version {}, {}) of {} ranks.",
        p.version, p.backend, p.world
    );
    s.push_str(
        "# Each rank's recorded calls in its own order; what a dump does not record is assumed: tensors\n\
         # are filled with the rank, broadcast/reduce/gather/scatter roots are the group's first rank.\n",
    );
    if !p.missing.is_empty() {
        let _ = writeln!(
            s,
            "# No dump for rank(s) {}: they make only the calls that completed on the others with them.",
            ranges(&p.missing)
        );
    }
    if !p.finished.is_empty() && !p.open.is_empty() {
        let _ = writeln!(
            s,
            "# Rank(s) {} completed every recorded call; they stay alive (a sleep past the timeout) as the\n\
             # dumped job did, so the others wait for them rather than see them exit.",
            ranges(&p.finished)
        );
    }
    let _ = writeln!(
        s,
        "[scenario]\ndescription = \"replay of the flight-recorder dumps in {}\"\n\n[world]\nranks_per_node = {}",
        source.replace('"', "'"),
        p.world
    );
    s
}

fn init_body(p: &Plan) -> String {
    // The default group's own timeout where it has calls, else the longest of the groups'.
    let world_ms = p
        .groups
        .iter()
        .find(|(name, g)| label(name, &g.desc) == "WORLD")
        .map_or(p.timeout_ms, |(_, g)| g.timeout_ms);
    let timeout = if world_ms > 0 {
        format!("timeout_s = {}\n", world_ms.div_ceil(1000))
    } else {
        String::new()
    };
    format!(
        "op = \"init_process_group\"\nbackend = \"{}\"\n{timeout}",
        scen_backend(&p.backend)
    )
}

/// One recorded call made by ranks `who`.
fn call_body(p: &Plan, who: &[usize], c: &Call) -> String {
    let g = &p.groups[&c.group];
    let mut body = format!("op = \"{}\"\n", c.op);
    if who != (0..p.world).collect::<Vec<_>>() {
        let _ = writeln!(body, "on = {who:?}");
    }
    let gl = label(&c.group, &g.desc);
    if gl != "WORLD" {
        let _ = writeln!(body, "group = \"{gl}\"");
    }
    if c.op != "barrier" {
        let _ = writeln!(body, "dtype = \"{}\"\nshape = {:?}", c.dtype, c.shape);
        if scen_backend(&g.backend) == "gloo" {
            body.push_str("device = \"cpu\"\n");
        }
    }
    match c.op.as_str() {
        // Group rank 0, as a global rank (the dumps do not record roots).
        "broadcast" | "scatter" => {
            let _ = writeln!(body, "src = {}", g.ranks.first().copied().unwrap_or(0));
        }
        "reduce" | "gather" => {
            let _ = writeln!(body, "dst = {}", g.ranks.first().copied().unwrap_or(0));
        }
        "send" => {
            let _ = writeln!(body, "dst = {}", c.peer.unwrap_or(0));
        }
        "recv" => {
            let _ = writeln!(body, "src = {}", c.peer.unwrap_or(0));
        }
        _ => {}
    }
    body
}

/// Ranks with an open call fail there at gloo's timeout, or hang (nccl/xccl); the others complete.
fn expectations(s: &mut String, p: &Plan, at: &At) {
    let outcome = if scen_backend(&p.backend) == "gloo" && p.timeout_ms > 0 {
        "fails"
    } else {
        "hangs"
    };
    for (r, c) in &p.open {
        let (idx, _) = at[&(*r, c.call.clone())];
        let _ = write!(
            s,
            "\n[[expect]]\non = [{r}]\noutcome = \"{outcome}\"\nstep = {}\n",
            idx + 1
        );
    }
    for r in &p.finished {
        let _ = write!(s, "\n[[expect]]\non = [{r}]\noutcome = \"completes\"\n");
    }
}
