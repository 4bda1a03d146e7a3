//! The recording's timing end to end on records written by hand: each rank's measured
//! teardown, a rank still running at the time limit, and the race rules (record/race.rs) that
//! let an expectation take what real runs read either way.

use super::tests::{opts, T};
use super::*;

/// Rank `r` (pid 100 + r) of 2: init_process_group, then `extra` records, its Python exit at
/// 20 ms and its process gone at `gone`.
fn ended2(r: usize, extra: &str, gone: u64) -> super::parse::Proc {
    let p = format!(
        "{{\"ev\": \"proc\", \"pid\": {}, \"env\": {{\"RANK\": \"{r}\", \"WORLD_SIZE\": \"2\"}}}}\n\
         {{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\", \"t\": 0}}\n\
         {{\"ev\": \"done\", \"i\": 0, \"rank\": {r}, \"world_size\": 2, \"t\": 10}}\n\
         {extra}{{\"ev\": \"exit\", \"t\": 20}}\n{{\"ev\": \"gone\", \"t\": {gone}}}\n",
        100 + r
    );
    parse(&format!("proc{r}.jsonl"), &p).unwrap()
}

/// The records of rank `r` of a 3-rank gloo world up to its init (pid 100 + r).
fn head3(r: usize) -> String {
    format!(
        "{{\"ev\": \"proc\", \"pid\": {}, \"env\": {{\"RANK\": \"{r}\", \"WORLD_SIZE\": \"3\"}}}}\n\
         {{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\", \"t\": 0}}\n\
         {{\"ev\": \"done\", \"i\": 0, \"rank\": {r}, \"world_size\": 3, \"t\": 10}}\n",
        100 + r
    )
}

/// Rank `r` of [`head3`] whose all_reduce began at `t` and raised `msg` `after` ms later.
fn failing3(r: usize, t: u64, after: u64, msg: &str) -> super::parse::Proc {
    let p = format!(
        "{}{{\"ev\": \"call\", \"i\": 1, \"op\": \"all_reduce\", \"at\": \"/w/p.py:5\", \"group\": \"WORLD\", \"tensor\": {T}, \"t\": {t}}}\n\
         {{\"ev\": \"error\", \"i\": 1, \"exc\": \"RuntimeError\", \"msg\": \"{msg}\", \"t\": {}}}\n\
         {{\"ev\": \"raise\", \"exc\": \"RuntimeError\", \"msg\": \"{msg}\", \"at\": \"/w/p.py:5\", \"t\": {}}}\n\
         {{\"ev\": \"exit\", \"t\": {}}}\n",
        head3(r),
        t + after,
        t + after + 1,
        t + after + 10
    );
    parse(&format!("proc{r}.jsonl"), &p).unwrap()
}

/// A peer-loss text whose call began close to a peer's self-kill (6 ms before it, as in 7/487,
/// whose real runs read both) keeps only what "closed" and "reset" share, says why, and is
/// listed; one far from it keeps its own text.
#[test]
fn a_peer_loss_that_raced_a_kill_expects_either_text() {
    let closed = "[/x/pair.cc:534] Connection closed by peer [127.0.0.1]:5353. This is typically caused by a remote worker crashing.";
    let reset = "[/x/pair.cc:545] Read error [127.0.0.1]:5353: Connection reset by peer. This is typically caused by a remote worker hanging or bugs in the application.";
    let killed = parse(
        "proc2.jsonl",
        &format!(
            "{}{{\"ev\": \"end\", \"how\": \"signal\", \"signal\": 9, \"at\": \"/w/p.py:4\", \"t\": 100}}\n",
            head3(2)
        ),
    )
    .unwrap();
    let r = record(
        vec![
            failing3(0, 94, 20, closed),
            failing3(1, 300, 20, reset),
            killed,
        ],
        &opts(),
    )
    .unwrap();
    let t = &r.text;
    assert!(
        t.contains("on = [0]\noutcome = \"fails\"\nstep = 3\nerror = \"by peer\"\n"),
        "{t}"
    );
    assert!(
        t.contains("# (closed or reset by peer: its failing call began 6 ms before rank 2 sent itself SIGKILL"),
        "{t}"
    );
    assert!(
        t.contains(
            "on = [1]\noutcome = \"fails\"\nstep = 3\nerror = \"RuntimeError: Read error\"\n"
        ),
        "{t}"
    );
    assert_eq!(r.approximations.len(), 1, "{:?}", r.approximations);
    assert!(r.approximations[0].starts_with("rank 0's expectation: closed or reset by peer"));
    crate::scenario::load::parse(t, "r.toml", "r").unwrap();
}

