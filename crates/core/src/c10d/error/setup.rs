//! PyTorch's texts for setting up: backend strings (R2, `_new_process_group_helper`), the
//! rendezvous URL handlers (R14, R15) and devices (`torch.xpu.set_device`). Each function is
//! one text, tagged with its rule in docs/rules/c10d.md or the source it was read from.

use super::{assertion, runtime, value, C10dError};

/// R2: a `device:backend` pair that is not one.
pub fn bad_backend_pair(pair: &str, backend: &str) -> C10dError {
    value(format!("Invalid device:backend pairing: {pair}. {backend}"))
}

/// R2: a device named twice in a backend string.
pub fn duplicate_device_in_backend(device: &str, backend: &str) -> C10dError {
    value(format!(
        "Duplicate device type {device} in backend string: {backend}"
    ))
}

/// A bare backend name not in `Backend.backend_type_map` (real torch 2.15: lower-cased).
pub fn unknown_backend(name: &str) -> C10dError {
    assertion(format!("Unknown backend type {name}"))
}

/// A `device:backend` pair with an unregistered backend (real torch 2.15: upper-cased).
pub fn unknown_c10d_backend(name: &str) -> C10dError {
    assertion(format!(
        "Unknown c10d backend type {}",
        name.to_ascii_uppercase()
    ))
}

/// pip wheels of PyTorch 2.15 have no MPI (`_create_mpi_process_group`, measured).
pub fn mpi_not_built() -> C10dError {
    runtime(
        "Distributed package doesn't have MPI built in. MPI is only included if you \
         build PyTorch from source on a host that has MPI installed.",
    )
}

/// `torch.xpu.set_device(i)` past the visible devices: c10/xpu/XPUFunctions.h
/// `check_device_index` (read from the source; no XPU here to run it).
pub fn xpu_device_out_of_range(index: usize, count: usize) -> C10dError {
    runtime(format!(
        "device is out of range, device is {index}, total number of device is {count}."
    ))
}

/// R15: an init_method whose scheme has no handler (env, tcp and file have one).
pub fn no_rendezvous_handler(scheme: &str) -> C10dError {
    runtime(format!("No rendezvous handler for {scheme}://"))
}

/// R15: Python's `int()` on a URL's port, rank or world size.
pub fn not_an_int(text: &str) -> C10dError {
    value(format!("invalid literal for int() with base 10: '{text}'"))
}

/// R15: as [`not_an_int`], naming the query parameter (scen adds the name).
pub fn query_not_an_int(what: &str, text: &str) -> C10dError {
    value(format!(
        "invalid literal for int() with base 10: '{text}' ({what})"
    ))
}

/// R14: rank or world_size both as arguments and in the URL.
pub fn url_has_node_args(init_method: &str) -> C10dError {
    assertion(format!(
        "The url: {init_method} has node-specific arguments(rank, world_size) already."
    ))
}

/// R15: a tcp:// or file:// URL without one of its parameters (`what`: "port number",
/// "rank parameter", "world size parameter", "path").
pub fn url_missing(scheme: &str, what: &str) -> C10dError {
    value(format!(
        "Error initializing torch.distributed using {scheme}:// rendezvous: {what} missing"
    ))
}
