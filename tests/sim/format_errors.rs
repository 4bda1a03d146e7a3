//! Bad scenario files are rejected before anything runs, each error naming file:line:col.

use scen_core::scenario::parse;

fn err(text: &str) -> String {
    parse(text, "s.toml", "s")
        .expect_err("must be rejected")
        .to_string()
}

const WORLD: &str = "[world]\nranks_per_node = 4\n\n";

#[test]
fn unknown_keys_are_located() {
    let e = err(&format!(
        "{WORLD}[[step]]\nop = \"barrier\"\ngroupp = \"tp\"\n"
    ));
    assert!(e.starts_with("s.toml:6:1:"), "{e}");
    assert!(e.contains("unknown field `groupp`"), "{e}");
    let e = err("[world]\nnode_count = 2\n");
    assert!(
        e.starts_with("s.toml:2:1:") && e.contains("node_count"),
        "{e}"
    );
}

#[test]
fn wrong_types_are_located() {
    let e = err("[world]\nranks_per_node = \"four\"\n");
    assert!(e.starts_with("s.toml:2:18:"), "{e}");
}

#[test]
fn out_of_range_ranks_are_located() {
    // A new_group rank outside the world is PyTorch's run-time ValueError (the verdict's, see
    // scenarios/gloo_new_group_rank_out_of_range.toml); only a negative one is unreadable.
    let e = err(&format!(
        "{WORLD}[[step]]\nop = \"new_group\"\nranks = [0, -4]\n"
    ));
    assert!(
        e.starts_with("s.toml:6:9:") && e.contains("rank -4 is negative"),
        "{e}"
    );
    let e = err(&format!("{WORLD}[[step]]\nop = \"barrier\"\non = [7]\n"));
    assert!(e.contains("rank 7 is out of range"), "{e}");
    let e = err(&format!("{WORLD}[[step]]\nop = \"send\"\ndst = -1\n"));
    assert!(e.contains("rank -1 is out of range"), "{e}");
}

#[test]
fn bad_urls_are_located() {
    let e = err(&format!(
        "{WORLD}[[step]]\nop = \"init_process_group\"\ninit_method = \"tcp://localhost:99999\"\n"
    ));
    assert!(
        e.starts_with("s.toml:6:15:") && e.contains("bad init_method: port `99999`"),
        "{e}"
    );
    let e = err(&format!(
        "{WORLD}[[step]]\nop = \"init_process_group\"\ninit_method = \"nccl://x:1\"\n"
    ));
    assert!(e.contains("No rendezvous handler for nccl://"), "{e}");
}

#[test]
fn bad_formulas_and_names_are_located() {
    let e = err(&format!(
        "{WORLD}[[step]]\nop = \"all_reduce\"\nfill = \"rank + nodes\"\n"
    ));
    assert!(
        e.starts_with("s.toml:6:16:") && e.contains("unknown variable `nodes`"),
        "{e}"
    );
    let e = err(&format!(
        "{WORLD}[[step]]\nop = \"all_reduce\"\ngroup = \"tp\"\n"
    ));
    assert!(e.contains("unknown group `tp`"), "{e}");
    let e = err(&format!(
        "{WORLD}[[step]]\nop = \"all_reduce\"\ndtype = \"f8\"\n"
    ));
    assert!(e.contains("unknown dtype `f8`"), "{e}");
    let e = err(&format!(
        "{WORLD}[[step]]\nop = \"init_process_group\"\nbackend = \"cpu:gloo,cpu:xccl\"\n"
    ));
    assert!(e.contains("Duplicate device type cpu"), "{e}");
}

#[test]
fn valid_files_parse() {
    let s = parse(
        &format!("{WORLD}[[step]]\nop = \"init_process_group\"\n"),
        "s.toml",
        "s",
    )
    .unwrap();
    assert_eq!(s.world.size(), 4);
    assert_eq!(s.world.ranks[3].env["LOCAL_RANK"], "3");
    assert_eq!(s.world.ranks[3].env["MASTER_ADDR"], "127.0.0.1");
}

