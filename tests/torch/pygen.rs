//! Random torch.distributed *Python programs* for the user's-path oracle (userpath.rs): what a
//! user writes, not a scenario. Each program is 2-6 ranks on gloo/CPU, one line per statement
//! (so a traceback's line names the statement), with calls drawn from the rows of
//! docs/api-coverage.md: collectives, their list/tensor/object forms, point-to-point (tagged,
//! async, object, batched), subgroups made four ways, local queries, refused calls; and the uses
//! that decide outcomes: sleeps between calls, raises, exits, kills, init_method env:// /
//! tcp:// / file://, a rank with its own MASTER_PORT, TORCH_DISTRIBUTED_DEBUG, `wait(timeout=)`.
//! The generator knows which ranks run each line, so the harness maps a real traceback's line
//! back to a statement. The same seed gives the same text.

use super::gen::Rng;

#[path = "pygen_late.rs"]
mod late;
#[path = "pygen_refused.rs"]
mod refused;
use late::{late_rows, ordered_group_rows, own_store_rows, split_rows, store_rows};
use refused::{refused_call, refused_more, RECORDED_SINCE};

/// What a line of the program is, for mapping a real rank's last line to a position.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// A torch.distributed call (or a line holding one).
    Call,
    /// `time.sleep`: the program's own time between calls.
    Sleep,
    /// A raise, exit or self-kill: the rank's end.
    End,
    /// Set-up, imports, local queries.
    Other,
}

/// One line of the program: the ranks that run it and what it is.
#[derive(Clone)]
pub struct Line {
    pub ranks: Vec<usize>,
    pub kind: Kind,
}

/// A generated program and what the harness needs to run and judge it.
#[derive(Clone)]
pub struct PyProgram {
    pub text: String,
    pub world: usize,
    /// Line `i + 1` of `text`.
    pub lines: Vec<Line>,
    /// Coverage rows drawn (docs/api-coverage.md's first cell: a function name, or a use).
    pub rows: Vec<String>,
    pub summary: String,
    /// A rank started with its own (wrong) MASTER_PORT: plain processes only.
    pub port_off: Option<usize>,
    /// TORCH_DISTRIBUTED_DEBUG=DETAIL for every rank.
    pub detail: bool,
    /// The program makes a call `scen record` refuses (exit 2 naming it and its line).
    pub refused: Option<&'static str>,
    /// The job is cut by `scen record --timeout-s` this many seconds after its start (a rank
    /// sleeps past it while the others wait in a barrier).
    pub cut_s: Option<u64>,
}

/// The uses of docs/api-coverage.md's second table, as its first cells spell them.
pub const USE_SLEEP: &str = "time between calls";
pub const USE_RAISE: &str = "a rank's own exception";
pub const USE_EXIT: &str = "a rank's own exit (sys.exit, exit, os._exit)";
pub const USE_KILL: &str =
    "a rank's signal to itself (os.kill(os.getpid(), sig), signal.raise_signal, os.abort)";
pub const USE_AGENT: &str = "a rank stopped by torchrun's agent";
pub const USE_WAIT: &str = "work.wait(timeout=)";
pub const USE_PORT: &str = "each rank's MASTER_PORT";
pub const USE_CUT: &str = "a job cut by --timeout-s";
pub const USE_VALUES: &str = "tensor values";
pub const USE_STORE: &str = "other direct Store use (making a FileStore / HashStore; append, multi_get, multi_set, queue_push, set_timeout, ... on any store; a store scen does not know)";
pub const USE_OWN_STORE: &str = "a program's own TCPStore and PrefixStore, and set, get, add, check, wait, compare_set, delete_key, num_keys on them";
pub const USE_DEFAULT_STORE: &str = "the default group's store (`_get_default_store()`): set, get, add, check, wait, compare_set, delete_key, num_keys";
pub const USE_DEBUG: &str =
    "TORCH_DISTRIBUTED_DEBUG, TORCH_DIST_INIT_BARRIER, TORCH_XCCL_BLOCKING_WAIT, ZE_AFFINITY_MASK";

/// A group calls can use: its Python expression, members (global ranks), and whether its
/// timeout is short (3 s: a divergence on it fails soon; the world's is 60 s).
#[derive(Clone)]
struct Group {
    expr: String,
    members: Vec<usize>,
    short: bool,
    /// Every rank holds its own subgroup (new_subgroups): no roots or pairs on it.
    split: bool,
}