/// A peer-loss text whose call began as a peer began the call it died in by a signal it did
/// not send itself (gloo's abort: 7/569, whose real runs read "closed" in 1 of 4 and "reset"
/// in 3) keeps what both share; one that began after that peer was gone keeps its own text.
#[test]
fn a_peer_loss_that_raced_an_abort_in_a_call_expects_either_text() {
    let closed = "[/x/pair.cc:561] Connection closed by peer [127.0.0.1]:5353. This is typically caused by a remote worker crashing.";
    // Rank 2 began its all_reduce at 101 and was gone at 142, without an end of its own.
    let aborted = parse(
        "proc2.jsonl",
        &format!(
            "{}{{\"ev\": \"call\", \"i\": 1, \"op\": \"all_reduce\", \"at\": \"/w/p.py:5\", \"group\": \"WORLD\", \"tensor\": {T}, \"t\": 101}}\n{{\"ev\": \"gone\", \"t\": 142}}\n",
            head3(2)
        ),
    )
    .unwrap();
    let r = record(
        vec![
            failing3(0, 100, 40, closed),
            failing3(1, 200, 40, closed),
            aborted,
        ],
        &opts(),
    )
    .unwrap();
    let t = &r.text;
    assert!(
        t.contains("on = [0]\noutcome = \"fails\"\nstep = 2\nerror = \"by peer\"\n"),
        "{t}"
    );
    assert!(
        t.contains("its failing call began 1 ms before rank 2 began the all_reduce it died in by a signal it did not send itself (gloo's abort), its process gone 41 ms later"),
        "{t}"
    );
    assert!(
        t.contains("on = [1]\noutcome = \"fails\"\nstep = 2\nerror = \"RuntimeError: Connection closed by peer\"\n"),
        "{t}"
    );
    assert_eq!(r.approximations.len(), 1, "{:?}", r.approximations);
    crate::scenario::load::parse(t, "r.toml", "r").unwrap();
}

/// Ranks whose gloo calls reach the same 3000 ms timeout within 2 ms: the one that read a
/// close also takes its own timeout's text, and those that timed out also take the close. A
/// rank whose own timeout was far off keeps its own text.
#[test]
fn failures_that_raced_a_timeout_take_either_text() {
    let proc_ = |r: usize, t_call: u64, t_err: u64, msg: &str| {
        let p = format!(
            "{{\"ev\": \"proc\", \"pid\": {}, \"env\": {{\"RANK\": \"{r}\", \"WORLD_SIZE\": \"4\"}}}}\n\
             {{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\", \"t\": 0}}\n\
             {{\"ev\": \"done\", \"i\": 0, \"rank\": {r}, \"world_size\": 4, \"t\": 10}}\n\
             {{\"ev\": \"call\", \"i\": 1, \"op\": \"all_reduce\", \"at\": \"/w/p.py:5\", \"group\": \"WORLD\", \"tensor\": {T}, \"t\": {t_call}}}\n\
             {{\"ev\": \"error\", \"i\": 1, \"exc\": \"RuntimeError\", \"msg\": \"{msg}\", \"t\": {t_err}}}\n\
             {{\"ev\": \"raise\", \"exc\": \"RuntimeError\", \"msg\": \"{msg}\", \"at\": \"/w/p.py:5\", \"t\": {}}}\n\
             {{\"ev\": \"exit\", \"t\": {}}}\n",
            100 + r,
            t_err + 1,
            t_err + 10
        );
        parse(&format!("proc{r}.jsonl"), &p).unwrap()
    };
    let timed_out =
        "[/x/unbound_buffer.cc:81] Timed out waiting 3000ms for send operation to complete";
    let closed = "[/x/pair.cc:534] Connection closed by peer [127.0.0.1]:5353. This is typically caused by a remote worker crashing.";
    let r = record(
        vec![
            proc_(0, 20, 3021, closed),
            proc_(1, 19, 3020, timed_out),
            proc_(2, 22, 3022, timed_out),
            proc_(3, 2000, 3022, closed),
        ],
        &opts(),
    )
    .unwrap();
    let t = &r.text;
    assert!(
        t.contains("on = [0]\noutcome = \"fails\"\nstep = 3\nerror = [\"RuntimeError: Connection closed by peer\", \"Timed out waiting\"]\n"),
        "{t}"
    );
    assert!(
        t.contains("on = [1, 2]\noutcome = \"fails\"\nstep = 3\nerror = [\"RuntimeError: Timed out waiting\", \"by peer\"]\n"),
        "{t}"
    );
    assert!(
        t.contains("on = [3]\noutcome = \"fails\"\nstep = 3\nerror = \"RuntimeError: Connection closed by peer\"\n"),
        "{t}"
    );
    assert!(
        t.contains(
            "# (timed out or closed by peer: rank 1 timed out 1 ms from this rank's failure"
        ),
        "{t}"
    );
    assert_eq!(r.approximations.len(), 3, "{:?}", r.approximations);
    let s = crate::scenario::load::parse(t, "r.toml", "r").unwrap();
    assert_eq!(s.expect.iter().filter(|e| e.error.len() == 2).count(), 2);
}