/// The collective steps (R34): each field is checked against the op it is on, located.
#[test]
fn collective_fields_are_located() {
    let step = |body: &str| err(&format!("{WORLD}[[step]]\n{body}"));
    // Line 5 holds `op`, line 6 the field under test.
    let e = step("op = \"all_reduce\"\ncount = 3\n");
    assert!(
        e.starts_with("s.toml:6:9:") && e.contains("`count` does not apply to all_reduce"),
        "{e}"
    );
    let e = step("op = \"reduce\"\nreduce_op = \"sum\"\n");
    assert!(
        e.starts_with("s.toml:5:6:") && e.contains("reduce needs `dst`"),
        "{e}"
    );
    let e = step("op = \"scatter\"\nsrc = 9\n");
    assert!(
        e.starts_with("s.toml:6:7:") && e.contains("rank 9 is out of range"),
        "{e}"
    );
    let e = step("op = \"all_reduce_coalesced\"\ncount = 0\n");
    assert!(
        e.starts_with("s.toml:6:9:") && e.contains("count must be"),
        "{e}"
    );
    let e = step("op = \"all_to_all_single\"\ninput_split_sizes = [1, 1, 1, 1]\n");
    assert!(
        e.starts_with("s.toml:6:21:") && e.contains("go together"),
        "{e}"
    );
    let e = step(
        "op = \"all_to_all_single\"\ninput_split_sizes = \"j + peers\"\noutput_split_sizes = [1]\n",
    );
    assert!(
        e.starts_with("s.toml:6:26:") && e.contains("unknown variable `peers`"),
        "{e}"
    );
    let e = step("op = \"all_reduce\"\nexpect = \"chunk\"\n");
    assert!(
        e.starts_with("s.toml:6:11:") && e.contains("unknown variable `chunk`"),
        "{e}"
    );
    let e = step("op = \"all_reduce\"\nasync_op = true\n");
    assert!(
        e.starts_with("s.toml:6:12:") && e.contains("needs `work"),
        "{e}"
    );
    let e = step("op = \"wait\"\nwork = \"w9\"\n");
    assert!(
        e.starts_with("s.toml:6:8:") && e.contains("unknown work `w9`"),
        "{e}"
    );
    let e = step("op = \"batch_isend_irecv\"\nops = [{ op = \"isend\", peer = 7 }]\n");
    assert!(e.contains("rank 7 is out of range"), "{e}");
    let e = step("op = \"batch_isend_irecv\"\nops = [{ op = \"send\", peer = 1 }]\n");
    assert!(
        e.starts_with("s.toml:6:15:") && e.contains("unknown p2p op `send`"),
        "{e}"
    );
    let e = step("op = \"all_to_al\"\n");
    assert!(
        e.contains("unknown op `all_to_al`") && e.contains("all_to_all_single"),
        "{e}"
    );
}

#[test]
fn async_work_names_resolve_for_wait() {
    let s = parse(
        &format!(
            "{WORLD}[[step]]\nop = \"all_reduce\"\nasync_op = true\nwork = \"w\"\n\n[[step]]\nop = \"wait\"\nwork = \"w\"\n"
        ),
        "s.toml",
        "s",
    )
    .unwrap();
    assert_eq!(s.steps[1].kind.op_name(), "wait");
}

#[test]
fn unreadable_oneccl_algorithm_ranges_are_located() {
    // oneCCL's `<algo>:<lo>-<hi>` syntax is checked where it is written; which algorithms the
    // simulator runs is checked when it runs one (hardware mode runs any).
    let e = err(&format!(
        "{WORLD}[[faults]]\nkind = \"env\"\non = [1]\nenv = {{ CCL_ALLREDUCE = \"ring:0-8k\" }}\n"
    ));
    assert!(
        e.starts_with("s.toml:7:25:") && e.contains("cannot read `ring:0-8k`"),
        "{e}"
    );
    parse(
        &format!(
            "{WORLD}[[faults]]\nkind = \"env\"\non = [1]\nenv = {{ CCL_ALLREDUCE = \"direct\" }}\n"
        ),
        "s.toml",
        "s",
    )
    .expect("any algorithm name loads");
}