struct B {
    w: usize,
    lines: Vec<(String, Vec<usize>, Kind)>,
    rows: Vec<String>,
    /// Ranks that ended (raised, exited, were killed): later lines leave them out.
    ended: Vec<usize>,
}

impl B {
    fn all(&self) -> Vec<usize> {
        (0..self.w).filter(|r| !self.ended.contains(r)).collect()
    }

    fn row(&mut self, r: &str) {
        self.rows.push(r.to_string());
    }

    /// A line run by `ranks` (guarded with `if r in (...)` unless every rank runs it).
    fn line(&mut self, ranks: &[usize], body: &str, kind: Kind) {
        let ranks: Vec<usize> = ranks
            .iter()
            .copied()
            .filter(|r| !self.ended.contains(r))
            .collect();
        if ranks.is_empty() {
            return;
        }
        let text = if ranks.len() == self.w {
            body.to_string()
        } else if ranks.len() == 1 {
            format!("if r == {}: {body}", ranks[0])
        } else {
            let list: Vec<String> = ranks.iter().map(usize::to_string).collect();
            format!("if r in ({}): {body}", list.join(", "))
        };
        self.lines.push((text, ranks, kind));
    }
}

const PRELUDE: [&str; 4] = [
    "import faulthandler, signal; faulthandler.register(signal.SIGTERM, chain=True)",
    "import datetime, os, sys, time, torch, torch.distributed as dist",
    "T = lambda s: datetime.timedelta(seconds=s)",
    "def X(n, d=torch.float32): return torch.full((n,), float(r + 1), dtype=d)",
];

/// Program `k` of `seed`.
pub fn program(seed: u64, k: u64) -> PyProgram {
    let mut rng = Rng::new(seed.wrapping_mul(2_000_003).wrapping_add(k) ^ 0x7573_6572);
    let w = 2 + rng.below(5);
    let mut b = B {
        w,
        lines: Vec::new(),
        rows: Vec::new(),
        ended: Vec::new(),
    };
    let all: Vec<usize> = (0..w).collect();
    for l in PRELUDE.iter().take(3) {
        b.line(&all, l, Kind::Other);
    }
    let port_off = (w > 2 && rng.chance(4)).then(|| 1 + rng.below(w - 1));
    let init = init_line(&mut rng, &mut b, port_off.is_some());
    // init_process_group(store=) on the program's own TCPStore (since 2026-11-28), from a
    // stream of its own: a program that does not draw it keeps its text.
    let mut own_init = Rng::new(seed.wrapping_mul(2_000_003).wrapping_add(k) ^ 0x696e_6974);
    if own_init.chance(12) {
        let t = if port_off.is_some() { 20 } else { 60 };
        let ids = "rank=int(os.environ[\"RANK\"]), world_size=int(os.environ[\"WORLD_SIZE\"])";
        b.line(
            &all,
            &format!("_IS = dist.TCPStore(os.environ[\"MASTER_ADDR\"], int(os.environ[\"MASTER_PORT\"]) + 2, int(os.environ[\"WORLD_SIZE\"]), int(os.environ[\"RANK\"]) == 0, timeout=T({t}))"),
            Kind::Call,
        );
        b.line(
            &all,
            &format!("dist.init_process_group(backend=\"gloo\", timeout=T({t}), store=_IS, {ids})"),
            Kind::Call,
        );
        b.row(USE_OWN_STORE);
    } else {
        b.line(&all, &init, Kind::Call);
    }
    b.row("init_process_group");
    b.line(&all, "r = dist.get_rank()", Kind::Other);
    b.line(&all, PRELUDE[3], Kind::Other);
    let groups = make_groups(&mut rng, &mut b);
    let count = 3 + rng.below(6);
    let mut summary = vec![format!("world {w}")];
    let mut events = 0;
    for i in 0..count {
        if events < 2 && rng.chance(18) {
            events += 1;
            summary.push(event(&mut rng, &mut b));
        }
        let g = rng.pick(&groups).clone();
        let name = call(&mut rng, &mut b, &g, i);
        summary.push(name);
    }
    // Rows added after the slices measured so far draw from a stream of their own, so a
    // program that draws none of them is the same text as before (program numbers in
    // docs/userpath.md and userpath_known.txt keep naming the same programs).
    let mut more = Rng::new(seed.wrapping_mul(2_000_003).wrapping_add(k) ^ 0x6d6f_7265);
    let mut store = Rng::new(seed.wrapping_mul(2_000_003).wrapping_add(k) ^ 0x7374_6f72);
    store_rows(&mut store, &mut b);
    let mut own = Rng::new(seed.wrapping_mul(2_000_003).wrapping_add(k) ^ 0x6f77_6e73);
    own_store_rows(&mut own, &mut b);
    let mut split = Rng::new(seed.wrapping_mul(2_000_003).wrapping_add(k) ^ 0x7370_6c74);
    split_rows(&mut split, &mut b);
    ordered_group_rows(&mut split, &mut b);
    let cut_s = late_rows(&mut more, &mut b);
    let mut refused = rng.chance(8).then(|| refused_call(&mut rng, &mut b));
    if refused.is_none() && more.chance(14) {
        refused = Some(refused_more(&mut more, &mut b));
    }
    // A call recorded since it was drawn here keeps its line (the same program text), but the
    // program is compared like any other.
    let refused = refused.filter(|n| !RECORDED_SINCE.contains(n));
    if rng.chance(50) {
        let q = query(&mut rng, &mut b);
        summary.push(q);
    }
    if rng.chance(40) {
        let a = b.all();
        b.line(&a, "dist.destroy_process_group()", Kind::Call);
        b.row("destroy_process_group");
    }
    if !b.ended.is_empty() || b.rows.iter().any(|r| r == USE_RAISE) {
        b.row(USE_AGENT);
    }
    let detail = rng.chance(6);
    if detail {
        b.row(USE_DEBUG);
    }
    if port_off.is_some() {
        b.row(USE_PORT);
    }
    let text: String = b.lines.iter().map(|(t, _, _)| format!("{t}\n")).collect();
    PyProgram {
        text,
        world: w,
        lines: b
            .lines
            .into_iter()
            .map(|(_, ranks, kind)| Line { ranks, kind })
            .collect(),
        rows: b.rows,
        summary: summary.join(", "),
        port_off,
        detail,
        refused,
        cut_s,
    }
}

