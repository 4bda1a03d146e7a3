//! c10d errors as PyTorch raises them: an exception type and its exact text (docs/rules/c10d.md).
//!
//! Every message that a scenario's `expect.error` can match is built here, in one place, with
//! the rule it comes from, so a newcomer can check a text against the spec quickly: rendezvous,
//! store and timeouts in this file, backend strings, URLs and devices in `error/setup.rs`, groups
//! in `error/groups.rs`, calls in `error/ops.rs`, DETAIL in `error/detail.rs`, and
//! scen's own texts (where PyTorch has none to copy) apart in `error/own.rs`. The model calls
//! these functions and never spells an error text itself; a diagnosis that must know which
//! error a rank raised asks `error/recognise.rs`, never searches a text itself.
//! `crates/core/tests/pytorch_texts.rs` fails when one of these texts is spelt elsewhere.

use std::fmt;

mod detail;
mod groups;
mod ops;
mod own;
pub mod recognise;
mod setup;
mod sglang;
pub use detail::*;
pub use groups::*;
pub use ops::*;
pub use own::*;
pub use setup::*;
pub use sglang::*;

/// A Python exception raised by the model: `kind` is the class name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct C10dError {
    pub kind: &'static str,
    pub message: String,
}

impl fmt::Display for C10dError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for C10dError {}

fn e(kind: &'static str, message: impl Into<String>) -> C10dError {
    C10dError {
        kind,
        message: message.into(),
    }
}

pub fn runtime(message: impl Into<String>) -> C10dError {
    e("RuntimeError", message)
}
/// The kind of [`limit`] errors.
pub use crate::outcome::SCEN_LIMIT;

/// A rank's failure from the error that ended its program: a [`limit`] error is scen's own
/// limit, every other one a Python exception.
impl From<C10dError> for crate::outcome::Failure {
    fn from(e: C10dError) -> Self {
        if e.kind == SCEN_LIMIT {
            crate::outcome::Failure::OverLimit { detail: e.message }
        } else if e.kind == ABORTED {
            // The process aborts: no one scen knows of killed it (outcome.rs, Killer::Unknown).
            crate::outcome::Failure::Killed {
                signal: crate::outcome::SIGABRT,
                by: crate::outcome::Killer::Unknown,
            }
        } else {
            crate::outcome::Failure::Raised {
                exception: e.kind.to_string(),
                message: e.message,
            }
        }
    }
}

/// Not a PyTorch error: a value computed while running (a formula, an env var) exceeds one of
/// scen's limits (scenario::limits). The simulator ends the run with this as an input error.
pub fn limit(message: impl Into<String>) -> C10dError {
    e(SCEN_LIMIT, message)
}

pub fn value(message: impl Into<String>) -> C10dError {
    e("ValueError", message)
}
pub fn assertion(message: impl Into<String>) -> C10dError {
    e("AssertionError", message)
}
pub fn type_error(message: impl Into<String>) -> C10dError {
    e("TypeError", message)
}

/// R4: the device type has no backend in this group.
pub fn no_backend_for_device(device: &str) -> C10dError {
    runtime(format!(
        "No backend type associated with device type {device}"
    ))
}

/// R7.
pub fn init_twice() -> C10dError {
    value("trying to initialize the default process group twice!")
}

/// Using the default group before `init_process_group`: `_get_default_group` raises ValueError
/// (real PyTorch 2.15; torch mode found it).
pub fn not_initialized() -> C10dError {
    value("Default process group has not been initialized, please make sure to call init_process_group.")
}

/// R15: env:// without a variable.
pub fn env_var_missing(var: &str) -> C10dError {
    value(format!(
        "Error initializing torch.distributed using env:// rendezvous: environment variable {var} expected, but not set"
    ))
}

/// R15: port range.
pub fn bad_port(port: &str) -> C10dError {
    value(format!(
        "port must have value from 0 to 65535 but was {port}"
    ))
}

/// R16: the server could not bind.
pub fn eaddrinuse(port: u16) -> C10dError {
    e(
        "DistNetworkError",
        format!(
            "The server socket has failed to listen on any local network address. port: {port}, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use"
        ),
    )
}

/// R16: the warning of a client whose first connect to the store failed (it retries).
pub fn connect_retry_warning(
    host: &str,
    port: u16,
    timeout_ms: u64,
    delay_ms: u64,
    cause: &dyn std::fmt::Display,
) -> String {
    format!(
        "TCP client failed to connect/validate to host {host}:{port} - retrying (try=0, timeout={timeout_ms}ms, delay={delay_ms}ms): {cause}"
    )
}

