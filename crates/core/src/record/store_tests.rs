//! The records of a program's own stores, written by hand: TCPStore and PrefixStore become
//! steps their calls name, and what the format cannot say (port 0, a master freed early, a
//! store scen does not know) is refused at its call.

use super::tests::{init_then_one_call, opts, proc};
use super::*;

/// The records of one rank (of 2) that makes its own stores: a TCPStore (master on rank 0), a
/// PrefixStore on it and a get through that; `tcp` is the TCPStore call's extra fields.
fn own_stores(rank: usize, tcp: &str) -> Proc {
    let master = rank == 0;
    proc(
        rank,
        &format!(
            "{{\"ev\": \"call\", \"i\": 0, \"op\": \"TCPStore\", \"at\": \"/w/p.py:3\", \"as\": \"s1\", \"host\": \"127.0.0.1\", \"port\": 29600, \"world_size\": 2, \"is_master\": {master}, \"timeout_ms\": 3000, \"wait_for_workers\": true{tcp}, \"t\": 0}}\n\
             {{\"ev\": \"done\", \"i\": 0, \"t\": 5}}\n\
             {{\"ev\": \"call\", \"i\": 1, \"op\": \"PrefixStore\", \"at\": \"/w/p.py:4\", \"as\": \"s2\", \"prefix\": \"pre\", \"store\": \"s1\", \"t\": 6}}\n\
             {{\"ev\": \"done\", \"i\": 1, \"t\": 6}}\n\
             {{\"ev\": \"call\", \"i\": 2, \"op\": \"Store.get\", \"at\": \"/w/p.py:5\", \"store\": \"s2\", \"key\": \"k\", \"t\": 7}}\n\
             {{\"ev\": \"error\", \"i\": 2, \"exc\": \"DistStoreError\", \"msg\": \"wait timeout after 3000ms, keys: /pre/k\", \"t\": 3007}}\n"
        ),
    )
}

/// A TCPStore and a PrefixStore the program makes are steps with their arguments and handles
/// (rank 0, the master, has its own), and a call on one names it; the recording loads.
#[test]
fn own_stores_are_steps_and_calls_name_them() {
    let r = record(vec![own_stores(0, ""), own_stores(1, "")], &opts()).expect("records");
    for want in [
        "op = \"tcp_store\"\non = [0]\nas = \"s1\"\nhost = \"127.0.0.1\"\nport = 29600\nworld_size = 2\nis_master = true\ntimeout_s = 3.0\n",
        "op = \"tcp_store\"\non = [1]\nas = \"s1\"\nhost = \"127.0.0.1\"\nport = 29600\nworld_size = 2\nis_master = false\ntimeout_s = 3.0\n",
        "op = \"prefix_store\"\nas = \"s2\"\nprefix = \"pre\"\nstore = \"s1\"\n",
        "op = \"store_get\"\nstore = \"s2\"\nkey = \"k\"\n",
    ] {
        assert!(r.text.contains(want), "no {want:?} in\n{}", r.text);
    }
    crate::scenario::load::parse(&r.text, "rec.toml", "rec").expect("loads");
    // A PrefixStore on the default group's store names none.
    let r = record(
        init_then_one_call(
            "\"op\": \"PrefixStore\", \"as\": \"s1\", \"prefix\": \"x\", \"default_store\": true",
        ),
        &opts(),
    )
    .expect("records");
    assert!(
        r.text
            .contains("op = \"prefix_store\"\nas = \"s1\"\nprefix = \"x\"\n\n"),
        "{}",
        r.text
    );
}