/// `dist.init_process_group(...)`: env:// implicit or explicit, tcp:// (three hosts), file://.
fn init_line(rng: &mut Rng, b: &mut B, short: bool) -> String {
    // Importing torch on a loaded 2-core machine starts ranks seconds apart: 60 s covers it.
    let t = if short { 20 } else { 60 };
    let ids = "rank=int(os.environ[\"RANK\"]), world_size=int(os.environ[\"WORLD_SIZE\"])";
    let method = match rng.below(10) {
        0..=4 => String::new(),
        5 => ", init_method=\"env://\"".into(),
        6 | 7 => {
            let host = *rng.pick(&["127.0.0.1", "127.0.0.1", "localhost", "127.0.0.2"]);
            format!(", init_method=\"tcp://{host}:\" + os.environ[\"MASTER_PORT\"], {ids}")
        }
        _ => format!(", init_method=\"file://\" + os.path.abspath(\"fstore\"), {ids}"),
    };
    let _ = b;
    format!("dist.init_process_group(backend=\"gloo\", timeout=T({t}){method})")
}

/// The groups calls draw from: the world (60 s), `GA` over every rank (3 s), sometimes a
/// subset, locally synchronised subsets, new_subgroups, by enumeration, a 1-D device mesh.
fn make_groups(rng: &mut Rng, b: &mut B) -> Vec<Group> {
    let w = b.w;
    let all: Vec<usize> = (0..w).collect();
    let mut gs = vec![Group {
        expr: String::new(),
        members: all.clone(),
        short: false,
        split: false,
    }];
    b.line(
        &all,
        "GA = dist.new_group(list(range(dist.get_world_size())), timeout=T(3))",
        Kind::Call,
    );
    b.row("new_group");
    gs.push(Group {
        expr: ", group=GA".into(),
        members: all.clone(),
        short: true,
        split: false,
    });
    if rng.chance(55) {
        let mut m: Vec<usize> = all.iter().copied().filter(|_| rng.chance(60)).collect();
        if m.len() < 2 {
            m = vec![0, w - 1];
        }
        let local = rng.chance(30);
        let list: Vec<String> = m.iter().map(usize::to_string).collect();
        let body = format!(
            "G1 = dist.new_group([{}], timeout=T(3){})",
            list.join(", "),
            if local {
                ", use_local_synchronization=True"
            } else {
                ""
            }
        );
        b.line(if local { &m } else { &all }, &body, Kind::Call);
        b.row("new_group");
        gs.push(Group {
            expr: ", group=G1".into(),
            members: m,
            short: true,
            split: false,
        });
    }
    if w.is_multiple_of(2) && rng.chance(15) {
        b.line(
            &all,
            "GS, _ = dist.new_subgroups(group_size=2, timeout=T(3))",
            Kind::Call,
        );
        b.row("new_subgroups");
        gs.push(split_group(", group=GS", w));
    }
    if w >= 3 && rng.chance(12) {
        let half = w / 2;
        let body = format!(
            "GE, _ = dist.new_subgroups_by_enumeration([list(range({half})), list(range({half}, {w}))], timeout=T(3))"
        );
        b.line(&all, &body, Kind::Call);
        b.row("new_subgroups_by_enumeration");
        gs.push(split_group(", group=GE", w));
    }
    if rng.chance(10) {
        b.line(
            &all,
            "GM = dist.init_device_mesh(\"cpu\", (dist.get_world_size(),)).get_group()",
            Kind::Call,
        );
        b.row("init_device_mesh");
        gs.push(Group {
            expr: ", group=GM".into(),
            members: all,
            short: false,
            split: false,
        });
    }
    gs
}