/// R16: the client never reached the server.
pub fn client_connect_timeout(timeout_ms: u64, host: &str, port: u16) -> C10dError {
    e(
        "DistNetworkError",
        format!("The client socket has timed out after {timeout_ms}ms while trying to connect to ({host}, {port})."),
    )
}

/// R16: the server's waitForWorkers gives up at the first poll where the whole seconds
/// elapsed exceed the timeout, so a 30 s timeout fires after 31 s and says so (real torch 2.15:
/// a 5 s timeout printed "Timed out after 6 seconds"; logs in the wild show 601, 1801).
pub fn workers_timeout_after_ms(timeout_ms: u64) -> u64 {
    (timeout_ms / 1000 + 1) * 1000
}

/// R16: the server's waitForWorkers, `elapsed_ms` from [`workers_timeout_after_ms`].
pub fn workers_timeout(elapsed_ms: u64, joined: i64, world_size: usize) -> C10dError {
    e(
        "DistStoreError",
        format!(
            "Timed out after {} seconds waiting for clients. {joined}/{world_size} clients joined.",
            elapsed_ms / 1000
        ),
    )
}

/// torchrun's agent when its rendezvous never completes (a node's launcher never joined): it
/// raises this before any worker starts. `reason` names the missing node (scen's launcher
/// knows which; torchrun's message names its rendezvous backend's view).
pub fn rendezvous_timeout(reason: &str) -> C10dError {
    e("RendezvousTimeoutError", reason)
}

/// R16: store get/wait past the timeout. TCPStore's client keeps every key under `/`, and the
/// text lists the key so (real torch 2.15: a PrefixStore("default_pg") wait on `k` says
/// `keys: /default_pg/k`).
pub fn store_wait_timeout(timeout_ms: u64, key: &str) -> C10dError {
    e(
        "DistStoreError",
        format!("wait timeout after {timeout_ms}ms, keys: /{key}"),
    )
}

/// A `tcp_store` port from the environment that is no port: what the program's
/// `int(os.environ[...])` raises (a value that parses but is out of range: TCPStore's own
/// argument check, reported alike).
pub fn port_value(text: &str) -> C10dError {
    e(
        "ValueError",
        format!("invalid literal for int() with base 10: '{text}'"),
    )
}

/// `init_process_group(store=..., init_method=...)` (torch 2.15's own assertion).
pub fn store_and_init_method() -> C10dError {
    assertion("Cannot specify both init_method and store.")
}

/// `init_process_group(store=...)` without a positive `world_size`.
pub fn store_world_size() -> C10dError {
    assertion("world_size must be positive if using store")
}

/// `init_process_group(store=...)` without a `rank` (torch's default is -1).
pub fn store_rank() -> C10dError {
    assertion("rank must be non-negative if using store")
}

/// A store step naming a store this rank never made (a hand-written scenario whose
/// `tcp_store` step is `on` other ranks): Python's own error for the unbound name.
pub fn store_not_made(name: &str) -> C10dError {
    e(
        "NameError",
        format!(
            "name '{name}' is not defined (no tcp_store or prefix_store step made it on this rank)"
        ),
    )
}

/// R16: a store `wait` on several keys past its timeout lists every key it was given (real
/// torch 2.15: `keys: /default_pg/0//k, /default_pg/0//j`).
pub fn store_wait_timeout_keys(timeout_ms: u64, keys: &[String]) -> C10dError {
    let keys: Vec<String> = keys.iter().map(|k| format!("/{k}")).collect();
    e(
        "DistStoreError",
        format!(
            "wait timeout after {timeout_ms}ms, keys: {}",
            keys.join(", ")
        ),
    )
}

/// A program's store call whose server has gone: the reply never comes (real torch 2.15, the
/// process that hosted the TCPStore exited or was killed: `get`, `add`, `check` and `wait`
/// raise it, a `get` already waiting too).
pub fn store_server_gone() -> C10dError {
    e(
        "DistNetworkError",
        "Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?",
    )
}

/// The request after one that met the gone server (a `set` among them: it has no reply, so it
/// returned): the server's host reset the connection, and this write fails (real torch 2.15).
pub fn store_broken_pipe() -> C10dError {
    e("DistNetworkError", "Broken pipe")
}