/// The fields this round added (p2p tag, monitored_barrier's, wait's timeout) are located too.
#[test]
fn p2p_tags_and_barrier_and_wait_fields_are_located() {
    let step = |body: &str| err(&format!("{WORLD}[[step]]\n{body}"));
    let e = step("op = \"send\"\ndst = 1\ntag = -1\n");
    assert!(
        e.starts_with("s.toml:7:7:") && e.contains("tag must be between 0 and 2147483647"),
        "{e}"
    );
    let e = step("op = \"send\"\ndst = 1\ntag = 4294967296\n");
    assert!(e.contains("tag must be between"), "{e}");
    let e = step("op = \"barrier\"\nwait_all_ranks = true\n");
    assert!(
        e.starts_with("s.toml:6:") && e.contains("wait_all_ranks"),
        "{e}"
    );
    let e = step("op = \"all_reduce\"\ntag = 1\n");
    assert!(e.starts_with("s.toml:6:") && e.contains("tag"), "{e}");
    let e = step("op = \"monitored_barrier\"\ntimeout_s = -3\n");
    assert!(
        e.starts_with("s.toml:6:") && e.contains("timeout_s must be a positive number"),
        "{e}"
    );
}

/// set_timeout needs its new timeout, positive, and takes no tensor (each located).
#[test]
fn set_timeout_fields_are_located() {
    let step = |body: &str| err(&format!("{WORLD}[[step]]\n{body}"));
    let e = step("op = \"set_timeout\"\n");
    assert!(
        e.starts_with("s.toml:5:6:") && e.contains("set_timeout needs `timeout_s`"),
        "{e}"
    );
    let e = step("op = \"set_timeout\"\ntimeout_s = 0\n");
    assert!(
        e.starts_with("s.toml:6:") && e.contains("timeout_s must be a positive number"),
        "{e}"
    );
    let e = step("op = \"set_timeout\"\ntimeout_s = 2\nshape = [4]\n");
    assert!(e.starts_with("s.toml:7:") && e.contains("shape"), "{e}");
}

/// Store steps need their key(s), set its value and add its amount; a key list is never empty,
/// and fields of other store methods are refused (each located).
#[test]
fn store_step_fields_are_located() {
    let step = |body: &str| err(&format!("{WORLD}[[step]]\n{body}"));
    let e = step("op = \"store_get\"\n");
    assert!(
        e.starts_with("s.toml:5:6:") && e.contains("store_get needs `key`"),
        "{e}"
    );
    let e = step("op = \"store_set\"\nkey = \"k\"\n");
    assert!(e.contains("store_set needs `value`"), "{e}");
    let e = step("op = \"store_add\"\nkey = \"k\"\n");
    assert!(e.contains("store_add needs `amount`"), "{e}");
    let e = step("op = \"store_wait\"\nkeys = []\n");
    assert!(
        e.starts_with("s.toml:6:") && e.contains("keys must name 1 to"),
        "{e}"
    );
    let e = step("op = \"store_get\"\nkey = \"k\"\ntimeout_s = 2\n");
    assert!(
        e.starts_with("s.toml:7:") && e.contains("`timeout_s` does not apply to store_get"),
        "{e}"
    );
    let e = step("op = \"store_compare_set\"\nkey = \"k\"\nexpected_value = \"\"\n");
    assert!(e.contains("store_compare_set needs `desired_value`"), "{e}");
    let e = step("op = \"store_num_keys\"\nkey = \"k\"\n");
    assert!(
        e.starts_with("s.toml:6:") && e.contains("`key` does not apply"),
        "{e}"
    );
    let e = step("op = \"store_check\"\nkey = \"k\"\n");
    assert!(
        e.starts_with("s.toml:6:") && e.contains("`key` does not apply"),
        "{e}"
    );
}