fn split_group(expr: &str, w: usize) -> Group {
    Group {
        expr: expr.into(),
        members: (0..w).collect(),
        short: true,
        split: true,
    }
}

/// A sleep, raise, exit or self-kill on one rank.
fn event(rng: &mut Rng, b: &mut B) -> String {
    let live = b.all();
    let a = *rng.pick(&live);
    match rng.below(6) {
        0..=2 => {
            let s = *rng.pick(&["0.3", "0.8", "1.5", "4.5"]);
            b.line(&[a], &format!("time.sleep({s})"), Kind::Sleep);
            b.row(USE_SLEEP);
            format!("rank {a} sleeps {s} s")
        }
        3 => {
            b.line(
                &[a],
                &format!("raise ValueError(\"rank {a} gives up\")"),
                Kind::End,
            );
            b.row(USE_RAISE);
            b.ended.push(a);
            format!("rank {a} raises")
        }
        4 => {
            b.line(&[a], "sys.exit(3)", Kind::End);
            b.row(USE_EXIT);
            b.ended.push(a);
            format!("rank {a} exits 3")
        }
        _ => {
            b.line(&[a], "os.kill(os.getpid(), signal.SIGKILL)", Kind::End);
            b.row(USE_KILL);
            b.ended.push(a);
            format!("rank {a} kills itself")
        }
    }
}

/// One call on `g` by its live members (sometimes one skips it or passes another shape, on a
/// group with a short timeout).
fn call(rng: &mut Rng, b: &mut B, g: &Group, i: usize) -> String {
    let live = b.all();
    let mut m: Vec<usize> = g
        .members
        .iter()
        .copied()
        .filter(|r| live.contains(r))
        .collect();
    if m.is_empty() {
        return "nothing (its group ended)".into();
    }
    // A split group's size is the rank's own subgroup's.
    let s = if g.split {
        format!(
            "dist.get_world_size({})",
            g.expr.trim_start_matches(", group=")
        )
    } else {
        g.members.len().to_string()
    };
    let n = *rng.pick(&[1, 2, 4, 8]);
    let gx = g.expr.clone();
    let mut diverge = String::new();
    let mut x = format!("X({n})");
    if g.short && m.len() > 1 && rng.chance(20) {
        if rng.chance(50) {
            let skip = m.remove(rng.below(m.len()));
            diverge = format!(" (rank {skip} skips it)");
        } else {
            let a = *rng.pick(&m);
            x = format!("X({n} + (r == {a}))");
            diverge = format!(" (rank {a} passes {} elements)", n + 1);
        }
    }
    let root = *rng.pick(&m);
    let op = pick_op(rng, g, &m);
    let redop = *rng.pick(&["SUM", "SUM", "MAX", "MIN", "PRODUCT"]);
    match op {
        "all_reduce_async" => {
            let t = if rng.chance(40) {
                b.row(USE_WAIT);
                "timeout=T(1)"
            } else {
                ""
            };
            b.row("all_reduce");
            b.line(
                &m,
                &format!("w{i} = dist.all_reduce({x}{gx}, async_op=True)"),
                Kind::Call,
            );
            b.line(&m, &format!("w{i}.wait({t})"), Kind::Call);
            format!("async all_reduce{diverge}")
        }
        "p2p" => p2p_pair(rng, b, g, &m, n, i),
        _ => {
            let site = Site {
                x,
                n,
                s,
                gx: gx.clone(),
                root,
                redop,
            };
            let body = op_text(rng, op, &site);
            b.row(op);
            b.line(&m, &body, Kind::Call);
            format!("{op}{diverge}")
        }
    }
}