/// R15: a FileStore `wait` past its timeout (gloo's connectFullMesh waits so). Real torch 2.15
/// raises it once the whole seconds elapsed exceed the timeout (`c10d::store::give_up_at_ms`).
pub fn file_store_wait_timeout() -> C10dError {
    runtime("Wait timeout")
}

/// R15: a FileStore `get` past its timeout (the key as the FileStore got it, prefixes joined).
pub fn file_store_get_timeout(key: &str, timeout_ms: u64) -> C10dError {
    runtime(format!(
        "Timeout waiting for key: {key} after {timeout_ms} ms"
    ))
}

/// R17: the store-based barrier.
pub fn store_barrier_timeout(
    rank: usize,
    name: &str,
    world_size: usize,
    joined: i64,
    timeout_ms: u64,
    inner: &str,
) -> C10dError {
    e(
        "DistStoreError",
        format!(
            "Timed out initializing process group in store based barrier on rank {rank}, for key: store_based_barrier_key:{name} (world_size={world_size}, num_workers_joined={joined}, timeout={} error={inner})",
            timedelta(timeout_ms)
        ),
    )
}

/// R24: gloo's full-mesh connect failed.
pub fn gloo_connect_failed(inner: &str) -> C10dError {
    runtime(format!("Gloo connectFullMesh failed with {inner}"))
}

/// R24: an XCCL/NCCL member could not get the unique id.
pub fn unique_id_timeout(backend: &str, rank: usize, key: &str, inner: &str) -> C10dError {
    let (name, id) = if backend == "nccl" {
        ("NCCL", "ncclUniqueId")
    } else {
        ("XCCL", "xcclUniqueId")
    };
    e(
        "DistBackendError",
        format!(
            "[{rank}] is setting up {name} communicator and retrieving {id} from [0] via c10d key-value store by key '{key}', but store->get('{key}') got error: {inner}. This may indicate a possible application crash on rank 0 or a network set up issue."
        ),
    )
}

/// R29: gloo op timeout.
pub fn gloo_recv_timeout(timeout_ms: u64) -> C10dError {
    runtime(format!(
        "Timed out waiting {timeout_ms}ms for recv operation to complete"
    ))
}

/// What gloo's own send and recv timeouts begin with.
pub const OWN_TIMEOUT: &str = "Timed out waiting ";

/// The timeout, when `msg` is gloo's own send or recv timeout (`Timed out waiting 3000ms for
/// send operation to complete`).
pub fn own_timeout_ms(msg: &str) -> Option<u64> {
    let rest = &msg[msg.find(OWN_TIMEOUT)? + OWN_TIMEOUT.len()..];
    let (n, tail) = rest.split_once("ms for ")?;
    (tail.starts_with("send operation") || tail.starts_with("recv operation"))
        .then(|| n.parse().ok())
        .flatten()
}

/// R29: a gloo send whose receiver never posted the matching recv (gloo's unbound buffer).
pub fn gloo_send_timeout(timeout_ms: u64) -> C10dError {
    runtime(format!(
        "Timed out waiting {timeout_ms}ms for send operation to complete"
    ))
}

/// R29: a gloo operation on a group whose pairs this rank's own earlier timeout closed
/// (gloo/transport/tcp/unbound_buffer.cc signals it to every pair of the context).
pub fn gloo_pairs_closed() -> C10dError {
    runtime(PAIRS_CLOSED)
}

/// gloo's words for a pair its own process's timeout closed.
pub const PAIRS_CLOSED: &str = "Application timeout caused pair closure";

/// `Work::wait(timeout)` past its timeout, the work not completed (c10d's Work.cpp; real
/// torch 2.15, scenarios/gloo_work_wait_timeout.toml).
pub fn work_wait_timeout() -> C10dError {
    runtime("Operation timed out!")
}

/// R29: XCCL blocking wait (TORCH_XCCL_BLOCKING_WAIT=1).
pub fn xccl_work_timeout(timeout_ms: u64) -> C10dError {
    e(
        "DistBackendError",
        format!("Work timed out after {timeout_ms} milliseconds."),
    )
}

/// R31: the NCCL watchdog.
pub fn nccl_watchdog(rank: usize, seq: u64, op: &str, numel: usize, timeout_ms: u64) -> C10dError {
    e(
        "DistBackendError",
        format!(
            "[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)={timeout_ms}) ran for {timeout_ms} milliseconds before timing out."
        ),
    )
}

/// gloo's closing words for a broken pair (gloo/transport/tcp/pair.cc, real torch 2.15).
const GLOO_CHECK_LOGS: &str =
    "Check the logs of the remote worker before reporting an error. GLHF! \u{1f3d6}\u{fe0f}";

