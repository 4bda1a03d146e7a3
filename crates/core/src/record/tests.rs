//! The translation end to end on records written by hand (the real recorder's output is
//! tested in tests/torch/record.rs): merged steps, non-member groups, re-targeting.

use super::*;

pub(super) fn proc(rank: usize, calls: &str) -> Proc {
    let head = format!(
        "{{\"ev\": \"proc\", \"pid\": {}, \"env\": {{\"RANK\": \"{rank}\", \"WORLD_SIZE\": \"2\", \"LOCAL_WORLD_SIZE\": \"2\"}}}}\n",
        100 + rank
    );
    parse(
        &format!("proc{rank}.jsonl"),
        &format!("{head}{calls}{{\"ev\": \"exit\"}}\n"),
    )
    .unwrap()
}

/// The records of rank `r` of a `world`-rank gloo job under torchrun, up to its init
/// (pid 100 + r, init done at 10 ms).
pub(super) fn torchrun_head(r: usize, world: usize) -> String {
    format!(
        "{{\"ev\": \"proc\", \"pid\": {}, \"env\": {{\"RANK\": \"{r}\", \"WORLD_SIZE\": \"{world}\", \"TORCHELASTIC_RUN_ID\": \"x\"}}}}\n\
         {{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\", \"t\": 0}}\n\
         {{\"ev\": \"done\", \"i\": 0, \"rank\": {r}, \"world_size\": {world}, \"t\": 10}}\n",
        100 + r
    )
}

pub(super) const T: &str = "{\"shape\": [2, 3], \"dtype\": \"f32\", \"device\": \"cpu\"}";

fn calls(rank: usize) -> String {
    let member = rank == 0;
    let mut s = format!(
        "{{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\"}}\n\
         {{\"ev\": \"done\", \"i\": 0, \"rank\": {rank}, \"world_size\": 2}}\n\
         {{\"ev\": \"call\", \"i\": 1, \"op\": \"new_group\", \"at\": \"/w/p.py:4\", \"ranks\": [0], \"backend\": \"gloo\"}}\n\
         {{\"ev\": \"done\", \"i\": 1, \"handle\": \"g1\", \"member\": {member}}}\n\
         {{\"ev\": \"call\", \"i\": 2, \"op\": \"all_reduce\", \"at\": \"/w/p.py:5\", \"group\": \"WORLD\", \"tensor\": {T}}}\n\
         {{\"ev\": \"done\", \"i\": 2}}\n"
    );
    let g = if member { "g1" } else { "NON_MEMBER" };
    s.push_str(&format!(
        "{{\"ev\": \"call\", \"i\": 3, \"op\": \"all_reduce\", \"at\": \"/w/p.py:6\", \"group\": \"{g}\", \"tensor\": {T}, \"reduce_op\": \"max\"}}\n{{\"ev\": \"done\", \"i\": 3}}\n"
    ));
    s
}

pub(super) fn opts() -> Options {
    Options {
        command: "torchrun p.py".into(),
        cwd: Some("/w".into()),
        ..Default::default()
    }
}

#[test]
fn equal_calls_share_a_step_and_a_non_member_names_its_group() {
    let r = record(vec![proc(0, &calls(0)), proc(1, &calls(1))], &opts()).unwrap();
    assert_eq!((r.world, r.steps), (2, 4), "{}", r.text);
    assert!(r.text.contains("[[step]]  # p.py:6\nop = \"all_reduce\"\ngroup = \"g1\"\nshape = [2, 3]\nreduce_op = \"max\"\n"), "{}", r.text);
    assert!(r.text.contains("platform = \"cpu\""), "{}", r.text);
    assert!(
        r.text.ends_with("[[expect]]\noutcome = \"completes\"\n"),
        "{}",
        r.text
    );
}

#[test]
fn retargeting_moves_device_groups_and_keeps_explicit_gloo_on_the_cpu() {
    let o = Options {
        platform: Some("xpu".into()),
        backend: Some("xccl".into()),
        ..opts()
    };
    let r = record(vec![proc(0, &calls(0)), proc(1, &calls(1))], &o).unwrap();
    let t = &r.text;
    assert!(
        t.contains("platform = \"xpu\"")
            && t.contains("op = \"init_process_group\"\nbackend = \"xccl\"\n"),
        "{t}"
    );
    assert!(t.contains("ranks = [0]\nbackend = \"gloo\"\n"), "{t}");
    assert!(
        t.contains("# p.py:5\nop = \"all_reduce\"\nshape = [2, 3]\n\n"),
        "the WORLD tensor is on xpu: {t}"
    );
    assert!(
        t.contains("group = \"g1\"\nshape = [2, 3]\ndevice = \"cpu\"\n"),
        "the gloo group's stays: {t}"
    );
}

