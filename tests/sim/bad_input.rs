//! The bad-input matrix (issue 12): every malformed or hostile scenario is refused before it
//! runs with a message naming file:line:col, never a panic, an abort or a silent acceptance.
//! Cases are (name, file text, expected "line:col", text the message must contain). The
//! reproducers of ../shared/fuzz-repro that are about loading are here as cases too.

use scen_core::scenario::parse;

const W2: &str = "[world]\nranks_per_node = 2\nplatform = \"cpu\"\n";
const INIT: &str = "[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\n";

struct Case {
    name: &'static str,
    text: String,
    at: &'static str,
    says: &'static str,
}

fn case(name: &'static str, text: impl Into<String>, at: &'static str, says: &'static str) -> Case {
    Case {
        name,
        text: text.into(),
        at,
        says,
    }
}

/// `W2` + `INIT` + a step body: the step's `op` line is line 7.
fn step(body: &str) -> String {
    format!("{W2}{INIT}[[step]]\n{body}")
}

fn cases() -> Vec<Case> {
    let deep = format!("{}rank{}", "(".repeat(70), ")".repeat(70));
    let long = vec!["rank"; 600].join(" + ");
    vec![
        // Structure and TOML syntax.
        case("toml syntax", "[world\n", "1:7", "invalid table header"),
        case("unknown top-level table", "[wrld]\n", "1:2", "unknown field `wrld`"),
        case("unknown world key", "[world]\nnode_count = 2\n", "2:1", "unknown field `node_count`"),
        case("duplicate table", "[world]\nnodes = 1\n[world]\nnodes = 2\n", "3:1", "duplicate key"),
        case("duplicate key", "[world]\nnodes = 1\nnodes = 2\n", "3:1", "duplicate key"),
        case("wrong type", "[world]\nranks_per_node = \"four\"\n", "2:18", "invalid type"),
        case("float for int", "[world]\nnodes = 1.5\n", "2:9", "invalid type"),
        // World values.
        case("zero nodes", "[world]\nnodes = 0\n", "2:9", "nodes must be between 1 and 4096"),
        case("negative ranks", "[world]\nranks_per_node = -3\n", "2:18", "between 1 and 4096"),
        case("world over the limit (16M ranks)", "[world]\nnodes = 4096\nranks_per_node = 4096\n", "3:18", "world too large: 4096 nodes x 4096 ranks"),
        case("unknown platform", "[world]\nplatform = \"tpu\"\n", "2:12", "unknown platform `tpu`"),
        case("master_port out of range", "[world]\nmaster_port = 70000\n", "2:15", "master_port must be 0..65535"),
        case("unknown master_addr", "[world]\nnodes = 2\nmaster_addr = \"node7\"\n", "3:15", "unknown host `node7`"),
        case("node override out of range", "[world]\nnodes = 2\n[[world.node]]\nnode = 5\n", "4:8", "node 5 is out of range"),
        case("service port 0", "[world]\n[[world.service]]\nkind = \"tcp_store\"\nnode = 0\nport = 0\nworld_size = 2\n", "5:8", "port must be 1..65535"),
        case("unknown service kind", "[world]\n[[world.service]]\nkind = \"redis\"\nnode = 0\nport = 1\nworld_size = 2\n", "3:8", "unknown service kind"),
        // Steps.
        case("step without op", format!("{W2}[[step]]\nid = \"x\"\n"), "4:1", "step 1 has no `op`"),
        case("unknown op", format!("{W2}[[step]]\nop = \"all_reduse\"\n"), "5:6", "unknown op `all_reduse`"),
        case("field of another op", step("op = \"barrier\"\ndtype = \"f32\"\n"), "9:9", "`dtype` does not apply to barrier"),
        case("send without dst (at the step)", step("op = \"send\"\n"), "8:6", "`dst` is required"),
        case("recv without src (at the step)", step("op = \"recv\"\n"), "8:6", "`src` is required"),
        case("broadcast without src", step("op = \"broadcast\"\n"), "8:6", "broadcast needs `src`"),
        case("dst out of range", step("op = \"send\"\ndst = 2\n"), "9:7", "rank 2 is out of range"),
        case("on out of range", step("op = \"barrier\"\non = [9]\n"), "9:6", "rank 9 is out of range"),
        case("unknown dtype", step("op = \"all_reduce\"\ndtype = \"f33\"\n"), "9:9", "unknown dtype `f33`"),
        case("unknown reduce_op", step("op = \"all_reduce\"\nreduce_op = \"mean\"\n"), "9:13", "unknown reduce_op `mean`"),
        case("unknown device", step("op = \"all_reduce\"\ndevice = \"gpu\"\n"), "9:10", "unknown device `gpu`"),
        case("negative dimension", step("op = \"all_reduce\"\nshape = [4, -1]\n"), "9:9", "bad dimension -1"),
        case("shape product wraps (2^64 elements)", step("op = \"all_reduce\"\nshape = [268435456, 268435456, 256]\n"), "9:9", "tensor too large"),
        case("coalesced tensors over the byte limit", step("op = \"all_reduce_coalesced\"\ncount = 64\nshape = [268435456]\n"), "8:6", "over scen's limit of 256.0 MiB per rank"),
        case("all_gather over the byte limit", format!("[world]\nranks_per_node = 4\nplatform = \"cpu\"\n{INIT}[[step]]\nop = \"all_gather\"\ndtype = \"f64\"\nshape = [268435456]\n"), "8:6", "all_gather needs about"),
        case("count out of range", step("op = \"all_reduce_coalesced\"\ncount = 65\n"), "9:9", "count must be between 1 and 64"),
        case("split sizes alone", step("op = \"all_to_all_single\"\ninput_split_sizes = [1, 1]\n"), "9:21", "go together"),
        case("negative split size", step("op = \"all_to_all_single\"\ninput_split_sizes = [1, -1]\noutput_split_sizes = [1, 1]\n"), "9:21", "bad split size -1"),
        case("async without work", step("op = \"all_reduce\"\nasync_op = true\n"), "9:12", "needs `work"),
        case("wait on unknown work", step("op = \"wait\"\nwork = \"h\"\n"), "9:8", "unknown work `h`"),
        case("unknown group", step("op = \"barrier\"\ngroup = \"tp\"\n"), "9:9", "unknown group `tp`"),
        case("sleep negative", step("op = \"sleep\"\nms = -1\n"), "9:6", "ms must be between 0 and"),
        case("sleep over 30 days", step("op = \"sleep\"\nms = 9223372036854775807\n"), "9:6", "scen's limit for a duration"),
        case("timeout zero", format!("{W2}[[step]]\nop = \"init_process_group\"\ntimeout_s = 0.0\n"), "6:13", "timeout_s must be a positive number"),
        case("timeout over 30 days", format!("{W2}[[step]]\nop = \"init_process_group\"\ntimeout_s = 1e12\n"), "6:13", "scen's limit for a duration"),
        case("bad init_method port", format!("{W2}[[step]]\nop = \"init_process_group\"\ninit_method = \"tcp://localhost:99999\"\n"), "6:15", "bad init_method"),
        case("bad device_id type", format!("{W2}[[step]]\nop = \"init_process_group\"\ndevice_id = \"tpu:0\"\n"), "6:13", "the type must be xpu, cuda, cpu or mps"),
        // Formulas.
        case("`=` in a formula hints `==`", step("op = \"barrier\"\non = \"rank = 0\"\n"), "9:12", "use `==` to compare"),
        case("single & in a formula", step("op = \"barrier\"\non = \"rank > 0 & rank < 2\"\n"), "9:16", "use `&&`"),
        case("unknown variable", step("op = \"all_reduce\"\nfill = \"rnk\"\n"), "9:9", "rnk"),
        case("unknown function", step("op = \"all_reduce\"\nfill = \"sqrt(rank)\"\n"), "9:9", "unknown function `sqrt`"),
        case("formula ends early", step("op = \"all_reduce\"\nfill = \"rank +\"\n"), "9:15", "expression ends too early"),
        case("non-ASCII shown as itself", step("op = \"all_reduce\"\nfill = \"rank × 2\"\n"), "9:14", "unexpected character `×`"),
        case("deep nesting", step(&format!("op = \"all_reduce\"\nfill = \"{deep}\"\n")), "9:74", "nested too deeply: more than 64 levels"),
        case("too many tokens", step(&format!("op = \"all_reduce\"\nfill = \"{long}\"\n")), "9:", "formula too long: more than 1000 tokens"),
        case("10k parentheses (was a stack overflow)", step(&format!("op = \"all_reduce\"\nfill = \"{}rank{}\"\n", "(".repeat(10_000), ")".repeat(10_000))), "9:", "scen's limit"),
        case("bad template in a multi-line string (was a char-boundary panic)", step("op = \"log\"\nmessage = \"\"\"\nhéllo {rank @}\"\"\"\n"), "10:13", "unexpected character `@`"),
        case("bad template in an escaped string (was a char-boundary panic)", step("op = \"log\"\nmessage = \"h\\u00e9llo \\t {rank @}\"\n"), "9:12", "unexpected character `@`"),
        case("unclosed template", step("op = \"log\"\nmessage = \"x {rank\"\n"), "9:14", "unclosed `{`"),
        case("bad env template", format!("{W2}[world.env]\nFOO = \"{{rank $}}\"\n"), "5:14", "in `FOO`"),
        // sglang and denoise.
        case("denoise dimensions over the limit", format!("{W2}[[step]]\nop = \"init_distributed_environment\"\n[[step]]\nop = \"initialize_model_parallel\"\nulysses = 2\n[[step]]\nop = \"denoise_step\"\nseq = 1048576\nheads = 1048576\nhead_dim = 1048576\n"), "10:6", "denoise_step activation too large"),
        case("denoise layers over the work limit", format!("{W2}[[step]]\nop = \"init_distributed_environment\"\n[[step]]\nop = \"initialize_model_parallel\"\nulysses = 2\n[[step]]\nop = \"denoise_step\"\nlayers = 1048576\n"), "10:6", "denoise_step work too large"),
        case("sglang op before model parallel", format!("{W2}[[step]]\nop = \"all_to_all_4d\"\n"), "5:6", "add an initialize_model_parallel step"),
        case("unknown sglang version", format!("{W2}[[step]]\nop = \"init_distributed_environment\"\nversion = \"v9\"\n"), "6:11", "unknown sglang version `v9`"),
        // Faults (found by the fuzzer: a factor near i64::MAX overflowed the clock).
        case("slow factor over the limit", format!("{W2}[[faults]]\nkind = \"slow\"\non = [1]\nfactor = 9223372036854775807.0\n"), "7:10", "factor must be a number between 1.0 and 1000000"),
        case("fault time over 30 days", format!("{W2}[[faults]]\nkind = \"late_start\"\non = [1]\ndelay_ms = 9223372036854775807\n"), "7:12", "scen's limit for a duration"),
        // Simulation settings and expectations.
        case("latency min > max", format!("{W2}[sim]\nlatency_ms = [5, 1]\n"), "5:14", "needs min <= max"),
        case("latency over 30 days (was 65 s of ticks)", format!("{W2}[sim]\nlatency_ms = [9223372036854775807, 9223372036854775807]\n"), "5:14", "scen's limit for a duration"),
        case("unknown outcome", format!("{W2}[[expect]]\noutcome = \"crashes\"\n"), "5:11", "unknown outcome `crashes`"),
        case("error without fails", format!("{W2}[[expect]]\noutcome = \"hangs\"\nerror = \"x\"\n"), "6:9", "`error` goes with outcome = \"fails\""),
        case("agent_stop_ms without torchrun", "[world]\nranks_per_node = 2\nplatform = \"cpu\"\nagent_stop_ms = 40\n".to_string(), "4:17", "it needs launcher = \"torchrun\""),
        case("agent_check_ms below zero", "[world]\nranks_per_node = 2\nplatform = \"cpu\"\nlauncher = \"torchrun\"\nagent_check_ms = -1\n".to_string(), "5:18", "agent_check_ms must be between 0 and 60000"),
        case("a rank's exit_ms over a minute", format!("{W2}[[world.rank]]\non = [1]\nexit_ms = 60001\n"), "6:11", "exit_ms must be between 0 and 60000"),
        case("a rank's globals_freed_ms below 0", format!("{W2}[[world.rank]]\non = [1]\nglobals_freed_ms = -1\n"), "6:20", "globals_freed_ms must be between 0 and 60000"),
        case("error listing no text", format!("{W2}[[expect]]\noutcome = \"fails\"\nerror = []\n"), "6:9", "`error = []` lists no text"),
        case("error list of a number", format!("{W2}[[expect]]\noutcome = \"fails\"\nerror = [1]\n"), "6:10", "expected a string"),
        case("error of a number", format!("{W2}[[expect]]\noutcome = \"fails\"\nerror = 1\n"), "6:9", "expected a text or a list of texts"),
        case("expect on a missing step", format!("{W2}[[expect]]\noutcome = \"fails\"\nstep = 3\n"), "6:8", "step 3 does not exist"),
        case("expect on an unknown step id", format!("{W2}[[expect]]\noutcome = \"fails\"\nstep = \"nope\"\n"), "6:8", "no step has id \"nope\""),
    ]
}

