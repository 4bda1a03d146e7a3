//! The file:// (FileStore) rendezvous beyond the shipped gloo_file_* scenarios: what scen
//! refuses with its own text (stale keys, c10d/store/file.rs) instead of a verdict real PyTorch
//! would not give, and that a store file is one node's, shared by its ranks across inits.

use scen_core::outcome::Failure;
use scen_core::report::Report;
use scen_core::scenario::parse;
use scen_core::verdict::RankVerdict;

const HEAD: &str = "[world]\nranks_per_node = 3\nplatform = \"cpu\"\n";

fn init(id: &str, path: &str) -> String {
    format!("\n[[step]]\nid = \"{id}\"\nop = \"init_process_group\"\nbackend = \"gloo\"\ninit_method = \"file://{path}\"\nrank = \"rank\"\nworld_size = 3\ntimeout_s = 3\n")
}

const ALL_REDUCE: &str = "\n[[step]]\nop = \"all_reduce\"\nfill = \"rank + 1\"\nexpect = \"6\"\n";

fn run(src: &str, seed: u64) -> Report {
    let s = parse(src, "t.toml", "t").expect("parses");
    scen_sim::simulate(&s, Some(seed)).expect("simulates")
}

/// Per rank: `Some((step, text))` for a failure, `None` for a completion.
fn ends(r: &Report) -> Vec<Option<(usize, String)>> {
    r.ranks
        .iter()
        .map(|v| match v {
            RankVerdict::Completed { .. } => None,
            RankVerdict::Failed { step, failure, .. } => Some((*step, failure_text(failure))),
            other => Some((usize::MAX, format!("{other:?}"))),
        })
        .collect()
}

fn failure_text(f: &Failure) -> String {
    match f {
        Failure::Raised { exception, message } => format!("{exception}: {message}"),
        other => format!("{other:?}"),
    }
}

const STALE: &str = "was written by another process group than this init's";

/// Real torch 2.15 fails an init again on the same path by timing (scripts/torch-checks/
/// filestore.sh case `reinit`); scen never lets it complete, and says why on some rank.
#[test]
fn init_again_on_the_same_path_is_refused_as_stale_never_completed() {
    let src = format!(
        "{HEAD}{}{ALL_REDUCE}\n[[step]]\nop = \"destroy_process_group\"\n{}{ALL_REDUCE}",
        init("first", "/tmp/scen/f"),
        init("again", "/tmp/scen/f")
    );
    for seed in 0..4 {
        let e = ends(&run(&src, seed));
        for (r, end) in e.iter().enumerate() {
            let (step, text) = end
                .as_ref()
                .unwrap_or_else(|| panic!("seed {seed}: rank {r} completed: {e:?}"));
            assert!(
                *step >= 3,
                "seed {seed}: rank {r} failed before the second init: {text}"
            );
        }
        assert!(
            e.iter().flatten().any(|(_, t)| t.contains(STALE)),
            "seed {seed}: {e:?}"
        );
    }
}

/// A rank arriving after the others' init gave up reads keys of stores freed since (real
/// torch 2.15, case `late5`: gloo's `Connect timeout` after 15 s): scen's own text.
#[test]
fn a_rank_late_past_the_timeout_reads_stale_keys() {
    let src = format!(
        "{HEAD}\n[[step]]\non = [2]\nop = \"sleep\"\nms = 5000\n{}{ALL_REDUCE}",
        init("init", "/tmp/scen/f")
    );
    let e = ends(&run(&src, 0));
    for r in [0, 1] {
        assert_eq!(
            e[r],
            Some((1, "RuntimeError: Wait timeout".to_string())),
            "{e:?}"
        );
    }
    let (step, text) = e[2].clone().expect("rank 2 fails");
    assert_eq!(step, 1);
    assert!(
        text.contains(STALE) && text.contains("file:///tmp/scen/f"),
        "{text}"
    );
}

/// Two paths are two stores: ranks that name different files never meet.
#[test]
fn ranks_on_different_paths_never_meet() {
    let src = format!("{HEAD}{}", init("init", "/tmp/scen/f{rank}"));
    let e = ends(&run(&src, 0));
    assert!(
        e.iter().all(|x| x
            .as_ref()
            .is_some_and(|(_, t)| t == "RuntimeError: Wait timeout")),
        "{e:?}"
    );
}

/// A relative path after `file://` is urlparse's netloc, not a path (real torch 2.15, case
/// `relative`).
#[test]
fn file_url_without_a_path_is_path_missing() {
    let src = format!("{HEAD}{}", init("init", "fstore"));
    let e = ends(&run(&src, 0));
    assert!(
        e.iter().all(|x| x.as_ref().is_some_and(|(_, t)| t
            == "ValueError: Error initializing torch.distributed using file:// rendezvous: path missing")),
        "{e:?}"
    );
}

/// DETAIL's monitoredBarrier is gloo's, modelled over the store: a file:// store leaves its
/// timeout as it is over tcp:// (FileStore's whole-second give-up is its own reads'). Rank 2
/// stays alive past the timeout (a rank that exits fails the barrier as its pairs close).
#[test]
fn detail_monitored_barrier_times_out_alike_on_file_and_tcp() {
    let at = |url: &str| {
        let src = format!(
            "[world]\nranks_per_node = 3\nplatform = \"cpu\"\nenv = {{ TORCH_DISTRIBUTED_DEBUG = \"DETAIL\" }}\n\n[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\ninit_method = \"{url}\"\nrank = \"rank\"\nworld_size = 3\ntimeout_s = 3\n\n[[step]]\non = [0, 1]\nop = \"all_reduce\"\nfill = \"1\"\n\n[[step]]\non = [2]\nop = \"sleep\"\nms = 10000\n"
        );
        let r = run(&src, 0);
        match &r.ranks[0] {
            RankVerdict::Failed { t_ms, failure, .. } => (*t_ms, failure_text(failure)),
            other => panic!("{other:?}"),
        }
    };
    let (file_ms, file_text) = at("file:///tmp/scen/f");
    let (tcp_ms, tcp_text) = at("tcp://127.0.0.1:29600");
    assert_eq!(file_ms, 3000);
    assert_eq!((file_ms, &file_text), (tcp_ms, &tcp_text));
    assert!(
        file_text.contains("failed to pass monitoredBarrier in 3000 ms"),
        "{file_text}"
    );
}