/// A call that failed with "Application timeout caused pair closure" at its group's own
/// timeout also takes the timeout's text: its own timeout in gloo's other words (7/330).
#[test]
fn a_pairs_closure_at_its_own_timeout_also_takes_the_timeout_text() {
    let p = "{\"ev\": \"proc\", \"pid\": 101, \"env\": {\"RANK\": \"0\", \"WORLD_SIZE\": \"1\"}}\n\
             {\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\", \"timeout_ms\": 3000, \"t\": 0}\n\
             {\"ev\": \"done\", \"i\": 0, \"rank\": 0, \"world_size\": 1, \"t\": 10}\n\
             {\"ev\": \"call\", \"i\": 1, \"op\": \"all_reduce\", \"at\": \"/w/p.py:5\", \"group\": \"WORLD\", \"tensor\": TENSOR, \"t\": 20}\n\
             {\"ev\": \"error\", \"i\": 1, \"exc\": \"RuntimeError\", \"msg\": \"Application timeout caused pair closure\", \"t\": 3027}\n\
             {\"ev\": \"raise\", \"exc\": \"RuntimeError\", \"msg\": \"Application timeout caused pair closure\", \"at\": \"/w/p.py:5\", \"t\": 3028}\n\
             {\"ev\": \"exit\", \"t\": 3040}\n"
        .replace("TENSOR", T);
    let r = record(vec![parse("proc0.jsonl", &p).unwrap()], &opts()).unwrap();
    let t = &r.text;
    assert!(
        t.contains("error = [\"RuntimeError: Application timeout caused pair closure\", \"Timed out waiting\"]\n"),
        "{t}"
    );
    assert!(
        t.contains("# (its own timeout, in gloo's other words"),
        "{t}"
    );
    crate::scenario::load::parse(t, "r.toml", "r").unwrap();
}

