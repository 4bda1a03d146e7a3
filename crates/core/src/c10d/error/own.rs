//! scen's own texts: errors a rank raises where PyTorch has no text to copy, because the
//! program is one Python could not run as written (a step names work or a group whose step did
//! not run here), scen does not model the case, or the transport failed in a way whose real
//! text is not measured yet (issue 21 tracks replacing those with gloo's). They live here, apart
//! from PyTorch's, so nobody mistakes them for PyTorch's words.

use super::{runtime, C10dError};

/// `work.wait()` on work whose async step did not run on this rank.
pub fn work_never_started(work: &str) -> C10dError {
    runtime(format!(
        "work `{work}` was never started on this rank (its async_op step did not run here)"
    ))
}

/// The task running async work ended without a result (a panic inside it).
pub fn work_lost(work: &str, why: &str) -> C10dError {
    runtime(format!("work `{work}` was lost: {why}"))
}

/// Symbolic payloads (sizes without data) on a device library, which moves real bytes.
pub fn symbolic_on_device() -> C10dError {
    runtime("symbolic payloads cannot run on a device library (hardware mode moves real bytes)")
}

/// A collective the device-library binding does not implement.
pub fn no_device_binding(op: &str) -> C10dError {
    runtime(format!(
        "{op} has no device-library binding yet (add a DeviceComms method in runtime/device.rs)"
    ))
}

/// `init_method = "file://..."` where the runner has no node file system to hold the store
/// (hardware mode: its ranks run on real hosts, and scen keeps no file there).
pub fn file_store_unsupported(path: &str) -> C10dError {
    runtime(format!(
        "file://{path}: this mode does not model FileStore rendezvous (the simulator and torch mode do); use env:// or tcp://"
    ))
}

/// A stale FileStore key: written through a store freed since (a destroyed group's, a failed
/// init's) or opened by another init of its process (c10d/store/file.rs). Real ranks then dial
/// that old gloo address and fail in ways that vary with timing
/// (measured: `Connection refused` at once, `Connect timeout` after 15 s, `Connection closed by
/// peer`), which scen does not model.
pub fn file_store_stale_key(path: &str, key: &str) -> C10dError {
    runtime(format!(
        "file://{path}: key '{key}' was written by another process group than this init's (a FileStore's file keeps a group's keys until every rank that opened it has freed its store); real PyTorch then dials that stale gloo address and fails in ways that vary with timing, which scen does not model: give each init a fresh path"
    ))
}

/// The TCPStore server's socket could not listen for another reason than EADDRINUSE.
pub fn store_listen_failed(port: u16, why: &str) -> C10dError {
    runtime(format!(
        "TCPStore server failed to listen on port {port}: {why}"
    ))
}

/// A receive that ended without a message and without a timeout rule of its backend.
pub fn timed_out() -> C10dError {
    runtime("timed out")
}

/// A peer's address could not be connected to.
pub fn peer_unreachable(peer: usize, why: &str) -> C10dError {
    runtime(format!("cannot reach rank {peer}: {why}"))
}

/// The connection to the TCPStore broke (the server's process ended, or the network).
pub fn store_connection_failed(why: &str) -> C10dError {
    super::e(
        "DistNetworkError",
        format!("TCPStore connection failed: {why}"),
    )
}

/// A value check of scen's (`expect` values, sglang's layouts) found another number: not an
/// exception of PyTorch's, a verdict on the data (kind `ValueMismatch`).
pub fn value_mismatch(message: String) -> C10dError {
    C10dError {
        kind: "ValueMismatch",
        message,
    }
}

/// An sglang step before `initialize_model_parallel` (the scenario's order, not sglang's text).
pub fn sglang_groups_uninitialized() -> C10dError {
    runtime("sglang's model-parallel groups are not initialized: add an initialize_model_parallel step first")
}

/// An init_method without `://` (the scenario loader refuses it first).
pub fn not_a_url(text: &str) -> C10dError {
    runtime(format!("`{text}` is not a URL (expected scheme://...)"))
}

/// A broken invariant of the model's (never expected to be seen).
pub fn internal(what: &str) -> C10dError {
    runtime(format!("scen internal error: {what}"))
}

/// A transport error that is none of the above, in the transport's words.
pub fn transport(why: &str) -> C10dError {
    runtime(why.to_string())
}