/// A program's own stores: tcp_store needs its name, host and port (port 0 refused), a store
/// step's `store` names one made before it, and get_default_store takes none (each located).
#[test]
fn own_store_fields_are_located() {
    let step = |body: &str| err(&format!("{WORLD}[[step]]\n{body}"));
    let tcp = "op = \"tcp_store\"\nas = \"kv\"\nhost = \"127.0.0.1\"\nport = 29600\n";
    let e = step("op = \"tcp_store\"\nhost = \"h\"\nport = 1\n");
    assert!(
        e.starts_with("s.toml:5:6:") && e.contains("tcp_store needs `as`"),
        "{e}"
    );
    let e = step("op = \"tcp_store\"\nas = \"kv\"\nport = 1\n");
    assert!(e.contains("tcp_store needs `host`"), "{e}");
    let e = step("op = \"tcp_store\"\nas = \"kv\"\nhost = \"h\"\nport = 0\n");
    assert!(
        e.starts_with("s.toml:8:8:") && e.contains("port must be 1 to 65535"),
        "{e}"
    );
    let e = step("op = \"tcp_store\"\nas = \"kv\"\nhost = \"h\"\nport = \"29500\"\n");
    assert!(
        e.starts_with("s.toml:8:8:") && e.contains("an environment value such as"),
        "{e}"
    );
    let e = step("op = \"tcp_store\"\nas = \"k v\"\nhost = \"h\"\nport = 2\n");
    assert!(
        e.starts_with("s.toml:6:6:") && e.contains("letters, digits"),
        "{e}"
    );
    let e = step("op = \"store_get\"\nstore = \"kv\"\nkey = \"k\"\n");
    assert!(
        e.starts_with("s.toml:6:9:") && e.contains("no store named `kv`"),
        "{e}"
    );
    let e = step(&format!(
        "{tcp}\n[[step]]\nop = \"prefix_store\"\nas = \"p\"\nstore = \"kv\"\n"
    ));
    assert!(e.contains("prefix_store needs `prefix`"), "{e}");
    let e = step("op = \"init_process_group\"\nbackend = \"gloo\"\nstore = \"kv\"\n");
    assert!(
        e.starts_with("s.toml:7:9:") && e.contains("no store named `kv`"),
        "{e}"
    );
    let e = step("op = \"get_default_store\"\nstore = \"kv\"\n");
    assert!(
        e.starts_with("s.toml:6:") && e.contains("`store` does not apply"),
        "{e}"
    );
    let ok = format!(
        "{WORLD}[[step]]\n{tcp}is_master = true\n\n[[step]]\nop = \"tcp_store\"\nas = \"e\"\nhost = \"${{MASTER_ADDR}}\"\nport = \"${{MASTER_PORT}}\"\nworld_size = 4\n\n[[step]]\nop = \"prefix_store\"\nas = \"p\"\nstore = \"kv\"\nprefix = \"x\"\n\n[[step]]\nop = \"store_get\"\nstore = \"p\"\nkey = \"k\"\n"
    );
    assert!(parse(&ok, "s.toml", "s").is_ok());
}

/// isend / irecv need the Work a later `wait` names, `work` belongs to async calls only, and a
/// batch op's tag is checked like send's (each located).
#[test]
fn isend_irecv_works_and_batch_tags_are_located() {
    let step = |body: &str| err(&format!("{WORLD}[[step]]\n{body}"));
    let e = step("op = \"isend\"\ndst = 1\n");
    assert!(
        e.starts_with("s.toml:5:") && e.contains("isend needs `work"),
        "{e}"
    );
    let e = step("op = \"send\"\ndst = 1\nwork = \"w\"\n");
    assert!(
        e.starts_with("s.toml:7:") && e.contains("`work` does not apply to send"),
        "{e}"
    );
    let e = step("op = \"barrier\"\nwork = \"b\"\n");
    assert!(
        e.starts_with("s.toml:6:") && e.contains("`work` names the handle of an async_op"),
        "{e}"
    );
    let e = step("op = \"batch_isend_irecv\"\nops = [{ op = \"isend\", peer = 1, tag = -2 }]\n");
    assert!(
        e.starts_with("s.toml:6:") && e.contains("tag must be between"),
        "{e}"
    );
    parse(
        &format!(
            "{WORLD}[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\n\n\
             [[step]]\nop = \"irecv\"\nsrc = 1\nwork = \"r\"\n\n[[step]]\nop = \"wait\"\nwork = \"r\"\n"
        ),
        "s.toml",
        "s",
    )
    .expect("an irecv with its work and wait loads");
}