#[test]
fn no_call_is_an_error_and_bad_options_are_named() {
    let empty = parse("proc1.jsonl", "{\"ev\": \"proc\", \"pid\": 1}\n").unwrap();
    assert_eq!(
        record(vec![empty], &opts()).unwrap_err(),
        RecordError::NoRecords(String::new())
    );
    let no_torch = parse(
        "proc2.jsonl",
        "{\"ev\": \"no_torch\", \"python\": \"/usr/bin/python3\"}\n",
    )
    .unwrap();
    let e = record(vec![no_torch], &opts()).unwrap_err().to_string();
    assert!(
        e.contains("/usr/bin/python3") && e.contains("/usr/bin/python3 -m pip install torch"),
        "{e}"
    );
    let o = Options {
        platform: Some("tpu".into()),
        ..opts()
    };
    assert!(record(vec![proc(0, &calls(0))], &o)
        .unwrap_err()
        .to_string()
        .contains("--platform tpu"));
}

#[test]
fn the_programs_own_raise_becomes_a_raise_step_the_rank_fails_at() {
    let raise = "{\"ev\": \"raise\", \"exc\": \"ValueError\", \"msg\": \"bad shape 3\", \"at\": \"/w/p.py:9\"}\n";
    let r = record(
        vec![proc(0, &format!("{}{raise}", calls(0))), proc(1, &calls(1))],
        &opts(),
    )
    .unwrap();
    let t = &r.text;
    assert_eq!(r.steps, 5, "{t}");
    assert!(
        t.contains(
            "[[step]]  # p.py:9\nop = \"raise\"\non = [0]\nerror = \"ValueError: bad shape 3\"\n"
        ),
        "{t}"
    );
    assert!(
        t.contains("on = [0]\noutcome = \"fails\"\nstep = 5\nerror = \"ValueError: bad shape\"\n"),
        "{t}"
    );
    let s = crate::scenario::load::parse(t, "r.toml", "r").unwrap();
    assert!(matches!(
        &s.steps[4].kind,
        crate::scenario::StepKind::Raise { exception, message }
            if exception == "ValueError" && message == "bad shape 3"
    ));
    // A raise that a call raised stays in that call: no raise step.
    let failed = calls(0).replace(
        "{\"ev\": \"done\", \"i\": 3}",
        "{\"ev\": \"error\", \"i\": 3, \"exc\": \"RuntimeError\", \"msg\": \"closed\"}",
    );
    let raise = raise
        .replace("ValueError", "RuntimeError")
        .replace("bad shape 3", "closed");
    let r = record(
        vec![proc(0, &format!("{failed}{raise}")), proc(1, &calls(1))],
        &opts(),
    )
    .unwrap();
    assert!(!r.text.contains("op = \"raise\""), "{}", r.text);
}

/// A `*_tensor` collective whose large side is not group size x its small side: real c10d
/// rejects it, the format would write a call that succeeds, so the recording refuses, naming
/// the call and its file:line.
#[test]
fn a_tensor_collective_of_the_wrong_size_is_refused_with_its_place() {
    let call = |rank: usize, input: usize| {
        format!(
            "{{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\"}}\n\
             {{\"ev\": \"done\", \"i\": 0, \"rank\": {rank}, \"world_size\": 2}}\n\
             {{\"ev\": \"call\", \"i\": 1, \"op\": \"reduce_scatter_tensor\", \"at\": \"/w/p.py:7\", \"group\": \"WORLD\", \
             \"output\": {{\"shape\": [4], \"dtype\": \"f32\", \"device\": \"cpu\"}}, \
             \"input\": {{\"shape\": [{input}], \"dtype\": \"f32\", \"device\": \"cpu\"}}}}\n\
             {{\"ev\": \"done\", \"i\": 1}}\n"
        )
    };
    let ok = record(vec![proc(0, &call(0, 8)), proc(1, &call(1, 8))], &opts()).unwrap();
    assert!(
        ok.text
            .contains("op = \"reduce_scatter_tensor\"\nshape = [4]\n"),
        "{}",
        ok.text
    );
    let e = record(vec![proc(0, &call(0, 10)), proc(1, &call(1, 8))], &opts())
        .unwrap_err()
        .to_string();
    assert!(e.contains("rank 0 at /w/p.py:7"), "{e}");
    assert!(
        e.contains("reduce_scatter_tensor: its input has 10 elements, not the group's 2 ranks x its output's 4"),
        "{e}"
    );
}