/// A failure that raced a death and a timeout at once takes both loosenings: what closed and
/// reset share, or the other rank's timeout (7/361, whose real runs read a peer loss and the
/// timeout).
#[test]
fn a_failure_that_raced_a_death_and_a_timeout_takes_both() {
    let proc_ = |r: usize, tail: &str| {
        let p = format!(
            "{{\"ev\": \"proc\", \"pid\": {}, \"env\": {{\"RANK\": \"{r}\", \"WORLD_SIZE\": \"3\"}}}}\n\
             {{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\", \"t\": 0}}\n\
             {{\"ev\": \"done\", \"i\": 0, \"rank\": {r}, \"world_size\": 3, \"t\": 10}}\n{tail}",
            100 + r
        );
        parse(&format!("proc{r}.jsonl"), &p).unwrap()
    };
    let failing = |t_call: u64, t_err: u64, msg: &str| {
        format!(
            "{{\"ev\": \"call\", \"i\": 1, \"op\": \"all_reduce\", \"at\": \"/w/p.py:5\", \"group\": \"WORLD\", \"tensor\": {T}, \"t\": {t_call}}}\n\
             {{\"ev\": \"error\", \"i\": 1, \"exc\": \"RuntimeError\", \"msg\": \"{msg}\", \"t\": {t_err}}}\n\
             {{\"ev\": \"raise\", \"exc\": \"RuntimeError\", \"msg\": \"{msg}\", \"at\": \"/w/p.py:5\", \"t\": {}}}\n\
             {{\"ev\": \"exit\", \"t\": {}}}\n",
            t_err + 1,
            t_err + 10
        )
    };
    let timed_out =
        "[/x/unbound_buffer.cc:81] Timed out waiting 3000ms for send operation to complete";
    let reset = "[/x/pair.cc:545] Read error [127.0.0.1]:5353: Connection reset by peer. This is typically caused by a remote worker hanging or bugs in the application.";
    let killed =
        "{\"ev\": \"end\", \"how\": \"signal\", \"signal\": 9, \"at\": \"/w/p.py:4\", \"t\": 25}\n";
    let r = record(
        vec![
            proc_(0, &failing(20, 3021, reset)),
            proc_(1, &failing(19, 3020, timed_out)),
            proc_(2, killed),
        ],
        &opts(),
    )
    .unwrap();
    let t = &r.text;
    assert!(
        t.contains("on = [0]\noutcome = \"fails\"\nstep = 2\nerror = [\"by peer\", \"Timed out waiting\"]\n"),
        "{t}"
    );
    assert!(t.contains("# (closed or reset by peer: its failing call began 5 ms before rank 2 sent itself SIGKILL"), "{t}");
    assert!(
        t.contains(
            "# (timed out or closed by peer: rank 1 timed out 1 ms from this rank's failure"
        ),
        "{t}"
    );
    crate::scenario::load::parse(t, "r.toml", "r").unwrap();
}

/// Under torchrun, a rank the agent stopped while blocked in a call with a rank whose process
/// had ended also takes that close's text; one whose call began well after keeps SIGTERM.
#[test]
fn a_rank_the_agent_stopped_as_a_peer_ended_takes_either_text() {
    let head = |r: usize| super::tests::torchrun_head(r, 4);
    let raising = format!(
        "{}{{\"ev\": \"raise\", \"exc\": \"ValueError\", \"msg\": \"gives up\", \"at\": \"/w/p.py:4\", \"t\": 500}}\n\
         {{\"ev\": \"exit\", \"t\": 520}}\n",
        head(0)
    );
    let blocked = |r: usize, t: u64| {
        format!(
            "{}{{\"ev\": \"call\", \"i\": 1, \"op\": \"all_reduce\", \"at\": \"/w/p.py:5\", \"group\": \"WORLD\", \"tensor\": {T}, \"t\": {t}}}\n",
            head(r)
        )
    };
    let closed = "[/x/pair.cc:534] Connection closed by peer [127.0.0.1]:5353. This";
    let raised = format!(
        "{}{{\"ev\": \"error\", \"i\": 1, \"exc\": \"RuntimeError\", \"msg\": \"{closed}\", \"t\": 530}}\n\
         {{\"ev\": \"raise\", \"exc\": \"RuntimeError\", \"msg\": \"{closed}\", \"at\": \"/w/p.py:5\", \"t\": 531}}\n\
         {{\"ev\": \"exit\", \"t\": 540}}\n",
        blocked(3, 100)
    );
    let r = record(
        vec![
            parse("proc0.jsonl", &raising).unwrap(),
            parse("proc1.jsonl", &blocked(1, 100)).unwrap(),
            parse("proc2.jsonl", &blocked(2, 900)).unwrap(),
            parse("proc3.jsonl", &raised).unwrap(),
        ],
        &opts(),
    )
    .unwrap();
    let t = &r.text;
    assert!(
        t.contains(
            "on = [1]\noutcome = \"fails\"\nstep = 5\nerror = [\"SIGTERM\", \"RuntimeError\"]\n"
        ),
        "{t}"
    );
    assert!(
        t.contains("on = [2]\noutcome = \"fails\"\nstep = 5\nerror = \"SIGTERM\"\n"),
        "{t}"
    );
    assert!(
        t.contains("# (stopped by torchrun's agent or raised: rank 0's process ended 400 ms after"),
        "{t}"
    );
    assert!(
        t.contains("on = [3]\noutcome = \"fails\"\nstep = 5\nerror = [\"RuntimeError: Connection closed by peer\", \"SIGTERM\"]\n"),
        "{t}"
    );
    crate::scenario::load::parse(t, "r.toml", "r").unwrap();
}