/// `expect_ulps` on an op that checks no values is located, as every other misplaced field is.
#[test]
fn expect_ulps_on_an_op_without_values_is_located() {
    let e = err(&format!(
        "{WORLD}[[step]]\nop = \"barrier\"\nexpect_ulps = 1\n"
    ));
    assert!(
        e.starts_with("s.toml:6:") && e.contains("expect_ulps"),
        "{e}"
    );
}

/// An exit step takes `code` (0..=255, `teardown = false` for os._exit) or a fatal `signal`,
/// never both, each error located.
#[test]
fn exit_steps_take_a_code_or_a_fatal_signal() {
    let step = |body: &str| err(&format!("{WORLD}[[step]]\n{body}"));
    let e = step("op = \"exit\"\n");
    assert!(
        e.starts_with("s.toml:5:") && e.contains("exit needs `code = 3`"),
        "{e}"
    );
    let e = step("op = \"exit\"\ncode = 256\n");
    assert!(
        e.starts_with("s.toml:6:8:") && e.contains("between 0 and 255"),
        "{e}"
    );
    let e = step("op = \"exit\"\nsignal = \"SIGINT\"\n");
    assert!(
        e.starts_with("s.toml:6:10:") && e.contains("SIGKILL") && e.contains("\"SIGINT\""),
        "{e}"
    );
    let e = step("op = \"exit\"\ncode = 1\nsignal = \"SIGKILL\"\n");
    assert!(e.starts_with("s.toml:7:") && e.contains("not both"), "{e}");
    let e = step("op = \"exit\"\nsignal = \"SIGKILL\"\nteardown = false\n");
    assert!(
        e.starts_with("s.toml:7:") && e.contains("teardown goes with `code`"),
        "{e}"
    );
    let e = step("op = \"exit\"\ncode = 3\nerror = \"x\"\n");
    assert!(e.starts_with("s.toml:7:"), "{e}");
    parse(
        &format!("{WORLD}[[step]]\nop = \"exit\"\ncode = 3\nteardown = false\n"),
        "s.toml",
        "s",
    )
    .expect("os._exit(3) loads");
}

/// split_group's and new_group's ordering fields: a negative rank in `split_ranks`, a field of
/// another op, a `sort_ranks` that is not a boolean, and an unknown parent group, each located.
#[test]
fn split_group_fields_are_located() {
    let step = |body: &str| err(&format!("{WORLD}[[step]]\n{body}"));
    let e = step("op = \"split_group\"\nsplit_ranks = [[0, -1]]\n");
    assert!(
        e.starts_with("s.toml:6:15:") && e.contains("split_ranks: rank -1 is negative"),
        "{e}"
    );
    let e = step("op = \"split_group\"\nranks = [0]\n");
    assert!(
        e.starts_with("s.toml:6:9:") && e.contains("`ranks` does not apply to split_group"),
        "{e}"
    );
    let e = step("op = \"new_group\"\nsort_ranks = \"no\"\n");
    assert!(e.starts_with("s.toml:6:14:"), "{e}");
    let e = step("op = \"split_group\"\ngroup = \"nope\"\nsplit_ranks = [[0]]\n");
    assert!(
        e.starts_with("s.toml:6:9:") && e.contains("unknown group `nope`"),
        "{e}"
    );
}