/// Where a call is made: its tensor expression `x`, element count, group size (a number or
/// a Python expression), `, group=...`, root and reduce op.
struct Site {
    x: String,
    n: usize,
    s: String,
    gx: String,
    root: usize,
    redop: &'static str,
}

const OPS: [&str; 26] = [
    "all_reduce",
    "all_reduce_async",
    "all_reduce_coalesced",
    "broadcast",
    "reduce",
    "all_gather",
    "all_gather_coalesced",
    "all_gather_into_tensor",
    "all_gather_single",
    "all_gather_object",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "reduce_scatter_single",
    "gather",
    "gather_object",
    "scatter",
    "scatter_object_list",
    "broadcast_object_list",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "monitored_barrier",
    "p2p",
    "p2p",
    "p2p",
    "p2p",
];

/// The op of a call on `g` by `m`: a rooted op or a pair needs a group every rank shares.
fn pick_op(rng: &mut Rng, g: &Group, m: &[usize]) -> &'static str {
    let op = *rng.pick(&OPS);
    let rooted = matches!(
        op,
        "broadcast"
            | "reduce"
            | "gather"
            | "gather_object"
            | "scatter"
            | "scatter_object_list"
            | "broadcast_object_list"
    );
    let p2p = !g.split && g.short && m.len() >= 2;
    if (g.split && rooted) || (op == "p2p" && !p2p) {
        "all_reduce"
    } else {
        op
    }
}

/// The line of a collective `op` at `c`.
fn op_text(rng: &mut Rng, op: &str, c: &Site) -> String {
    let Site {
        x,
        n,
        s,
        gx,
        root,
        redop,
    } = c;
    match op {
        "all_reduce" => format!("dist.all_reduce({x}, op=dist.ReduceOp.{redop}{gx})"),
        "all_reduce_coalesced" => format!("dist.all_reduce_coalesced([{x}, X(3)]{gx})"),
        "broadcast" => format!("dist.broadcast({x}, src={root}{gx})"),
        "reduce" => format!("dist.reduce({x}, dst={root}, op=dist.ReduceOp.{redop}{gx})"),
        "all_gather" => format!("dist.all_gather([X({n}) for _ in range({s})], {x}{gx})"),
        "all_gather_coalesced" => {
            format!("dist.all_gather_coalesced([[X({n})] for _ in range({s})], [{x}]{gx})")
        }
        "all_gather_into_tensor" | "all_gather_single" => {
            format!("dist.{op}(X({n} * {s}), {x}{gx})")
        }
        "all_gather_object" => {
            format!("dist.all_gather_object([None] * {s}, {{\"r\": r, \"pad\": \"x\" * r}}{gx})")
        }
        "reduce_scatter" => format!("dist.reduce_scatter({x}, [X({n}) for _ in range({s})]{gx})"),
        "reduce_scatter_tensor" | "reduce_scatter_single" => {
            format!("dist.{op}({x}, X({n} * {s}){gx})")
        }
        "gather" => format!(
            "dist.gather({x}, [X({n}) for _ in range({s})] if r == {root} else None, dst={root}{gx})"
        ),
        "gather_object" => format!(
            "dist.gather_object({{\"r\": r}}, [None] * {s} if r == {root} else None, dst={root}{gx})"
        ),
        "scatter" => format!(
            "dist.scatter({x}, [X({n}) for _ in range({s})] if r == {root} else None, src={root}{gx})"
        ),
        "scatter_object_list" => format!(
            "dist.scatter_object_list([None], [{{\"i\": i}} for i in range({s})] if r == {root} else None, src={root}{gx})"
        ),
        "broadcast_object_list" => {
            format!("dist.broadcast_object_list([{{\"r\": r}}, {n}], src={root}{gx})")
        }
        "all_to_all" => format!(
            "dist.all_to_all([X({n}) for _ in range({s})], [{x} for _ in range({s})]{gx})"
        ),
        "all_to_all_single" => format!("dist.all_to_all_single(X({n} * {s}), X({n} * {s}){gx})"),
        "barrier" => format!("dist.barrier({})", gx.trim_start_matches(", ")),
        _ => format!(
            "dist.monitored_barrier({}timeout=T(2), wait_all_ranks={})",
            if gx.is_empty() { String::new() } else { format!("{}, ", gx.trim_start_matches(", ")) },
            if rng.chance(50) { "True" } else { "False" }
        ),
    }
}