/// A list form whose list is not one tensor per member like the call's tensor: real c10d
/// rejects it, the format would write a well-formed list, so the recording refuses.
#[test]
fn a_list_collective_of_the_wrong_length_or_shape_is_refused_with_its_place() {
    let t = |n: usize| format!("{{\"shape\": [{n}], \"dtype\": \"f32\", \"device\": \"cpu\"}}");
    let call = |rank: usize, list: &str| {
        format!(
            "{{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\"}}\n\
             {{\"ev\": \"done\", \"i\": 0, \"rank\": {rank}, \"world_size\": 2}}\n\
             {{\"ev\": \"call\", \"i\": 1, \"op\": \"all_gather\", \"at\": \"/w/p.py:9\", \"group\": \"WORLD\", \
             \"tensor\": {}, \"tensor_list\": [{list}]}}\n\
             {{\"ev\": \"done\", \"i\": 1}}\n",
            t(2)
        )
    };
    let good = format!("{}, {}", t(2), t(2));
    let ok = record(
        vec![proc(0, &call(0, &good)), proc(1, &call(1, &good))],
        &opts(),
    )
    .unwrap();
    assert!(
        ok.text.contains("op = \"all_gather\"\nshape = [2]\n"),
        "{}",
        ok.text
    );
    let long = format!("{}, {}, {}", t(2), t(2), t(2));
    let e = record(
        vec![proc(0, &call(0, &good)), proc(1, &call(1, &long))],
        &opts(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("rank 1 at /w/p.py:9"), "{e}");
    assert!(
        e.contains(
            "all_gather: its tensor_list has 3 tensors, not one per member of its group of 2"
        ),
        "{e}"
    );
    let wide = format!("{}, {}", t(2), t(3));
    let e = record(
        vec![proc(0, &call(0, &wide)), proc(1, &call(1, &good))],
        &opts(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("all_gather: tensor 1 of its tensor_list is not its tensor's shape and dtype"),
        "{e}"
    );
}

/// Ranks that rendezvoused at different ports keep them (one `[[world.rank]]` each); ranks that
/// agree write none.
#[test]
fn ranks_at_different_master_ports_keep_them() {
    let with_port = |rank: usize, port: u16| {
        let head = format!(
            "{{\"ev\": \"proc\", \"pid\": {}, \"env\": {{\"RANK\": \"{rank}\", \"WORLD_SIZE\": \"2\", \"LOCAL_WORLD_SIZE\": \"2\", \"MASTER_PORT\": \"{port}\"}}}}\n",
            100 + rank
        );
        parse(
            &format!("proc{rank}.jsonl"),
            &format!("{head}{}{{\"ev\": \"exit\"}}\n", calls(rank)),
        )
        .unwrap()
    };
    let r = record(vec![with_port(0, 29501), with_port(1, 29502)], &opts()).unwrap();
    assert!(
        r.text.contains("[[world.rank]]  # recorded: this rank's MASTER_PORT\non = \"rank == 1\"\nenv = { MASTER_PORT = \"29502\" }"),
        "{}",
        r.text
    );
    let same = record(vec![with_port(0, 29501), with_port(1, 29501)], &opts()).unwrap();
    assert!(!same.text.contains("[[world.rank]]"), "{}", same.text);
    assert!(!same.text.contains("MASTER_PORT"), "{}", same.text);
}

/// A port every rank shares is kept when the program names it in a `tcp://` init_method (under
/// torchrun the agent's store must be there for the ranks to meet it).
#[test]
fn a_master_port_the_init_method_names_is_kept() {
    let rank_at = |rank: usize| {
        let head = format!(
            "{{\"ev\": \"proc\", \"pid\": {}, \"env\": {{\"RANK\": \"{rank}\", \"WORLD_SIZE\": \"2\", \"LOCAL_WORLD_SIZE\": \"2\", \"MASTER_PORT\": \"29577\", \"TORCHELASTIC_RUN_ID\": \"x\"}}}}\n",
            100 + rank
        );
        let body = format!(
            "{{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\", \"init_method\": \"tcp://127.0.0.1:29577\"}}\n\
             {{\"ev\": \"done\", \"i\": 0, \"rank\": {rank}, \"world_size\": 2}}\n{{\"ev\": \"exit\"}}\n"
        );
        parse(&format!("proc{rank}.jsonl"), &format!("{head}{body}")).unwrap()
    };
    let r = record(vec![rank_at(0), rank_at(1)], &opts()).unwrap();
    assert!(
        r.text.contains("env = { MASTER_PORT = \"29577\" }"),
        "{}",
        r.text
    );
    crate::scenario::load::parse(&r.text, "rec.toml", "rec").expect("loads");
}

/// Two ranks' records: init_process_group (p.py:3), then one call at p.py:4 with the record
/// fields `fields` (`"op": ..., ...`).
pub(super) fn init_then_one_call(fields: &str) -> Vec<Proc> {
    let call = |rank: usize| {
        format!(
            "{{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\"}}\n\
             {{\"ev\": \"done\", \"i\": 0, \"rank\": {rank}, \"world_size\": 2}}\n\
             {{\"ev\": \"call\", \"i\": 1, {fields}, \"at\": \"/w/p.py:4\", \"group\": \"WORLD\"}}\n\
             {{\"ev\": \"done\", \"i\": 1}}\n"
        )
    };
    vec![proc(0, &call(0)), proc(1, &call(1))]
}

/// A call the format has no step for is refused by name, never left out.
#[test]
fn a_call_without_a_step_is_refused_not_dropped() {
    let e = record(init_then_one_call("\"op\": \"gather_single\""), &opts())
        .unwrap_err()
        .to_string();
    assert!(e.contains("rank 0 at /w/p.py:4: gather_single:"), "{e}");
}

/// `dist.shrink_group([0], group=GA)` is a step (gloo then raises its TypeError); a
/// `ranks_to_exclude` that is not a list of ints is refused naming the call.
#[test]
fn shrink_group_is_recorded_as_its_step() {
    let procs = init_then_one_call(
        "\"op\": \"shrink_group\", \"ranks_to_exclude\": [0], \"shrink_flags\": 1",
    );
    let r = record(procs, &opts()).expect("records");
    assert!(
        r.text
            .contains("op = \"shrink_group\"\nranks_to_exclude = [0]\nshrink_flags = 1\n"),
        "{}",
        r.text
    );
    let e = record(
        init_then_one_call("\"op\": \"shrink_group\", \"ranks_to_exclude\": \"(0,)\""),
        &opts(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("rank 0 at /w/p.py:4: shrink_group: ranks_to_exclude"),
        "{e}"
    );
}

/// `dist.split_group(None, [[1, 0]], timeout=T(3))` is a step: its lists as given, the timeout
/// and the handle; `backend=` on it has no field and is refused naming the call.
#[test]
fn split_group_is_recorded_as_its_step() {
    let call = "\"op\": \"split_group\", \"split_ranks\": [[1, 0]], \"timeout_ms\": 3000";
    let procs: Vec<Proc> = (0..2)
        .map(|rank| {
            let text = format!(
                "{{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\"}}\n\
                 {{\"ev\": \"done\", \"i\": 0, \"rank\": {rank}, \"world_size\": 2}}\n\
                 {{\"ev\": \"call\", \"i\": 1, {call}, \"at\": \"/w/p.py:4\", \"group\": \"WORLD\"}}\n\
                 {{\"ev\": \"done\", \"i\": 1, \"handle\": \"g1\", \"member\": true}}\n"
            );
            proc(rank, &text)
        })
        .collect();
    let r = record(procs, &opts()).expect("records");
    assert!(
        r.text.contains(
            "op = \"split_group\"\nsplit_ranks = [[1, 0]]\ntimeout_s = 3.0\nas = \"g1\"\n"
        ),
        "{}",
        r.text
    );
    let e = record(
        init_then_one_call(
            "\"op\": \"split_group\", \"split_ranks\": [[0, 1]], \"backend\": \"gloo\"",
        ),
        &opts(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("rank 0 at /w/p.py:4: split_group(backend=...)"),
        "{e}"
    );
}

/// `dist.set_timeout(T(2), group=g)` is a step: the group and the new timeout.
#[test]
fn set_timeout_is_recorded_as_its_step() {
    let procs = init_then_one_call("\"op\": \"set_timeout\", \"timeout_ms\": 2000");
    let r = record(procs, &opts()).expect("records");
    assert!(
        r.text.contains("op = \"set_timeout\"\ntimeout_s = 2.0\n"),
        "{}",
        r.text
    );
    crate::scenario::load::parse(&r.text, "rec.toml", "rec").expect("loads");
}

/// The default group's store's calls are steps with their arguments; a store method without
/// one, or a call on a store the program made (the recorder gives neither arguments), is
/// refused by name.
#[test]
fn default_store_calls_are_steps_and_other_store_use_is_refused() {
    let one = |fields: &str| record(init_then_one_call(fields), &opts());
    let r = one("\"op\": \"Store.wait\", \"default_store\": true, \"keys\": [\"a\", \"b\"], \"timeout_ms\": 2000")
        .expect("records");
    assert!(
        r.text
            .contains("op = \"store_wait\"\nkeys = [\"a\", \"b\"]\ntimeout_s = 2.0\n"),
        "{}",
        r.text
    );
    crate::scenario::load::parse(&r.text, "rec.toml", "rec").expect("loads");
    let r = one("\"op\": \"get_default_store\"").expect("records");
    assert!(
        r.text.contains("op = \"get_default_store\"\n"),
        "{}",
        r.text
    );
    let r = one("\"op\": \"Store.add\", \"default_store\": true, \"key\": \"c\", \"amount\": 2")
        .expect("records");
    assert!(
        r.text
            .contains("op = \"store_add\"\nkey = \"c\"\namount = 2\n"),
        "{}",
        r.text
    );
    for refused in [
        "\"op\": \"Store.append\", \"default_store\": true",
        "\"op\": \"Store.append\", \"store\": \"s1\"",
        "\"op\": \"Store.get\"",
        "\"op\": \"HashStore\"",
        "\"op\": \"FileStore\"",
    ] {
        let e = one(refused).unwrap_err().to_string();
        assert!(e.contains("rank 0 at /w/p.py:4: "), "{e}");
        assert!(e.contains("a program's own c10d Store"), "{e}");
    }
}

/// An approximation is a comment on its step and a line the command prints, with the call's
/// file:line (no call is approximated today; the path stays for the next one).
#[test]
fn approximations_are_listed_with_their_place() {
    let text = "[[step]]  # p.py:3\nop = \"barrier\"\n\n[[step]]  # p.py:5\n\
                # recorded APPROXIMATED: a call written as its nearest step\nop = \"barrier\"\n";
    assert_eq!(
        super::approximations(text),
        vec!["p.py:5: a call written as its nearest step".to_string()]
    );
}

/// A batch's ops keep their tags (gloo matches a batch's isend and irecv by peer and tag).
#[test]
fn batch_ops_keep_their_tags() {
    let t = "{\"shape\": [2], \"dtype\": \"f32\", \"device\": \"cpu\"}";
    let call = |rank: usize| {
        let (op, peer) = if rank == 0 {
            ("isend", 1)
        } else {
            ("irecv", 0)
        };
        format!(
            "{{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\"}}\n\
             {{\"ev\": \"done\", \"i\": 0, \"rank\": {rank}, \"world_size\": 2}}\n\
             {{\"ev\": \"call\", \"i\": 1, \"op\": \"batch_isend_irecv\", \"at\": \"/w/p.py:{}\", \"ops\": [{{\"op\": \"{op}\", \"peer\": {peer}, \"tag\": 7, \"group\": \"WORLD\", \"tensor\": {t}}}]}}\n\
             {{\"ev\": \"done\", \"i\": 1}}\n",
            5 + rank
        )
    };
    let r = record(vec![proc(0, &call(0)), proc(1, &call(1))], &opts()).unwrap();
    assert!(r.approximations.is_empty(), "{:?}", r.approximations);
    assert!(
        r.text
            .contains("ops = [{ op = \"isend\", peer = 1, tag = 7 }]"),
        "{}",
        r.text
    );
    crate::scenario::load::parse(&r.text, "rec.toml", "rec").expect("loads");
}

/// isend / irecv are written as themselves with the Work their `wait` names (a blocking send
/// in their place turns a ring that completes into a deadlock), and an async barrier keeps its
/// Work: nothing approximated.
#[test]
fn isend_irecv_and_async_barrier_keep_their_works() {
    let t = "{\"shape\": [2], \"dtype\": \"f32\", \"device\": \"cpu\"}";
    let call = |rank: usize| {
        let (op, peer) = if rank == 0 {
            ("isend", "\"dst\": 1")
        } else {
            ("irecv", "\"src\": 0")
        };
        format!(
            "{{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\"}}\n\
             {{\"ev\": \"done\", \"i\": 0, \"rank\": {rank}, \"world_size\": 2}}\n\
             {{\"ev\": \"call\", \"i\": 1, \"op\": \"{op}\", \"at\": \"/w/p.py:5\", \"group\": \"WORLD\", {peer}, \"tensor\": {t}}}\n\
             {{\"ev\": \"done\", \"i\": 1, \"works\": [\"w1\"]}}\n\
             {{\"ev\": \"call\", \"i\": 2, \"op\": \"barrier\", \"at\": \"/w/p.py:6\", \"group\": \"WORLD\", \"async_op\": true}}\n\
             {{\"ev\": \"done\", \"i\": 2, \"works\": [\"w2\"]}}\n\
             {{\"ev\": \"call\", \"i\": 3, \"op\": \"wait\", \"at\": \"/w/p.py:7\", \"work\": \"w1\"}}\n\
             {{\"ev\": \"done\", \"i\": 3}}\n\
             {{\"ev\": \"call\", \"i\": 4, \"op\": \"wait\", \"at\": \"/w/p.py:8\", \"work\": \"w2\"}}\n\
             {{\"ev\": \"done\", \"i\": 4}}\n"
        )
    };
    let r = record(vec![proc(0, &call(0)), proc(1, &call(1))], &opts()).unwrap();
    assert!(r.approximations.is_empty(), "{:?}", r.approximations);
    for want in [
        "op = \"isend\"",
        "op = \"irecv\"",
        "work = \"w1\"",
        "async_op = true\nwork = \"w2\"",
    ] {
        assert!(r.text.contains(want), "{want} in\n{}", r.text);
    }
    assert_eq!(r.text.matches("op = \"wait\"").count(), 2, "{}", r.text);
    crate::scenario::load::parse(&r.text, "rec.toml", "rec").expect("loads");
}

/// A non-member's call is a no-op (R27): torch checks nothing of its tensors, nor does the
/// recording.
#[test]
fn a_non_members_tensors_are_not_checked() {
    let call = |rank: usize| {
        let (g, input) = if rank == 0 {
            ("g1", 4)
        } else {
            ("NON_MEMBER", 2)
        };
        format!(
            "{{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\"}}\n\
             {{\"ev\": \"done\", \"i\": 0, \"rank\": {rank}, \"world_size\": 2}}\n\
             {{\"ev\": \"call\", \"i\": 1, \"op\": \"new_group\", \"at\": \"/w/p.py:4\", \"ranks\": [0], \"backend\": \"gloo\"}}\n\
             {{\"ev\": \"done\", \"i\": 1, \"handle\": \"g1\", \"member\": {}}}\n\
             {{\"ev\": \"call\", \"i\": 2, \"op\": \"reduce_scatter_tensor\", \"at\": \"/w/p.py:5\", \"group\": \"{g}\", \
             \"output\": {{\"shape\": [4], \"dtype\": \"f32\", \"device\": \"cpu\"}}, \
             \"input\": {{\"shape\": [{input}], \"dtype\": \"f32\", \"device\": \"cpu\"}}}}\n\
             {{\"ev\": \"done\", \"i\": 2}}\n",
            rank == 0
        )
    };
    let r = record(vec![proc(0, &call(0)), proc(1, &call(1))], &opts()).unwrap();
    assert!(
        r.text.contains("op = \"reduce_scatter_tensor\""),
        "{}",
        r.text
    );
}

/// sys.exit(3), os._exit(0) and a SIGKILL to itself after the last call are `exit` steps with
/// their own expectations; an exit the program caught (a call follows it) is not.
#[test]
fn a_program_that_ends_its_own_process_is_an_exit_step() {
    let end = |how: &str| format!("{{\"ev\": \"end\", {how}, \"at\": \"/w/p.py:9\", \"t\": 5}}\n");
    let sys_exit = end("\"how\": \"exit\", \"code\": 3");
    let r = record(
        vec![
            proc(0, &format!("{}{sys_exit}", calls(0))),
            proc(1, &calls(1)),
        ],
        &opts(),
    )
    .unwrap();
    let t = &r.text;
    assert!(
        t.contains("[[step]]  # p.py:9\nop = \"exit\"\non = [0]\ncode = 3\n"),
        "{t}"
    );
    assert!(
        t.contains("on = [0]\noutcome = \"fails\"\nstep = 5\nerror = \"exited with code 3\"\n"),
        "{t}"
    );
    let s = crate::scenario::load::parse(t, "r.toml", "r").unwrap();
    assert!(matches!(
        s.steps[4].kind,
        crate::scenario::StepKind::Exit(crate::scenario::ProgramExit::Code {
            code: 3,
            teardown: true
        })
    ));
    let kill = end("\"how\": \"signal\", \"signal\": 9");
    let now = end("\"how\": \"os._exit\", \"code\": 0");
    let r = record(
        vec![
            proc(0, &format!("{}{kill}", calls(0))),
            proc(1, &format!("{}{now}", calls(1))),
        ],
        &opts(),
    )
    .unwrap();
    let t = &r.text;
    assert!(t.contains("signal = \"SIGKILL\"\n"), "{t}");
    assert!(t.contains("error = \"killed by signal 9\"\n"), "{t}");
    assert!(t.contains("code = 0\nteardown = false\n"), "{t}");
    crate::scenario::load::parse(t, "r.toml", "r").unwrap();
    // Caught: `except SystemExit` went on to another call.
    let caught = format!(
        "{}{sys_exit}{{\"ev\": \"call\", \"i\": 9, \"op\": \"barrier\", \"at\": \"/w/p.py:11\"}}\n{{\"ev\": \"done\", \"i\": 9}}\n",
        calls(0)
    );
    let p = proc(0, &caught);
    assert!(p.own_end.is_none());
}

/// A gloo all_reduce_coalesced of tensors of different shapes is one flat tensor of their total
/// size (gloo sends it so), and a call that failed gloo's own argument check is the raise it was.
#[test]
fn ragged_coalesced_lists_flatten_and_gloo_argument_checks_raise() {
    let init = "{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\"}\n{\"ev\": \"done\", \"i\": 0, \"rank\": RANK, \"world_size\": 2}\n";
    let t = |n: usize| format!("{{\"shape\": [{n}], \"dtype\": \"f32\", \"device\": \"cpu\"}}");
    let ragged = format!(
        "{{\"ev\": \"call\", \"i\": 1, \"op\": \"all_reduce_coalesced\", \"at\": \"/w/p.py:4\", \"group\": \"WORLD\", \"tensors\": [{}, {}]}}\n{{\"ev\": \"done\", \"i\": 1}}\n",
        t(2),
        t(3)
    );
    let calls =
        |r: usize, tail: &str| format!("{}{ragged}{tail}", init.replace("RANK", &r.to_string()));
    let r = record(
        vec![proc(0, &calls(0, "")), proc(1, &calls(1, ""))],
        &opts(),
    )
    .unwrap();
    assert!(
        r.text.contains("gloo flattens a coalesced list into one buffer\nop = \"all_reduce_coalesced\"\nshape = [5]\ncount = 1\n"),
        "{}",
        r.text
    );
    let checked = format!(
        "{{\"ev\": \"call\", \"i\": 2, \"op\": \"all_gather_coalesced\", \"at\": \"/w/p.py:5\", \"group\": \"WORLD\", \"input_tensor_list\": [{}]}}\n{{\"ev\": \"error\", \"i\": 2, \"exc\": \"RuntimeError\", \"msg\": \"ProcessGroupGloo::allgather_coalesced: invalid size of output tensor at index 0 (expected length [2], got [1])\"}}\n",
        t(2)
    );
    let r = record(
        vec![proc(0, &calls(0, &checked)), proc(1, &calls(1, ""))],
        &opts(),
    )
    .unwrap();
    assert!(
        r.text.contains("op = \"raise\"\non = [0]\nerror = \"RuntimeError: ProcessGroupGloo::allgather_coalesced: invalid size of output tensor at index 0 (expected length [2], got [1])\"\n"),
        "{}",
        r.text
    );
    let s = crate::scenario::load::parse(&r.text, "r.toml", "r").unwrap();
    assert_eq!(s.steps.len(), 3);
}

/// torchrun's agent records the failed workers' exit statuses in its own file: a rank that
/// completed its program but was stopped with SIGTERM in its teardown fails at its last step.
#[test]
fn a_rank_the_agent_stopped_in_its_teardown_fails_with_sigterm() {
    let agent = parse(
        "agent.jsonl",
        "{\"ev\": \"proc\", \"pid\": 50, \"env\": {}}\n{\"ev\": \"worker_exit\", \"pid\": 101, \"exitcode\": -15, \"t\": 9}\n",
    )
    .unwrap();
    assert_eq!(agent.worker_exits, vec![(101, -15, Some(9))]);
    let r = record(vec![proc(0, &calls(0)), proc(1, &calls(1)), agent], &opts()).unwrap();
    assert!(
        r.text
            .contains("on = [1]\noutcome = \"fails\"\nstep = 4\nerror = \"SIGTERM\"\n"),
        "{}",
        r.text
    );
    assert!(r.outcomes[1].contains("stopped by torchrun's agent in its teardown"));
    let bad = parse(
        "agent.jsonl",
        "{\"ev\": \"proc\", \"pid\": 50}\n{\"ev\": \"worker_exit\", \"pid\": 101}\n",
    );
    assert!(bad.is_err());
}

/// A batch_isend_irecv's wait is the batch call's own: a rank stopped while it waits (torchrun's
/// agent, after its peer raised) was in the batch's step, not in its own code after the call
/// returned its works (7/958: the recording's sleep after the batch failed its own check).
#[test]
fn a_rank_stopped_in_a_batch_wait_is_in_the_batch_step() {
    let head = |rank: usize| torchrun_head(rank, 2);
    let batch = "{\"ev\": \"call\", \"i\": 1, \"op\": \"batch_isend_irecv\", \"at\": \"/w/p.py:5\", \"ops\": [{\"op\": \"isend\", \"peer\": 1, \"group\": \"WORLD\", \"tensor\": {\"shape\": [2], \"dtype\": \"f32\", \"device\": \"cpu\"}}], \"t\": 11}\n\
                 {\"ev\": \"done\", \"i\": 1, \"works\": [\"w1\"], \"t\": 12}\n\
                 {\"ev\": \"reopen\", \"i\": 1, \"t\": 12}\n\
                 {\"ev\": \"gone\", \"t\": 1900}\n";
    let raises = "{\"ev\": \"raise\", \"exc\": \"ValueError\", \"msg\": \"gives up\", \"at\": \"/w/p.py:7\", \"t\": 1000}\n\
                  {\"ev\": \"exit\", \"t\": 1005}\n{\"ev\": \"gone\", \"t\": 1800}\n";
    let agent = "{\"ev\": \"proc\", \"pid\": 50, \"env\": {}}\n\
                 {\"ev\": \"worker_exit\", \"pid\": 101, \"exitcode\": 1, \"t\": 1850}\n\
                 {\"ev\": \"worker_exit\", \"pid\": 100, \"exitcode\": -15, \"t\": 1950}\n";
    let procs = vec![
        parse("proc0.jsonl", &format!("{}{batch}", head(0))).unwrap(),
        parse("proc1.jsonl", &format!("{}{raises}", head(1))).unwrap(),
        parse("proc50.jsonl", agent).unwrap(),
    ];
    assert_eq!(procs[0].calls[1].end, super::parse::CallEnd::Open);
    let r = record(procs, &opts()).unwrap();
    assert!(!r.text.contains("op = \"sleep\"\non = [0]"), "{}", r.text);
    let s = crate::scenario::load::parse(&r.text, "r.toml", "r").unwrap();
    let batch_step = s
        .steps
        .iter()
        .position(|st| st.kind.op_name() == "batch_isend_irecv")
        .expect("a batch step");
    let e = crate::verdict::expectation_for(&s, 0).expect("rank 0's expectation");
    assert_eq!(e.step, Some(batch_step), "{}", r.text);
}

/// A call that raised at an argument check of c10d or ProcessGroupGloo is written as that
/// raise, whatever its op: gather_into_tensor has no step, but gloo raises at the call (real
/// torch 2.15: `Backend gloo does not support gather_single`, 7/1077), and a mis-sized
/// reduce_scatter_tensor the format cannot write fails gloo's CHECK there (7/1002). One that
/// did not raise is still refused.
#[test]
fn a_call_that_failed_its_argument_check_is_its_raise() {
    let call = |op: &str, msg: &str, exc: &str| {
        format!(
            "{{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\"}}\n\
             {{\"ev\": \"done\", \"i\": 0, \"rank\": 0, \"world_size\": 2}}\n\
             {{\"ev\": \"call\", \"i\": 1, \"op\": \"{op}\", \"at\": \"/w/p.py:5\", \"group\": \"WORLD\"}}\n\
             {{\"ev\": \"error\", \"i\": 1, \"exc\": \"{exc}\", \"msg\": \"{msg}\"}}\n\
             {{\"ev\": \"raise\", \"exc\": \"{exc}\", \"msg\": \"{msg}\", \"at\": \"/w/p.py:5\"}}\n"
        )
    };
    let other = "{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\"}\n\
                 {\"ev\": \"done\", \"i\": 0, \"rank\": 1, \"world_size\": 2}\n";
    for (op, exc, msg) in [
        ("gather_into_tensor", "RuntimeError", "Backend gloo does not support gather_single"),
        ("reduce_scatter_tensor", "RuntimeError", "[rank0]:[F1128 13:56:43.640124055 ProcessGroupGloo.cpp:1584] Check failed: outputShape[0] * worldSize == inputShape[0] (10 vs. 8). "),
        ("gather_single", "TypeError", "Invalid function argument. Expected parameter `tensor` of type torch.Tensor"),
    ] {
        let r = record(vec![proc(0, &call(op, msg, exc)), proc(1, other)], &opts())
            .unwrap_or_else(|e| panic!("{op}: {e}"));
        let want = format!("op = \"raise\"\non = [0]\nerror = {}\n", super::steps::quote(&format!("{exc}: {msg}")));
        assert!(r.text.contains(&want), "{op}: {}", r.text);
    }
    let done = "{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\"}\n\
                {\"ev\": \"done\", \"i\": 0, \"rank\": 0, \"world_size\": 2}\n\
                {\"ev\": \"call\", \"i\": 1, \"op\": \"gather_into_tensor\", \"at\": \"/w/p.py:5\"}\n\
                {\"ev\": \"done\", \"i\": 1}\n";
    let e = record(vec![proc(0, done), proc(1, other)], &opts()).unwrap_err();
    assert!(e.to_string().contains("p.py:5: gather_into_tensor:"), "{e}");
}