/// Under torchrun, a rank the agent stopped in a call with a rank that aborted in a call of
/// its own (gloo's SIGABRT) could have raised on its close first: it takes either end (7/569,
/// whose rank 0 read the reset in 2 of 4 real runs and SIGTERM in the other 2).
#[test]
fn a_rank_the_agent_stopped_as_a_peer_aborted_takes_either_text() {
    let head = |r: usize| {
        format!(
            "{{\"ev\": \"proc\", \"pid\": {}, \"env\": {{\"RANK\": \"{r}\", \"WORLD_SIZE\": \"2\", \"TORCHELASTIC_RUN_ID\": \"x\"}}}}\n\
             {{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\", \"t\": 0}}\n\
             {{\"ev\": \"done\", \"i\": 0, \"rank\": {r}, \"world_size\": 2, \"t\": 10}}\n\
             {{\"ev\": \"call\", \"i\": 1, \"op\": \"all_reduce\", \"at\": \"/w/p.py:5\", \"group\": \"WORLD\", \"tensor\": {T}, \"t\": 100}}\n",
            100 + r
        )
    };
    let aborted = format!("{}{{\"ev\": \"gone\", \"t\": 140}}\n", head(0));
    let agent = "{\"ev\": \"proc\", \"pid\": 50, \"env\": {}}\n{\"ev\": \"worker_exit\", \"pid\": 100, \"exitcode\": -6, \"t\": 200}\n";
    let r = record(
        vec![
            parse("proc0.jsonl", &aborted).unwrap(),
            parse("proc1.jsonl", &head(1)).unwrap(),
            parse("proc50.jsonl", agent).unwrap(),
        ],
        &opts(),
    )
    .unwrap();
    let t = &r.text;
    assert!(
        t.contains(
            "on = [1]\noutcome = \"fails\"\nstep = 2\nerror = [\"SIGTERM\", \"RuntimeError\"]\n"
        ),
        "{t}"
    );
    assert!(
        t.contains("# (stopped by torchrun's agent or raised: rank 0's process ended 40 ms after"),
        "{t}"
    );
    crate::scenario::load::parse(t, "r.toml", "r").unwrap();
}

/// A rank whose call raised on a peer's close, stopped by torchrun's agent before the
/// exception reached its program's top (no `raise`: 7/587), takes either end as one the agent
/// stopped while the call still ran.
#[test]
fn a_rank_the_agent_stopped_while_its_call_raised_takes_either_text() {
    let head = |r: usize| {
        format!(
            "{{\"ev\": \"proc\", \"pid\": {}, \"env\": {{\"RANK\": \"{r}\", \"WORLD_SIZE\": \"2\", \"TORCHELASTIC_RUN_ID\": \"x\"}}}}\n\
             {{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\", \"t\": 0}}\n\
             {{\"ev\": \"done\", \"i\": 0, \"rank\": {r}, \"world_size\": 2, \"t\": 10}}\n",
            100 + r
        )
    };
    let exiting = format!(
        "{}{{\"how\": \"exit\", \"code\": 3, \"ev\": \"end\", \"at\": \"/w/p.py:4\", \"t\": 20}}\n{{\"ev\": \"exit\", \"t\": 25}}\n{{\"ev\": \"gone\", \"t\": 490}}\n",
        head(0)
    );
    let closed = "[/x/pair.cc:561] Connection closed by peer [127.0.0.1]:5353. This";
    let stopped = format!(
        "{}{{\"ev\": \"call\", \"i\": 1, \"op\": \"all_reduce\", \"at\": \"/w/p.py:5\", \"group\": \"WORLD\", \"tensor\": {T}, \"t\": 20}}\n\
         {{\"ev\": \"error\", \"i\": 1, \"exc\": \"RuntimeError\", \"msg\": \"{closed}\", \"t\": 494}}\n{{\"ev\": \"gone\", \"t\": 560}}\n",
        head(1)
    );
    let agent = "{\"ev\": \"proc\", \"pid\": 50, \"env\": {}}\n{\"ev\": \"worker_exit\", \"pid\": 100, \"exitcode\": 3, \"t\": 550}\n";
    let r = record(
        vec![
            parse("proc0.jsonl", &exiting).unwrap(),
            parse("proc1.jsonl", &stopped).unwrap(),
            parse("proc50.jsonl", agent).unwrap(),
        ],
        &opts(),
    )
    .unwrap();
    let t = &r.text;
    assert!(
        t.contains(
            "on = [1]\noutcome = \"fails\"\nstep = 3\nerror = [\"SIGTERM\", \"RuntimeError\"]\n"
        ),
        "{t}"
    );
    crate::scenario::load::parse(t, "r.toml", "r").unwrap();
}