#[test]
fn every_bad_input_is_refused_with_its_location_and_reason() {
    let all = cases();
    assert!(all.len() >= 40, "the matrix has {} cases", all.len());
    let mut wrong = Vec::new();
    for c in &all {
        match parse(&c.text, "s.toml", "s") {
            Ok(_) => wrong.push(format!("{}: accepted", c.name)),
            Err(e) => {
                let e = e.to_string();
                if !e.starts_with(&format!("s.toml:{}", c.at)) || !e.contains(c.says) {
                    wrong.push(format!(
                        "{}: got `{e}`, want s.toml:{}… containing `{}`",
                        c.name, c.at, c.says
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases wrong:\n{}",
        wrong.len(),
        all.len(),
        wrong.join("\n")
    );
}

#[test]
fn forty_thousand_steps_load_and_more_than_the_limit_are_refused() {
    // 40k steps took 27 s when each location was found by rescanning the text.
    let mut text = W2.to_string();
    for _ in 0..40_000 {
        text.push_str("[[step]]\nop = \"log\"\nmessage = \"rank {rank} says hello there\"\n");
    }
    let s = parse(&text, "s.toml", "s").expect("loads");
    assert_eq!(s.steps.len(), 40_000);
    let mut over = W2.to_string();
    for _ in 0..100_001 {
        over.push_str("[[step]]\nop = \"barrier\"\n");
    }
    let e = parse(&over, "s.toml", "s").unwrap_err().to_string();
    assert!(e.contains("too many steps: 100001"), "{e}");
}
