//! Random torch-eligible programs for the differential oracle (differential.rs): a seeded
//! generator of gloo/CPU scenarios nobody tuned scen to. Each program is 2-4 ranks, an init,
//! sometimes a subgroup (with non-members), a few collectives and point-to-point pairs with
//! random shapes, dtypes, ops and roots, sometimes an async call and its wait (isend / irecv and
//! async barriers too), and, in about half of them, one divergence of the kind real jobs have:
//! a rank that skips a call, makes an extra one, passes another shape, dtype, root or reduce op,
//! finishes early, sleeps, raises, is killed, or sends what nobody receives. The text is the
//! scenario; the same seed gives the same text.

/// SplitMix64: small, seedable, the same sequence on every machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// What a generated program is about, for the summary and the saved file's header.
pub struct Program {
    pub text: String,
    pub summary: String,
}

/// One call every member makes (before any divergence is applied).
struct Call {
    op: &'static str,
    group: Option<&'static str>,
    /// Global ranks of the group (all ranks for WORLD).
    members: Vec<usize>,
    shape: Vec<usize>,
    dtype: &'static str,
    reduce_op: Option<&'static str>,
    root: Option<usize>,
    /// A send/recv pair: (src, dst).
    pair: Option<(usize, usize)>,
    async_work: Option<String>,
    /// A monitored_barrier's `wait_all_ranks`.
    wait_all: bool,
    /// A send/recv pair as `blocking` calls, an `isend` waited after the recv, an `irecv`
    /// waited after the send, or an `exchange` (both ranks isend, recv, then wait: the pattern
    /// blocking sends deadlock on); a barrier's `async` (waited right after).
    p2p: &'static str,
}

const OPS: [&str; 10] = [
    "all_reduce",
    "broadcast",
    "all_gather",
    "reduce_scatter",
    "reduce",
    "gather",
    "scatter",
    "all_to_all_single",
    "barrier",
    "send_recv",
];

