//! `scen record` of the stores a program uses (docs/record.md): the default group's store and
//! the TCPStore / PrefixStore it makes are recorded as steps whose recordings simulate to the
//! real run; what the format cannot say is refused naming the call and its line.

use super::record::record_program;
use std::path::Path;

/// A store method that has no step, on the default store, after init.
const OWN_STORE_USE: &str = r#"import torch.distributed as dist
dist.init_process_group(backend="gloo")
store = dist.distributed_c10d._get_default_store()
store.append("mine", "1")
dist.barrier()
"#;

/// A compare_set whose values are not UTF-8 (a scenario holds them as text).
const BINARY_COMPARE_SET: &str = r#"import torch.distributed as dist
dist.init_process_group(backend="gloo")
store = dist.distributed_c10d._get_default_store()
store.compare_set("mine", b"", b"\xff")
dist.barrier()
"#;

/// The default store's set, get, add, check and wait: steps (rank 1 gets what rank 0 sets).
const DEFAULT_STORE_USE: &str = r#"import datetime, torch.distributed as dist
dist.init_process_group(backend="gloo")
store = dist.distributed_c10d._get_default_store()
if dist.get_rank() == 0:
    store.set("mine", b"1")
store.add("count", 1)
if dist.get_rank() == 1:
    store.get("mine")
    dist.Store.wait(store, ["mine", "count"], datetime.timedelta(seconds=5))
    store.check(["count"])
    store.compare_set("mine", "1", "2")
    store.delete_key("count")
    store.num_keys()
dist.barrier()
"#;

/// A program's own store use without a step (a master store it frees before its end, port 0,
/// a method other than set, get, add, check, wait, compare_set, delete_key and num_keys): `scen record` exits 2 naming the call and its line,
/// and torch's own store traffic (the rendezvous, the barriers) is not counted as the
/// program's. The default store's set, get, add, check and wait are steps with their
/// arguments.
pub fn own_store_use_is_refused(python: &Path) -> Result<(), String> {
    let dir = tempfile::Builder::new()
        .prefix("scen-record-store-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    for (name, program, want) in [
        (
            "own_store_use",
            OWN_STORE_USE,
            "own_store_use.py:4: Store.append: a program's own c10d Store",
        ),
        (
            "freed_master",
            FREED_MASTER,
            "freed_master.py:3: TCPStore: the master store made here was freed",
        ),
        (
            "port_zero",
            PORT_ZERO,
            "port_zero.py:4: TCPStore: a TCPStore on port 0",
        ),
        (
            "own_append",
            OWN_APPEND,
            "own_append.py:4: Store.append: a program's own c10d Store other than",
        ),
        (
            "binary_compare_set",
            BINARY_COMPARE_SET,
            "binary_compare_set.py:4: Store.compare_set: a program's own c10d Store",
        ),
        (
            "debugger_stop",
            DEBUGGER_STOP,
            "debugger_stop.py:3: breakpoint: a debugger stop",
        ),
    ] {
        match record_program(dir.path(), python, name, program, 2, &[]) {
            Ok(text) => return Err(format!("{name}: recorded, not refused:\n{text}")),
            Err(e) if e.contains("exited Some(2)") && e.contains(want) => {}
            Err(e) => return Err(format!("{name}: not refused as `{want}`: {e}")),
        }
    }
    let text = record_program(
        dir.path(),
        python,
        "default_store",
        DEFAULT_STORE_USE,
        2,
        &[],
    )?;
    for want in [
        "op = \"store_set\"\non = [0]\nkey = \"mine\"\nvalue = \"1\"\n",
        "op = \"store_add\"\nkey = \"count\"\namount = 1\n",
        "op = \"store_get\"\non = [1]\nkey = \"mine\"\n",
        "op = \"store_wait\"\non = [1]\nkeys = [\"mine\", \"count\"]\ntimeout_s = 5.0\n",
        "op = \"store_check\"\non = [1]\nkeys = [\"count\"]\n",
        "op = \"store_compare_set\"\non = [1]\nkey = \"mine\"\nexpected_value = \"1\"\ndesired_value = \"2\"\n",
        "op = \"store_delete_key\"\non = [1]\nkey = \"count\"\n",
        "op = \"store_num_keys\"\non = [1]\n",
    ] {
        if !text.contains(want) {
            return Err(format!("default_store: no `{want}` in:\n{text}"));
        }
    }
    Ok(())
}

/// Rank 0's master TCPStore freed (its server closed) while its program goes on.
const FREED_MASTER: &str = r#"import datetime, os, time, torch.distributed as dist
rank = int(os.environ["RANK"])
s = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]) + 6, 2, rank == 0, timeout=datetime.timedelta(seconds=10))
if rank == 0:
    del s
time.sleep(1)
"#;

/// A master TCPStore on a port its OS picks.
const PORT_ZERO: &str = r#"import os, torch.distributed as dist
rank = int(os.environ["RANK"])
if rank == 0:
    s = dist.TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False)
"#;

/// A method without a step (append) on a store the program made.
const OWN_APPEND: &str = r#"import datetime, os, torch.distributed as dist
rank = int(os.environ["RANK"])
s = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]) + 7, 2, rank == 0, timeout=datetime.timedelta(seconds=10))
s.append("k", "v")
"#;

/// Stores a program makes (docs/record.md), each with what real torch 2.15 did: the program,
/// its ranks and what the recording must hold. Ports are MASTER_PORT + 1.. (free: the launcher
/// picked MASTER_PORT below the ephemeral range).
const OWN_STORES: [(&str, &str, usize, &[&str]); 7] = [
    // init_process_group on the program's own store (store=, rank=, world_size=): no
    // rendezvous, no "default_pg" prefix, the store's own timeout for a get on the default store.
    (
        "init_on_own",
        r#"import datetime, os, time, torch.distributed as dist
rank = int(os.environ["RANK"])
s = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]) + 1, 2, rank == 0, timeout=datetime.timedelta(seconds=3))
dist.init_process_group(backend="gloo", store=s, rank=rank, world_size=2)
dist.barrier()
if rank == 1:
    dist.distributed_c10d._get_default_store().get("missing")