/// How gloo says a peer closed its connection; a closed socket under the store says it too
/// (`wire::WireError::Closed`).
pub const CONNECTION_CLOSED: &str = "Connection closed by peer";

/// A peer's process closed its connection under a call (gloo's text; `addr`: `[ip]:port`).
/// Real torch 2.15 prefixes gloo's source location (`[.../pair.cc:561] `), which varies.
pub fn peer_closed(addr: &str) -> C10dError {
    runtime(format!(
        "{CONNECTION_CLOSED} {addr}. This is typically caused by a remote worker crashing. {GLOO_CHECK_LOGS}"
    ))
}

/// The text after a leading `[path/file.cc:N] ` source location (gloo's and c10's errors
/// start with one), if `s` starts with one. Each build prints its own path (the torch 2.15
/// wheels: `[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561] `), so
/// the model leaves it out of its texts and expectations match without it.
pub fn after_source_location(s: &str) -> Option<&str> {
    let (loc, rest) = s.strip_prefix('[')?.split_once("] ")?;
    let (file, line) = loc.rsplit_once(':')?;
    let source = [".cc", ".cpp", ".h", ".hpp"]
        .iter()
        .any(|x| file.ends_with(x));
    let line_ok = !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit());
    (source && line_ok && !file.contains(char::is_whitespace)).then_some(rest)
}