/// A point-to-point pair on `g`: send/recv (tags, sometimes crossed), isend/irecv, the object
/// forms, or batch_isend_irecv.
fn p2p_pair(rng: &mut Rng, b: &mut B, g: &Group, m: &[usize], n: usize, i: usize) -> String {
    let a = m[rng.below(m.len())];
    let others: Vec<usize> = m.iter().copied().filter(|&x| x != a).collect();
    let d = *rng.pick(&others);
    let gx = &g.expr;
    let (tag_s, tag_r) = match rng.below(4) {
        0 => (", tag=1".to_string(), ", tag=2".to_string()),
        1 => (", tag=5".into(), ", tag=5".into()),
        _ => (String::new(), String::new()),
    };
    let (send, recv, what) = match rng.below(5) {
        0 | 1 => {
            b.row("send");
            b.row("recv");
            (
                format!("dist.send(X({n}), dst={d}{tag_s}{gx})"),
                format!("dist.recv(X({n}), src={a}{tag_r}{gx})"),
                "send/recv",
            )
        }
        2 => {
            b.row("isend");
            b.row("irecv");
            (
                format!("dist.isend(X({n}), dst={d}{gx}).wait()"),
                format!("dist.irecv(X({n}), src={a}{gx}).wait()"),
                "isend/irecv",
            )
        }
        3 => {
            b.row("send_object_list");
            b.row("recv_object_list");
            (
                format!("dist.send_object_list([{{\"k\": {i}}}], dst={d}{gx})"),
                format!("dist.recv_object_list([None], src={a}{gx})"),
                "send/recv_object_list",
            )
        }
        _ => {
            b.row("batch_isend_irecv");
            let pg = gx.trim_start_matches(", group=");
            let pg = if pg.is_empty() { "None" } else { pg };
            (
                format!("[q.wait() for q in dist.batch_isend_irecv([dist.P2POp(dist.isend, X({n}), {d}, {pg})])]"),
                format!("[q.wait() for q in dist.batch_isend_irecv([dist.P2POp(dist.irecv, X({n}), {a}, {pg})])]"),
                "batch_isend_irecv",
            )
        }
    };
    b.line(&[a], &send, Kind::Call);
    b.line(&[d], &recv, Kind::Call);
    format!(
        "{what} {a}->{d}{}",
        if tag_s != tag_r {
            " (tags crossed)"
        } else {
            ""
        }
    )
}

/// A local query (docs/api-coverage.md: local) by every live rank.
fn query(rng: &mut Rng, b: &mut B) -> String {
    let (name, body) = *rng.pick(&[
        ("get_rank", "_ = dist.get_rank()"),
        ("get_world_size", "_ = dist.get_world_size(GA)"),
        ("is_initialized", "assert dist.is_initialized()"),
        ("is_available", "assert dist.is_available()"),
        ("is_gloo_available", "assert dist.is_gloo_available()"),
        ("is_nccl_available", "_ = dist.is_nccl_available()"),
        ("is_mpi_available", "_ = dist.is_mpi_available()"),
        ("is_ucc_available", "_ = dist.is_ucc_available()"),
        ("is_xccl_available", "_ = dist.is_xccl_available()"),
        (
            "is_torchelastic_launched",
            "_ = dist.is_torchelastic_launched()",
        ),
        (
            "is_backend_available",
            "assert dist.is_backend_available(\"gloo\")",
        ),
        ("get_backend", "assert dist.get_backend(GA) == \"gloo\""),
        ("get_backend_config", "_ = dist.get_backend_config()"),
        ("get_pg_count", "_ = dist.get_pg_count()"),
        (
            "get_process_group_ranks",
            "_ = dist.get_process_group_ranks(GA)",
        ),
        ("get_group_rank", "_ = dist.get_group_rank(GA, r)"),
        ("get_global_rank", "_ = dist.get_global_rank(GA, 0)"),
        (
            "get_node_local_rank",
            "_ = dist.get_node_local_rank(fallback_rank=0)",
        ),
        (
            "get_default_backend_for_device",
            "_ = dist.get_default_backend_for_device(\"cpu\")",
        ),
        (
            "supports_complex",
            "_ = dist.supports_complex(dist.ReduceOp.SUM)",
        ),
        ("record_comm", "_ = dist.record_comm(\"q\")"),
    ]);
    let live = b.all();
    b.line(&live, body, Kind::Other);
    b.row(name);
    name.to_string()
}