else:
    time.sleep(4)
"#,
        2,
        &[
            "op = \"init_process_group\"\non = [1]\nbackend = \"gloo\"\nrank = 1\nworld_size = 2\nstore = \"s1\"\n",
            "init_on_own.py:7: wait timeout after 3000ms, keys: /0//missing",
        ],
    ),
    // Rank 0 serves, all connect; a PrefixStore on it; rank 2's get of a key nobody sets times
    // out (`keys: /pre/missing`: TCPStore's keys begin with "/"), the others' barrier then
    // fails on its end.
    (
        "prefixed",
        r#"import datetime, os, torch.distributed as dist
rank = int(os.environ["RANK"])
dist.init_process_group("gloo")
s = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]) + 1, 3, rank == 0, timeout=datetime.timedelta(seconds=3))
p = dist.PrefixStore("pre", s)
if rank == 0:
    p.set("k", "v")
p.get("k")
p.add("n", 1)
if rank == 2:
    p.get("missing")
dist.barrier()
"#,
        3,
        &[
            "op = \"tcp_store\"\non = [0]\nas = \"s1\"\nhost = \"127.0.0.1\"\n",
            "world_size = 3\nis_master = true\ntimeout_s = 3.0\n",
            "world_size = 3\nis_master = false\ntimeout_s = 3.0\n",
            "op = \"prefix_store\"\nas = \"s2\"\nprefix = \"pre\"\nstore = \"s1\"\n",
            "op = \"store_get\"\non = [2]\nstore = \"s2\"\nkey = \"missing\"\n",
            "error = \"DistStoreError: wait timeout after\"",
        ],
    ),
    // The master's program ends first: rank 1's get reads its server's close (its globals
    // freed in its teardown).
    (
        "master_gone",
        r#"import datetime, os, time, torch.distributed as dist
rank = int(os.environ["RANK"])
s = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]) + 2, 2, rank == 0, timeout=datetime.timedelta(seconds=10))
if rank == 1:
    time.sleep(1)
    s.get("never")
"#,
        2,
        // Rank 0's globals, and its store with them, freed in its teardown: measured.
        &[
            "error = \"DistNetworkError: Failed to recv, got\"",
            "were freed ",
            "globals_freed_ms = ",
        ],
    ),
    // The master's port is init's store's (rank 0's own): EADDRINUSE; rank 1, a client of
    // that store, reads its close when rank 0's process ends. The recording keeps MASTER_PORT.
    (
        "port_taken",
        r#"import datetime, os, torch.distributed as dist
rank = int(os.environ["RANK"])
dist.init_process_group("gloo")
s = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), 2, rank == 0, timeout=datetime.timedelta(seconds=3))
s.get("k")
"#,
        2,
        &[
            "env = { MASTER_PORT = ",
            "error = \"DistNetworkError: The server socket has failed to listen on any local network address. port\"",
        ],
    ),
    // A client whose master never comes.
    (
        "no_master",
        r#"import datetime, os, torch.distributed as dist
rank = int(os.environ["RANK"])
dist.init_process_group("gloo")
if rank == 1:
    s = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]) + 3, 2, False, timeout=datetime.timedelta(seconds=3))
"#,
        2,
        &["error = \"DistNetworkError: The client socket has timed out after\""],
    ),
    // The master waits for 3 workers; rank 2 never connects.
    (
        "workers_missing",
        r#"import datetime, os, torch.distributed as dist
rank = int(os.environ["RANK"])
if rank < 2:
    s = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]) + 4, 3, rank == 0, timeout=datetime.timedelta(seconds=4))
"#,
        3,
        &["error = \"DistStoreError: Timed out after\""],
    ),
    // A store local to a main() that returns: freed at the program's end, recorded.
    (
        "in_main",
        r#"import datetime, os, torch.distributed as dist
def main():
    rank = int(os.environ["RANK"])
    s = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]) + 5, 2, rank == 0, timeout=datetime.timedelta(seconds=10))
    s.add("n", 1)
    s.wait(["n"])
main()
"#,
        2,
        &["op = \"store_wait\"\nstore = \"s1\"\nkeys = [\"n\"]\n"],
    ),
];

/// The stores a program makes are recorded (`tcp_store`, `prefix_store`, the `store` of each
/// call), and each recording simulates to what the real run did, rank by rank (record_program
/// checks scen record's own self-check): a get that times out, a master whose program ended,
/// a taken port, a client with no master, a master waiting for workers that never come.
pub fn own_stores_are_recorded(python: &Path) -> Result<(), String> {
    let dir = tempfile::Builder::new()
        .prefix("scen-record-own-stores-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    for (name, program, world, wants) in OWN_STORES {
        let text = record_program(dir.path(), python, name, program, world, &[])?;
        if let Some(w) = wants.iter().find(|w| !text.contains(**w)) {
            return Err(format!(
                "{name}: the recording lacks\n{w}\n--- it is:\n{text}"
            ));
        }
    }
    Ok(())
}

/// `dist.breakpoint()`: torch 2.15 sets every group's timeout, stops rank 0 in pdb (here with no
/// terminal: it reads end of input and raises BdbQuit) and runs a barrier.
const DEBUGGER_STOP: &str = r#"import torch.distributed as dist
dist.init_process_group(backend="gloo")
dist.breakpoint()
dist.barrier()
"#;