/// A process's measured teardown (its atexit handlers to its `gone` line, from scen record's
/// lifeline) is that rank's `exit_ms`; a rank whose end was not seen keeps the default.
#[test]
fn a_measured_teardown_is_the_ranks_exit_ms() {
    let rank = |r: usize, gone: &str| {
        let p = format!(
            "{{\"ev\": \"proc\", \"pid\": {}, \"env\": {{\"RANK\": \"{r}\", \"WORLD_SIZE\": \"2\"}}}}\n\
             {{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\", \"t\": 0}}\n\
             {{\"ev\": \"done\", \"i\": 0, \"rank\": {r}, \"world_size\": 2, \"t\": 10}}\n\
             {{\"ev\": \"exit\", \"t\": 20}}\n{gone}",
            100 + r
        );
        parse(&format!("proc{r}.jsonl"), &p).unwrap()
    };
    let r = record(
        vec![rank(0, "{\"ev\": \"gone\", \"t\": 1254}\n"), rank(1, "")],
        &opts(),
    )
    .unwrap();
    let t = &r.text;
    assert!(
        t.contains(
            "lived 1234 ms after its program (its teardown)\non = \"rank == 0\"\nexit_ms = 1234\n"
        ),
        "{t}"
    );
    assert!(!t.contains("rank == 1"), "{t}");
    let s = crate::scenario::load::parse(t, "r.toml", "r").unwrap();
    assert_eq!(s.world.exit_ms_of(0), 1234);
    assert_eq!(s.world.exit_ms_of(1), crate::scenario::DEFAULT_EXIT_MS);
}

/// A rank torchrun's agent stopped in its teardown lived at least until then, and its
/// `exit_ms` says so, so the simulated agent names the rank real torchrun named (7/523); it
/// lives a monitor interval longer, as the simulated stop may come that much later than the
/// real one (7/533).
#[test]
fn a_rank_the_agent_stopped_in_its_teardown_keeps_the_time_it_lived() {
    let rank = |r: usize, gone: u64| ended2(r, "", gone);
    // torchrun's agent, in its own process, notes rank 1's (pid 101) status: SIGTERM.
    let agent = parse(
        "proc50.jsonl",
        "{\"ev\": \"proc\", \"pid\": 50, \"env\": {}}\n{\"ev\": \"worker_exit\", \"pid\": 101, \"exitcode\": -15, \"t\": 800}\n",
    )
    .unwrap();
    let r = record(vec![rank(0, 684), rank(1, 820), agent.clone()], &opts()).unwrap();
    let t = &r.text;
    assert!(
        t.contains(
            "lived 664 ms after its program (its teardown)\non = \"rank == 0\"\nexit_ms = 664\n"
        ),
        "{t}"
    );
    assert!(
        t.contains("lived 800 ms after its program until torchrun's agent stopped it in its teardown (its own was longer)\non = \"rank == 1\"\nexit_ms = 900\n"),
        "{t}"
    );
    // Stopped 0.1 s into its teardown: at least the default, so the simulated stop finds it
    // still there (7/342).
    let r = record(vec![rank(0, 684), rank(1, 120), agent], &opts()).unwrap();
    assert!(
        r.text.contains("lived 100 ms after its program until torchrun's agent stopped it in its teardown (its own was longer)\non = \"rank == 1\"\nexit_ms = 450\n"),
        "{}",
        r.text
    );
    // A signal of its own in its teardown after a raise (gloo's SIGABRT, status -6) is no
    // stop: the rank keeps the teardown it measured (7/533's rank 4, 60 ms).
    let aborted = parse(
        "proc50.jsonl",
        "{\"ev\": \"proc\", \"pid\": 50, \"env\": {}}\n{\"ev\": \"worker_exit\", \"pid\": 101, \"exitcode\": -6, \"t\": 800}\n",
    )
    .unwrap();
    let raise = "{\"ev\": \"raise\", \"exc\": \"ValueError\", \"msg\": \"gives up\", \"at\": \"/w/p.py:4\", \"t\": 20}\n";
    let raised = |r: usize, gone: u64| ended2(r, raise, gone);
    let r = record(vec![rank(0, 684), raised(1, 80), aborted], &opts()).unwrap();
    assert!(
        r.text.contains(
            "lived 60 ms after its program (its teardown)\non = \"rank == 1\"\nexit_ms = 60\n"
        ),
        "{}",
        r.text
    );
}