/// What the format cannot say of a store the program makes is refused, naming the call and
/// why: port 0, multi_tenant, master_listen_fd, the legacy server, a PrefixStore on a store
/// scen does not know, and init_process_group on the program's own store.
#[test]
fn own_stores_the_format_cannot_say_are_refused() {
    for (extra, why) in [
        (", \"multi_tenant\": true", "multi_tenant"),
        (", \"master_listen_fd\": true", "master_listen_fd"),
        (", \"use_libuv\": false", "use_libuv=False"),
    ] {
        let e = record(vec![own_stores(0, extra), own_stores(1, "")], &opts())
            .unwrap_err()
            .to_string();
        assert!(e.contains("rank 0 at /w/p.py:3: TCPStore: "), "{e}");
        assert!(e.contains(why), "{e}");
    }
    let port0 = own_stores(0, "").file.clone();
    let mut p = own_stores(0, "");
    p.calls[0].args.insert("port".into(), 0.into());
    let e = record(vec![p, own_stores(1, "")], &opts())
        .unwrap_err()
        .to_string();
    assert!(e.contains("port 0"), "{port0}: {e}");
    let mut p = own_stores(1, "");
    p.calls[1].args.remove("store");
    let e = record(vec![own_stores(0, ""), p], &opts())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("rank 1 at /w/p.py:4: PrefixStore: a PrefixStore on a store scen does not know"),
        "{e}"
    );
    let e = record(
        init_then_one_call("\"op\": \"init_process_group\", \"store\": true"),
        &opts(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("init_process_group(store=...)"), "{e}");
}

/// A master TCPStore freed before its program ended is refused at the call that made it; one
/// freed at the program's end (a store local to a `main()` that returns) is not.
#[test]
fn a_master_store_freed_early_is_refused() {
    let freed = |t_freed: u64, t_exit: u64| {
        let mut p = own_stores(0, "");
        p.calls[0].t_freed_ms = Some(t_freed);
        p.t_exit_ms = Some(t_exit);
        p
    };
    let e = record(vec![freed(4000, 5000), own_stores(1, "")], &opts())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("rank 0 at /w/p.py:3: TCPStore: the master store made here was freed 1000 ms before its program ended"),
        "{e}"
    );
    // Freed before a later call of its rank: refused whatever the end.
    let e = record(vec![freed(1, 3010), own_stores(1, "")], &opts())
        .unwrap_err()
        .to_string();
    assert!(e.contains("freed"), "{e}");
    record(vec![freed(3008, 3050), own_stores(1, "")], &opts()).expect("freed at its end");
    // In the millisecond of its last call (the call's function returned, freeing it).
    let mut p = freed(7, 20);
    p.calls.truncate(3);
    p.calls[2].end = super::parse::CallEnd::Done;
    record(vec![p, own_stores(1, "")], &opts()).expect("freed with its last call");
    // The recorder's `freed` line reaches the call that made the store.
    let p = parse(
        "proc1.jsonl",
        "{\"ev\": \"call\", \"i\": 0, \"op\": \"TCPStore\", \"at\": \"p.py:3\", \"t\": 1}\n{\"ev\": \"done\", \"i\": 0, \"t\": 2}\n{\"ev\": \"freed\", \"i\": 0, \"t\": 9}\n",
    )
    .unwrap();
    assert_eq!(p.calls[0].t_freed_ms, Some(9));
}

/// A rank that made a master store has its globals' freeing in its teardown recorded (the
/// store's server closed then), within its own teardown; a master freed at the program's end
/// (returned from `main()`) closed at once.
#[test]
fn the_globals_freed_in_a_masters_teardown_are_recorded() {
    let ended = |globals: Option<u64>, freed: Option<u64>| {
        let mut p = own_stores(0, "");
        p.calls[0].t_freed_ms = freed;
        p.exited = true;
        p.t_exit_ms = Some(3010);
        p.t_globals_ms = globals;
        p.t_gone_ms = Some(4010);
        p
    };
    let text = |p| {
        record(vec![p, own_stores(1, "")], &opts())
            .expect("records")
            .text
    };
    let t = text(ended(Some(3310), None));
    assert!(t.contains("exit_ms = 1000\n# recorded: its program's globals, and the TCPStore it made as master, were freed 300 ms into that\nglobals_freed_ms = 300\n"), "{t}");
    let s = crate::scenario::load::parse(&t, "rec.toml", "rec").expect("loads");
    assert_eq!(s.world.globals_freed_ms_of(0), 300);
    assert!(text(ended(Some(3310), Some(3010))).contains("globals_freed_ms = 0\n"));
    assert!(!text(ended(None, None)).contains("globals_freed_ms"));
    // The recorder's line.
    let p = parse("proc1.jsonl", "{\"ev\": \"globals\", \"t\": 9}\n").unwrap();
    assert_eq!(p.t_globals_ms, Some(9));
}
