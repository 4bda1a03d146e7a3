//! `init_process_group(store=...)` on a store the program made: torch 2.15's own argument
//! checks (AssertionError, before anything else runs), and the store a step names must exist
//! on the rank that calls it.

use scen_core::outcome::Failure;
use scen_core::scenario::parse;
use scen_core::verdict::RankVerdict;

const HEAD: &str = "[world]\nranks_per_node = 2\nplatform = \"cpu\"\n\n[[step]]\nop = \"tcp_store\"\nas = \"kv\"\nhost = \"127.0.0.1\"\nport = 29620\nis_master = true\non = [0]\n\n[[step]]\nop = \"tcp_store\"\nas = \"kv\"\nhost = \"127.0.0.1\"\nport = 29620\non = [1]\n";

/// Rank 0's failure text after `init` (an init_process_group step's fields).
fn rank0_error(init: &str) -> String {
    let src = format!(
        "{HEAD}\n[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\nstore = \"kv\"\n{init}"
    );
    error_of(&src, 0)
}

use crate::common::raised_text as error_of;

#[test]
fn init_on_a_passed_store_checks_its_arguments_as_torch_does() {
    assert_eq!(
        rank0_error("world_size = 2\n"),
        "AssertionError: rank must be non-negative if using store"
    );
    assert_eq!(
        rank0_error("rank = \"{rank}\"\n"),
        "AssertionError: world_size must be positive if using store"
    );
    assert_eq!(
        rank0_error("rank = \"{rank}\"\nworld_size = 2\ninit_method = \"env://\"\n"),
        "AssertionError: Cannot specify both init_method and store."
    );
    // Both ranks init on it: the group works, and its keys are the store's.
    let ok = format!("{HEAD}\n[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\nstore = \"kv\"\nrank = \"{{rank}}\"\nworld_size = 2\n\n[[step]]\nop = \"all_reduce\"\nshape = [4]\n");
    let s = parse(&ok, "t.toml", "t").expect("parses");
    let r = scen_sim::simulate(&s, Some(0)).expect("simulates");
    assert!(
        r.ranks
            .iter()
            .all(|v| matches!(v, RankVerdict::Completed { .. })),
        "{:?}",
        r.ranks
    );
}

#[test]
fn a_store_made_on_other_ranks_only_is_a_name_error_where_it_is_missing() {
    let src = "[world]\nranks_per_node = 2\nplatform = \"cpu\"\n\n[[step]]\nop = \"tcp_store\"\nas = \"kv\"\nhost = \"127.0.0.1\"\nport = 29620\nis_master = true\nworld_size = 1\non = [0]\n\n[[step]]\nop = \"store_num_keys\"\nstore = \"kv\"\n";
    let s = parse(src, "t.toml", "t").expect("parses");
    let r = scen_sim::simulate(&s, Some(0)).expect("simulates");
    assert!(
        matches!(r.ranks[0], RankVerdict::Completed { .. }),
        "{:?}",
        r.ranks[0]
    );
    match &r.ranks[1] {
        RankVerdict::Failed {
            failure: Failure::Raised { exception, message },
            ..
        } => {
            assert_eq!(exception, "NameError");
            assert!(message.starts_with("name 'kv' is not defined"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

/// Rank 1's failure text when rank 0 (the master) ends at once and rank 1 waits 3 s on a key
/// nobody sets, rank 0's process living 5 s and freeing its globals 0.3 s into that; `init`:
/// both ranks' init on the store first, or nothing.
fn late_client_error(init: &str) -> String {
    let head = HEAD.replace(
        "platform = \"cpu\"\n",
        "platform = \"cpu\"\nexit_ms = 5000\nglobals_freed_ms = 300\n",
    );
    let src = format!("{head}{init}\n[[step]]\nop = \"store_wait\"\non = [1]\nstore = \"kv\"\nkeys = [\"never\"]\ntimeout_s = 3\n");
    error_of(&src, 1)
}

/// A master's store closes with its program's globals, early in its teardown (measured, torch
/// 2.15: a client's wait then raises `Failed to recv`); one the default group holds
/// (`init_process_group(store=)`) closes with the process, after the client's own timeout.
#[test]
fn a_masters_store_closes_with_its_globals_unless_its_group_holds_it() {
    assert!(
        late_client_error("").starts_with("DistNetworkError: Failed to recv, got 0 bytes."),
        "{}",
        late_client_error("")
    );
    let init = "\n[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\nstore = \"kv\"\nrank = \"{rank}\"\nworld_size = 2\n";
    assert_eq!(
        late_client_error(init),
        "DistStoreError: wait timeout after 3000ms, keys: /never"
    );
}