/// A rank in its own code at scen record's time limit sleeps until the limit and as long again,
/// so its simulation is still asleep at `after_s` however much of the job's real time the
/// simulator does not spend (7/399: a sleep that ended at the limit completed it 7 ms early).
#[test]
fn a_rank_in_its_own_code_at_the_time_limit_sleeps_past_it() {
    let rank = |r: usize, tail: &str| {
        let p = format!(
            "{{\"ev\": \"proc\", \"pid\": {}, \"env\": {{\"RANK\": \"{r}\", \"WORLD_SIZE\": \"2\"}}}}\n\
             {{\"ev\": \"call\", \"i\": 0, \"op\": \"init_process_group\", \"at\": \"/w/p.py:3\", \"backend\": \"gloo\", \"t\": 0}}\n\
             {{\"ev\": \"done\", \"i\": 0, \"rank\": {r}, \"world_size\": 2, \"t\": 2000}}\n{tail}",
            100 + r
        );
        parse(&format!("proc{r}.jsonl"), &p).unwrap()
    };
    let waiting = "{\"ev\": \"call\", \"i\": 1, \"op\": \"barrier\", \"at\": \"/w/p.py:5\", \"group\": \"WORLD\", \"t\": 2001}\n";
    let o = Options {
        timed_out: true,
        cut_ms: Some(20_000),
        ..opts()
    };
    let r = record(vec![rank(0, waiting), rank(1, "")], &o).unwrap();
    let s = crate::scenario::load::parse(&r.text, "r.toml", "r").unwrap();
    let sleep_ms: u64 = r
        .text
        .split("op = \"sleep\"\non = [1]\nms = ")
        .nth(1)
        .and_then(|t| t.lines().next()?.parse().ok())
        .unwrap_or_else(|| panic!("{}", r.text));
    // 20 s from the first call: the limit (18 s after rank 1's last call), 1 s, and 20 s again.
    assert!(sleep_ms >= 38_000, "{sleep_ms}\n{}", r.text);
    let running = |r: usize| {
        matches!(
            crate::verdict::expectation_for(&s, r).map(|e| e.outcome),
            Some(crate::scenario::ExpectedOutcome::Running { after_ms: 20_000 })
        )
    };
    assert!(running(0) && running(1), "{}", r.text);
}