/// `text` with every source location left out ([`after_source_location`]): what an
/// expectation's text is matched against, the words and not the build that printed them.
pub fn without_source_locations(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains(".cc:") && !text.contains(".cpp:") && !text.contains(".h:") {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('[') {
        out.push_str(&rest[..i]);
        match after_source_location(&rest[i..]) {
            Some(after) => rest = after,
            None => {
                out.push('[');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// Whether `msg` is gloo's text for a lost peer: its close or its reset.
pub fn is_peer_loss(msg: &str) -> bool {
    msg.contains(CONNECTION_CLOSED) || msg.contains(CONNECTION_RESET)
}

/// gloo's words for a peer's reset connection (ECONNRESET).
const CONNECTION_RESET: &str = "Connection reset by peer";

/// A peer's process reset its connection (it died with this rank's data unread): gloo's read
/// error for ECONNRESET.
pub fn peer_reset(addr: &str) -> C10dError {
    runtime(format!(
        "Read error {addr}: {CONNECTION_RESET}. This is typically caused by a remote worker hanging or bugs in the application. {GLOO_CHECK_LOGS}"
    ))
}

/// The kind of [`gloo_enforce_abort`]: not an exception, the process aborts.
pub const ABORTED: &str = "Aborted";

/// gloo's pair received a message larger than the posted buffer: `GLOO_ENFORCE(op.preamble.length
/// <= op.nbytes)` throws gloo::EnforceNotMet on gloo's own thread, nothing catches it, and the
/// process aborts (SIGABRT; real torch 2.15, scenarios/mismatch_shape_gloo.toml).
pub fn gloo_enforce_abort(got_bytes: usize, posted_bytes: usize) -> C10dError {
    e(
        ABORTED,
        format!(
            "terminate called after throwing an instance of 'gloo::EnforceNotMet' what(): [enforce fail at gloo/transport/tcp/pair.cc] op.preamble.length <= op.nbytes. {got_bytes} vs {posted_bytes}. Received data size doesn't match expected size. Is there a distributed collective mismatch in your code?"
        ),
    )
}

/// gloo's alltoallv copies a rank's own chunk before it sends anything and enforces that the
/// chunk it sends itself is as long as the one it expects from itself (gloo/alltoallv.cc:138;
/// real torch 2.15, scenarios/gloo_all_to_all_self_split_differs.toml): a RuntimeError on that
/// rank alone, before any byte moves. (gloo's text ends in a space, which Python's traceback
/// and torch mode's parity drop.)
pub fn gloo_alltoallv_self_length() -> C10dError {
    runtime(
        "[enforce fail at gloo/alltoallv.cc:138] inLengthPerRank[myRank] == outLengthPerRank[myRank].",
    )
}

/// A rank at or past the world size it was given, on gloo: the context's constructor enforces
/// `rank < size` (gloo/context.cc:23; real torch 2.15, scenarios/gloo_rank_not_below_world_size.toml).
pub fn gloo_rank_not_below_size(rank: usize, size: usize) -> C10dError {
    runtime(format!(
        "[enforce fail at gloo/context.cc:23] rank < size. {rank} vs {size}"
    ))
}

/// R20.
pub fn mismatched_bound_device() -> C10dError {
    assertion("Mismatched bound device between new pg and the default pg.")
}

/// Python's `str(timedelta)`, as c10d's f-strings print a timeout (`_store_based_barrier`:
/// `timeout={timeout}`, real torch 2.15: `timeout=0:00:10`): `[D day[s], ]H:MM:SS[.ffffff]`.
pub fn timedelta(ms: u64) -> String {
    let secs = ms / 1000;
    let micros = (ms % 1000) * 1000;
    let (days, rem) = (secs / 86400, secs % 86400);
    let mut s = match days {
        0 => String::new(),
        1 => "1 day, ".into(),
        d => format!("{d} days, "),
    };
    s.push_str(&format!(
        "{}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    ));
    if micros > 0 {
        s.push_str(&format!(".{micros:06}"));
    }
    s
}

#[cfg(test)]
mod timedelta_str {
    /// Python 3.11: str(timedelta(seconds=10)), (milliseconds=1500), (days=1, seconds=5),
    /// (days=2), (0).
    #[test]
    fn prints_as_python_str_does() {
        assert_eq!(super::timedelta(10_000), "0:00:10");
        assert_eq!(super::timedelta(1_500), "0:00:01.500000");
        assert_eq!(super::timedelta(86_405_000), "1 day, 0:00:05");
        assert_eq!(super::timedelta(2 * 86_400_000), "2 days, 0:00:00");
        assert_eq!(super::timedelta(0), "0:00:00");
        assert_eq!(super::timedelta(1_800_000), "0:30:00");
    }
}

#[cfg(test)]
mod one_place {
    /// Every text a rank raises is built in this module: no file of the model (core, sim,
    /// torch) makes a `C10dError` or calls the generic constructors itself. Hardware mode's
    /// oneCCL errors (crates/hw/src/oneccl.rs) carry oneCCL's own status text and are not
    /// PyTorch's.
    #[test]
    fn texts_are_built_only_in_c10d_error() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let needles = [
            "error::runtime(",
            "error::value(",
            "error::assertion(",
            "error::type_error(",
            "C10dError {",
        ];
        let mut found = Vec::new();
        let mut dirs: Vec<_> = ["core/src", "sim/src", "torch/src"]
            .iter()
            .map(|d| root.join(d))
            .collect();
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                let rel = p.to_string_lossy().replace('\\', "/");
                if p.is_dir() {
                    if !rel.ends_with("c10d/error") {
                        dirs.push(p);
                    }
                    continue;
                }
                if rel.ends_with("c10d/error.rs") || !rel.ends_with(".rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap();
                for (i, line) in text.lines().enumerate() {
                    let code = line.trim_start();
                    if code.starts_with("//") || code.starts_with("pub struct C10dError") {
                        continue;
                    }
                    let literal = needles.iter().any(|n| line.contains(n))
                        && !line.contains("-> C10dError {")
                        && !line.contains("-> Res<C10dError> {");
                    if literal {
                        found.push(format!("{rel}:{}: {}", i + 1, code));
                    }
                }
            }
        }
        assert!(
            found.is_empty(),
            "error texts built outside c10d/error.rs:\n{}",
            found.join("\n")
        );
    }
}

#[cfg(test)]
mod source_locations {
    use super::without_source_locations as w;

    /// A build's `[file.cc:N] ` is left out wherever it stands; brackets that are the text
    /// itself stay (`[Rank 0]: ...`, `[enforce fail at gloo/context.cc:23]`, addresses).
    #[test]
    fn expectations_match_the_words_not_the_build() {
        let real = "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection closed by peer [127.0.0.1]:39335.";
        assert_eq!(
            w(real),
            "RuntimeError: Connection closed by peer [127.0.0.1]:39335."
        );
        let nested = "Rank 1 ... Original exception: \n[/x/gloo/unbound_buffer.cc:78] Timed out";
        assert_eq!(w(nested), "Rank 1 ... Original exception: \nTimed out");
        for same in [
            "RuntimeError: [Rank 0]: Ranks 1 failed to pass monitoredBarrier in 3000 ms",
            "RuntimeError: [enforce fail at gloo/context.cc:23] rank < size. 2 vs 2",
            "Read error [127.0.0.1]:5353: Connection reset by peer",
        ] {
            assert_eq!(w(same), same);
        }
    }
}