/// The program number `k` of run `seed`; `launcher` (`torchrun` or `processes`) is written as
/// its `[world] launcher`, none leaves the scenario's default. The launcher draws nothing from
/// the generator: the same seed gives the same program under each.
pub fn program(seed: u64, k: u64, launcher: Option<&str>) -> Program {
    let mut rng = Rng::new(seed.wrapping_mul(1_000_003).wrapping_add(k));
    // Draws added later come from a stream of their own, so earlier programs stay the same.
    let mut later = Rng::new(seed.wrapping_mul(7_000_003).wrapping_add(k) ^ 0x6d62);
    let n = 2 + rng.below(3);
    let world: Vec<usize> = (0..n).collect();
    let mut groups: Vec<(&'static str, Vec<usize>)> = Vec::new();
    if rng.chance(35) {
        let mut members: Vec<usize> = world.iter().copied().filter(|_| rng.chance(60)).collect();
        if members.is_empty() {
            members.push(rng.below(n));
        }
        groups.push(("g", members));
    }
    let count = 1 + rng.below(4);
    let mut calls: Vec<Call> = Vec::new();
    for i in 0..count {
        let mut op = *rng.pick(&OPS);
        if op == "barrier" && later.chance(50) {
            op = "monitored_barrier";
        }
        let (group, members) = match groups.first() {
            Some((name, m)) if op != "send_recv" && rng.chance(50) => (Some(*name), m.clone()),
            _ => (None, world.clone()),
        };
        let g = members.len();
        let shape = match op {
            // dim 0 divides by the group size without split sizes.
            "all_to_all_single" => vec![g * (1 + rng.below(2))],
            _ => rng.pick(&[vec![4], vec![2, 3], vec![8], vec![1]]).clone(),
        };
        let dtype = *rng.pick(&["f32", "f32", "i64", "f64"]);
        let reduce_op = matches!(op, "all_reduce" | "reduce_scatter" | "reduce").then(|| {
            if dtype == "f32" {
                *rng.pick(&["sum", "max", "min", "product", "avg"])
            } else {
                *rng.pick(&["sum", "max", "min", "product"])
            }
        });
        let root = matches!(op, "broadcast" | "reduce" | "gather" | "scatter")
            .then(|| *rng.pick(&members));
        let pair = (op == "send_recv").then(|| {
            let a = rng.below(n);
            (a, (a + 1 + rng.below(n - 1)) % n)
        });
        let async_work = (op == "all_reduce" && rng.chance(30)).then(|| format!("w{i}"));
        let wait_all = op == "monitored_barrier" && later.chance(50);
        let p2p = match op {
            "send_recv" => *later.pick(&["blocking", "blocking", "isend", "irecv", "exchange"]),
            "barrier" if later.chance(30) => "async",
            _ => "blocking",
        };
        calls.push(Call {
            op,
            group,
            members,
            shape,
            dtype,
            reduce_op,
            root,
            pair,
            async_work,
            wait_all,
            p2p,
        });
    }
    let mut out = Vec::new();
    let divergence = if rng.chance(55) {
        Some(*rng.pick(&[
            "skip",
            "extra",
            "shape",
            "dtype",
            "root",
            "reduce_op",
            "early",
            "sleep",
            "crash",
            "unmatched_send",
        ]))
    } else {
        None
    };
    let victim = rng.below(n);
    let at = rng.below(calls.len());
    out.push(step("init_process_group", &[("backend", q("gloo"))], None));
    for (name, members) in &groups {
        let list: Vec<String> = members.iter().map(usize::to_string).collect();
        out.push(step(
            "new_group",
            &[("ranks", format!("[{}]", list.join(", "))), ("as", q(name))],
            None,
        ));
    }
    let mut faults = Vec::new();
    for (i, c) in calls.iter().enumerate() {
        let here = i == at;
        let not_victim = format!("rank != {victim}");
        let only_victim = format!("rank == {victim}");
        match divergence {
            Some("skip") if here => out.extend(emit(c, Some(&not_victim), |_| {})),
            Some("extra") if here => {
                out.extend(emit(c, None, |_| {}));
                out.extend(emit(c, Some(&only_victim), |_| {}));
            }
            Some("shape") if here => {
                out.extend(emit(c, Some(&not_victim), |_| {}));
                out.extend(emit(c, Some(&only_victim), |c| {
                    c.shape = other_shape(&c.shape)
                }));
            }
            Some("dtype") if here => {
                out.extend(emit(c, Some(&not_victim), |_| {}));
                out.extend(emit(c, Some(&only_victim), |c| {
                    c.dtype = if c.dtype == "f32" { "i32" } else { "f32" }
                }));
            }
            Some("root") if here && c.root.is_some() => {
                let other = c.members[(c.members.iter().position(|m| Some(*m) == c.root).unwrap()
                    + 1)
                    % c.members.len()];
                out.extend(emit(c, Some(&not_victim), |_| {}));
                out.extend(emit(c, Some(&only_victim), |c| c.root = Some(other)));
            }
            Some("reduce_op") if here && c.reduce_op.is_some() => {
                out.extend(emit(c, Some(&not_victim), |_| {}));
                out.extend(emit(c, Some(&only_victim), |c| {
                    c.reduce_op = Some(if c.reduce_op == Some("max") {
                        "min"
                    } else {
                        "max"
                    })
                }));
            }
            Some("early") if i >= at => out.extend(emit(c, Some(&not_victim), |_| {})),
            Some("sleep") if here => {
                out.push(step(
                    "sleep",
                    &[("ms", (500 + 500 * rng.below(4)).to_string())],
                    Some(&only_victim),
                ));
                out.extend(emit(c, None, |_| {}));
            }
            Some("raise") if here => {
                out.push(step(
                    "raise",
                    &[("error", q(&format!("ValueError: rank {victim} gave up")))],
                    Some(&only_victim),
                ));
                out.extend(emit(c, None, |_| {}));
            }
            Some("crash") if here => {
                let id = format!("c{i}");
                faults.push(format!(
                    "[[faults]]\nkind = \"crash\"\non = [{victim}]\nat_step = \"{id}\"\n"
                ));
                let mut steps = emit(c, None, |_| {});
                steps[0] =
                    steps[0].replacen("[[step]]\n", &format!("[[step]]\nid = \"{id}\"\n"), 1);
                out.extend(steps);
            }
            _ => out.extend(emit(c, None, |_| {})),
        }
    }
    if divergence == Some("unmatched_send") {
        let dst = (victim + 1) % n;
        out.push(step(
            "send",
            &[("device", q("cpu")), ("dst", dst.to_string())],
            Some(&format!("rank == {victim}")),
        ));
    }
    if rng.chance(50) {
        out.push(step("barrier", &[], None));
    }
    let ops: Vec<&str> = calls.iter().map(|c| c.op).collect();
    let summary = format!(
        "{n} ranks{}; {}; divergence: {}",
        groups
            .first()
            .map(|(_, m)| format!(", subgroup {m:?}"))
            .unwrap_or_default(),
        ops.join(", "),
        divergence
            .map(|d| format!("{d} (rank {victim}, call {})", at + 1))
            .unwrap_or_else(|| "none".into())
    );
    let text = format!(
        "# Generated by tests/torch/gen.rs (seed {seed}, program {k}): {summary}.\n\
         [scenario]\ndescription = \"generated program {seed}/{k}\"\n\n\
         [world]\nranks_per_node = {n}\nplatform = \"cpu\"\n{}\n{}{}",
        launcher
            .map(|l| format!("launcher = \"{l}\"\n"))
            .unwrap_or_default(),
        out.join("\n"),
        if faults.is_empty() {
            String::new()
        } else {
            format!("\n{}", faults.join("\n"))
        }
    );
    Program { text, summary }
}

/// A call as steps (a send/recv pair is two), after `tweak` changed it for one side.
fn emit(c: &Call, on: Option<&str>, tweak: impl Fn(&mut Call)) -> Vec<String> {
    let mut c = Call {
        op: c.op,
        group: c.group,
        members: c.members.clone(),
        shape: c.shape.clone(),
        dtype: c.dtype,
        reduce_op: c.reduce_op,
        root: c.root,
        pair: c.pair,
        async_work: c.async_work.clone(),
        wait_all: c.wait_all,
        p2p: c.p2p,
    };
    tweak(&mut c);
    let mut f: Vec<(&str, String)> = Vec::new();
    if let Some(g) = c.group {
        f.push(("group", q(g)));
    }
    if c.op == "barrier" && c.p2p == "async" {
        let w = q("b");
        let mut fa = f.clone();
        fa.extend([("async_op", "true".into()), ("work", w.clone())]);
        return vec![step("barrier", &fa, on), step("wait", &[("work", w)], on)];
    }
    if c.op == "barrier" {
        return vec![step("barrier", &f, on)];
    }
    if c.op == "monitored_barrier" {
        // 20 min: 2 s at the oracle's time scale, below the groups' 30 min (3 s).
        f.push(("timeout_s", "1200".into()));
        if c.wait_all {
            f.push(("wait_all_ranks", "true".into()));
        }
        return vec![step("monitored_barrier", &f, on)];
    }
    let shape: Vec<String> = c.shape.iter().map(usize::to_string).collect();
    f.push(("device", q("cpu")));
    f.push(("shape", format!("[{}]", shape.join(", "))));
    f.push(("dtype", q(c.dtype)));
    f.push(("fill", q("rank + i")));
    if let Some((src, dst)) = c.pair {
        let both = |extra: (&'static str, String), who: usize| {
            let mut g = f.clone();
            g.push(extra);
            let sel = match on {
                Some(o) => format!("rank == {who} and {o}"),
                None => format!("rank == {who}"),
            };
            (g, sel)
        };
        let (fs, ss) = both(("dst", dst.to_string()), src);
        let (fr, sr) = both(("src", src.to_string()), dst);
        return p2p_steps(c.p2p, (fs, ss), (fr, sr), both);
    }
    if let Some(op) = c.reduce_op {
        f.push(("reduce_op", q(op)));
    }
    if let Some(r) = c.root {
        let key = if matches!(c.op, "broadcast" | "scatter") {
            "src"
        } else {
            "dst"
        };
        f.push((key, r.to_string()));
    }
    match &c.async_work {
        Some(w) => {
            f.push(("async_op", "true".into()));
            f.push(("work", q(w)));
            vec![step(c.op, &f, on), step("wait", &[("work", q(w))], on)]
        }
        None => vec![step(c.op, &f, on)],
    }
}

/// A send/recv pair's steps in its mode (Call::p2p): `send` is the sender's fields and rank
/// selector, `recv` the receiver's; `both` makes a field set and selector for one rank.
fn p2p_steps(
    mode: &str,
    (fs, ss): (Vec<(&'static str, String)>, String),
    (fr, sr): (Vec<(&'static str, String)>, String),
    both: impl Fn((&'static str, String), usize) -> (Vec<(&'static str, String)>, String),
) -> Vec<String> {
    let with_work = |f: &[(&'static str, String)], w: &str| {
        let mut g = f.to_vec();
        g.push(("work", q(w)));
        g
    };
    let wait = |w: &str, sel: &str| step("wait", &[("work", q(w))], Some(sel));
    match mode {
        "isend" => vec![
            step("isend", &with_work(&fs, "s"), Some(&ss)),
            step("recv", &fr, Some(&sr)),
            wait("s", &ss),
        ],
        "irecv" => vec![
            step("irecv", &with_work(&fr, "r"), Some(&sr)),
            step("send", &fs, Some(&ss)),
            wait("r", &sr),
        ],
        "exchange" => {
            // The receiver sends back: both post an isend, then receive, then wait.
            let src: usize = field(&fr, "src");
            let dst: usize = field(&fs, "dst");
            let (back_s, back_ss) = both(("dst", src.to_string()), dst);
            let (back_r, back_sr) = both(("src", dst.to_string()), src);
            vec![
                step("isend", &with_work(&fs, "s"), Some(&ss)),
                step("isend", &with_work(&back_s, "s"), Some(&back_ss)),
                step("recv", &back_r, Some(&back_sr)),
                step("recv", &fr, Some(&sr)),
                wait("s", &ss),
                wait("s", &back_ss),
            ]
        }
        _ => vec![step("send", &fs, Some(&ss)), step("recv", &fr, Some(&sr))],
    }
}

/// A numeric field's value.
fn field(f: &[(&'static str, String)], key: &str) -> usize {
    f.iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

fn other_shape(s: &[usize]) -> Vec<usize> {
    let n: usize = s.iter().product();
    if n == 1 {
        vec![2]
    } else {
        vec![n * 2]
    }
}

fn q(s: &str) -> String {
    format!("\"{s}\"")
}

fn step(op: &str, fields: &[(&str, String)], on: Option<&str>) -> String {
    let mut s = format!("[[step]]\nop = \"{op}\"\n");
    if let Some(o) = on {
        s += &format!("on = \"{o}\"\n");
    }
    for (k, v) in fields {
        s += &format!("{k} = {v}\n");
    }
    s
}