/// Under torchrun, a blocked rank ends by the agent's SIGTERM or by a failed peer's close,
/// whichever comes first (7/980): the recording keeps the agent's stop as the run measured it
/// (`agent_check_ms`, `agent_stop_ms`) and the order and gaps of the failed ranks' process ends, measuring each
/// teardown from the first end of the ranks that end together (they do in the simulation).
#[test]
fn under_torchrun_the_agents_stop_and_the_order_of_the_ends_are_kept() {
    let torchrun = |r: usize, body: &str| {
        let p = format!("{}{body}", super::tests::torchrun_head(r, 3));
        parse(&format!("proc{r}.jsonl"), &p).unwrap()
    };
    let raised = |end: u64, gone: u64| {
        format!(
            "{{\"ev\": \"call\", \"i\": 1, \"op\": \"all_reduce\", \"at\": \"/w/p.py:5\", \"group\": \"WORLD\", \"tensor\": {T}, \"t\": 20}}\n\
             {{\"ev\": \"error\", \"i\": 1, \"exc\": \"RuntimeError\", \"msg\": \"x\", \"t\": {end}}}\n\
             {{\"ev\": \"raise\", \"exc\": \"RuntimeError\", \"msg\": \"x\", \"at\": \"/w/p.py:5\", \"t\": {end}}}\n\
             {{\"ev\": \"exit\", \"t\": {}}}\n{{\"ev\": \"gone\", \"t\": {gone}}}\n",
            end + 10
        )
    };
    let blocked = format!(
        "{{\"ev\": \"call\", \"i\": 1, \"op\": \"broadcast\", \"at\": \"/w/p.py:6\", \"group\": \"WORLD\", \"tensor\": {T}, \"src\": 1, \"t\": 20}}\n\
         {{\"ev\": \"gone\", \"t\": 2352}}\n"
    );
    let agent = parse(
        "proc50.jsonl",
        "{\"ev\": \"proc\", \"pid\": 50, \"env\": {}}\n\
         {\"ev\": \"worker_exit\", \"pid\": 100, \"exitcode\": 1, \"t\": 2330}\n\
         {\"ev\": \"worker_exit\", \"pid\": 101, \"exitcode\": 1, \"t\": 2400}\n\
         {\"ev\": \"worker_exit\", \"pid\": 102, \"exitcode\": -15, \"t\": 2400}\n",
    )
    .unwrap();
    let procs = vec![
        torchrun(0, &raised(1000, 2314)),
        torchrun(1, &raised(1025, 2366)),
        torchrun(2, &blocked),
        agent,
    ];
    let r = record(procs, &opts()).unwrap();
    let t = &r.text;
    // The agent's check noted rank 0's exit 16 ms after it, and the SIGTERM had ended rank 2
    // 22 ms after that.
    assert!(t.contains("\nagent_check_ms = 16  # recorded:"), "{t}");
    assert!(t.contains("\nagent_stop_ms = 22  # recorded:"), "{t}");
    assert!(t.contains("on = \"rank == 0\"\nexit_ms = 1314\n"), "{t}");
    assert!(
        t.contains("lived 1366 ms after its program (its teardown), counted from the first program end 25 ms before its own"),
        "{t}"
    );
    assert!(t.contains("on = \"rank == 1\"\nexit_ms = 1366\n"), "{t}");
    let s = crate::scenario::load::parse(t, "r.toml", "r").unwrap();
    assert_eq!(
        s.world.agent,
        crate::runtime::torchrun::AgentTiming {
            check_ms: 16,
            stop_ms: 22
        }
    );
    assert_eq!(s.world.exit_ms_of(1), 1366);
}

/// A rank whose program completed and whose process then aborted in its teardown (gloo's
/// abort at exit; torchrun's agent saw status -6) ends at an `exit` step with that signal
/// after its last call, so the simulated agent stops the others as the real one did (7/1180).
#[test]
fn a_rank_that_aborted_in_its_teardown_ends_with_that_signal() {
    let rank = |r: usize, gone: u64| ended2(r, "", gone);
    let agent = parse(
        "proc50.jsonl",
        "{\"ev\": \"proc\", \"pid\": 50, \"env\": {}}\n\
         {\"ev\": \"worker_exit\", \"pid\": 100, \"exitcode\": -6, \"t\": 150}\n\
         {\"ev\": \"worker_exit\", \"pid\": 101, \"exitcode\": -15, \"t\": 200}\n",
    )
    .unwrap();
    let r = record(vec![rank(0, 76), rank(1, 220), agent], &opts()).unwrap();
    let t = &r.text;
    assert!(
        t.contains("then SIGABRT ended its process in its teardown")
            && t.contains("op = \"exit\"\non = [0]\nsignal = \"SIGABRT\""),
        "{t}"
    );
    assert!(!t.contains("on = \"rank == 0\""), "{t}");
    assert!(
        r.outcomes
            .iter()
            .any(|l| l == "rank 0: completed, then its process ended by SIGABRT in its teardown"),
        "{:?}",
        r.outcomes
    );
}
