//! oneCCL's C API (`oneapi/ccl.h`, libccl.so.2), declared by hand and loaded at run time.
//!
//! Why run time: `ccl.h` is C++-only and declares every function weak, so a link-time `-lccl`
//! is silently dropped by `--as-needed`; and scen must build (and run its simulator) on machines
//! without oneCCL. [`Api::load`] tries `$ONECCL_ROOT/lib/libccl.so.2`, then the dynamic loader's
//! usual search; a missing library is a typed [`LoadError::Unavailable`] that names the install
//! script. See /docs/hw.md and the facts this follows (one rank per process, no timeouts, AVG
//! unsupported, CommUserRank/CommCount garbage on split communicators).

use libloading::Library;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::PathBuf;

/// `onecclResult_t`.
pub type OnecclResult = c_int;
/// `onecclComm_t`: an opaque pointer.
pub type OnecclComm = *mut c_void;
/// `onecclDataType_t`.
pub type OnecclDataType = c_int;
/// `onecclRedOp_t`.
pub type OnecclRedOp = c_int;

pub const ONECCL_SUCCESS: OnecclResult = 0;
/// Code 11: the plugin threw; `onecclGetLastError(comm)` has the text.
pub const ONECCL_PLUGIN_EXCEPTION: OnecclResult = 11;
/// Code 12: not implemented.
pub const ONECCL_NOT_IMPLEMENTED: OnecclResult = 12;

pub const ONECCL_INT8: OnecclDataType = 0;
pub const ONECCL_UINT8: OnecclDataType = 1;
pub const ONECCL_INT32: OnecclDataType = 2;
pub const ONECCL_UINT32: OnecclDataType = 3;
pub const ONECCL_INT64: OnecclDataType = 4;
pub const ONECCL_UINT64: OnecclDataType = 5;
pub const ONECCL_FLOAT16: OnecclDataType = 6;
pub const ONECCL_FLOAT32: OnecclDataType = 7;
pub const ONECCL_FLOAT64: OnecclDataType = 8;
pub const ONECCL_BFLOAT16: OnecclDataType = 9;

pub const ONECCL_SUM: OnecclRedOp = 0;
pub const ONECCL_PROD: OnecclRedOp = 1;
pub const ONECCL_MAX: OnecclRedOp = 2;
pub const ONECCL_MIN: OnecclRedOp = 3;
/// Rejected by the CPU plugin (rc 11, "Unsupported onecclRedOp_t value").
pub const ONECCL_AVG: OnecclRedOp = 4;

/// `ONECCL_SPLIT_NOCOLOR`.
pub const ONECCL_SPLIT_NOCOLOR: c_int = -1;

pub const UNIQUE_ID_BYTES: usize = 4096;

/// `onecclUniqueId`: 4096 bytes, passed by value. Only the first 256 (`legacy`, an ASCII
/// `"<ip>_<port>"`) are used by 2022.2.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct OnecclUniqueId {
    pub data: [u8; UNIQUE_ID_BYTES],
}

impl OnecclUniqueId {
    pub fn zeroed() -> Self {
        OnecclUniqueId {
            data: [0; UNIQUE_ID_BYTES],
        }
    }

    /// The id's text part (`127.0.0.1_4096`), for messages.
    pub fn legacy_text(&self) -> String {
        let end = self.data[..256].iter().position(|b| *b == 0).unwrap_or(256);
        String::from_utf8_lossy(&self.data[..end]).into_owned()
    }
}

/// Where the install script puts oneCCL when nothing else is said.
pub const INSTALL_HINT: &str = "install the CPU runtime with `scripts/install-oneccl-cpu.sh` \
(it puts oneCCL 2022.2.0 in $HOME/.cache/oneccl-cpu; then set ONECCL_ROOT=$HOME/.cache/oneccl-cpu), \
or on Intel GPU nodes source the oneAPI Base Toolkit's setvars.sh";

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// No libccl.so.2 could be opened; the text lists what was tried and what to install.
    #[error("oneCCL is not available: {tried}; {hint}")]
    Unavailable { tried: String, hint: &'static str },
    /// The library opened but lacks a symbol (a different oneCCL version).
    #[error("{path} has no symbol {symbol}: scen needs oneCCL 2022.2 or newer ({source})")]
    MissingSymbol {
        path: String,
        symbol: &'static str,
        source: libloading::Error,
    },
}

/// The C API's entry points, resolved from one opened libccl.so.2.
pub struct Api {
    /// What was opened (a path or the bare soname).
    pub path: String,
    pub get_version: unsafe extern "C" fn(*mut c_int) -> OnecclResult,
    pub get_unique_id: unsafe extern "C" fn(*mut OnecclUniqueId) -> OnecclResult,
    pub comm_init_rank:
        unsafe extern "C" fn(*mut OnecclComm, usize, OnecclUniqueId, c_int) -> OnecclResult,
    pub comm_finalize: unsafe extern "C" fn(OnecclComm) -> OnecclResult,
    pub comm_destroy: unsafe extern "C" fn(OnecclComm) -> OnecclResult,
    pub comm_split: unsafe extern "C" fn(
        OnecclComm,
        c_int,
        c_int,
        *mut OnecclComm,
        *const c_void,
    ) -> OnecclResult,
    pub comm_count: unsafe extern "C" fn(OnecclComm, *mut c_int) -> OnecclResult,
    pub comm_user_rank: unsafe extern "C" fn(OnecclComm, *mut c_int) -> OnecclResult,
    pub get_error_string: unsafe extern "C" fn(OnecclResult) -> *const c_char,
    pub get_last_error: unsafe extern "C" fn(OnecclComm) -> *const c_char,
    pub all_reduce: unsafe extern "C" fn(
        *mut c_void,
        *mut c_void,
        usize,
        OnecclDataType,
        OnecclRedOp,
        OnecclComm,
        *mut c_void,
    ) -> OnecclResult,
    pub broadcast: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        OnecclDataType,
        c_int,
        OnecclComm,
        *mut c_void,
    ) -> OnecclResult,
    pub all_gather: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        OnecclDataType,
        OnecclComm,
        *mut c_void,
    ) -> OnecclResult,
    pub send: unsafe extern "C" fn(
        *const c_void,
        usize,
        OnecclDataType,
        c_int,
        OnecclComm,
        *mut c_void,
    ) -> OnecclResult,
    pub recv: unsafe extern "C" fn(
        *mut c_void,
        usize,
        OnecclDataType,
        c_int,
        OnecclComm,
        *mut c_void,
    ) -> OnecclResult,
    pub reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        OnecclDataType,
        OnecclRedOp,
        c_int,
        OnecclComm,
        *mut c_void,
    ) -> OnecclResult,
    pub reduce_scatter: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        OnecclDataType,
        OnecclRedOp,
        OnecclComm,
        *mut c_void,
    ) -> OnecclResult,
    pub all_to_all_v: unsafe extern "C" fn(
        *const c_void,
        *const usize,
        *mut c_void,
        *const usize,
        OnecclDataType,
        OnecclComm,
        *mut c_void,
    ) -> OnecclResult,
    pub group_start: unsafe extern "C" fn() -> OnecclResult,
    pub group_end: unsafe extern "C" fn() -> OnecclResult,
    /// Keeps the library mapped while the function pointers above live.
    _lib: Library,
}

/// The candidates `Api::load` tries, in order.
pub fn candidates() -> Vec<String> {
    candidates_with_root(std::env::var_os("ONECCL_ROOT").map(PathBuf::from))
}

/// The candidates for an explicit oneCCL root (`<root>/lib/libccl.so.2`), then the loader's search.
pub fn candidates_with_root(root: Option<PathBuf>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(root) = root {
        out.push(root.join("lib/libccl.so.2").display().to_string());
    }
    out.push("libccl.so.2".to_string());
    out
}

impl Api {
    /// Opens libccl.so.2: `$ONECCL_ROOT/lib` first, then the loader's search path.
    pub fn load() -> Result<Api, LoadError> {
        Self::load_from(candidates())
    }

    /// Opens the first of `candidates` that loads.
    pub fn load_from(candidates: Vec<String>) -> Result<Api, LoadError> {
        let mut tried = Vec::new();
        for c in candidates {
            // SAFETY: opening oneCCL runs its static initialisers, which are sound to run.
            match unsafe { Library::new(&c) } {
                Ok(lib) => return Self::resolve(lib, c),
                Err(e) => tried.push(format!("{c}: {e}")),
            }
        }
        Err(LoadError::Unavailable {
            tried: tried.join("; "),
            hint: INSTALL_HINT,
        })
    }

    fn resolve(lib: Library, path: String) -> Result<Api, LoadError> {
        macro_rules! sym {
            ($name:literal) => {{
                // SAFETY: the declared type matches the prototype in oneapi/ccl.h (2022.2).
                match unsafe { lib.get(concat!($name, "\0").as_bytes()) } {
                    Ok(s) => *s,
                    Err(source) => {
                        return Err(LoadError::MissingSymbol {
                            path,
                            symbol: $name,
                            source,
                        })
                    }
                }
            }};
        }
        Ok(Api {
            get_version: sym!("onecclGetVersion"),
            get_unique_id: sym!("onecclGetUniqueId"),
            comm_init_rank: sym!("onecclCommInitRank"),
            comm_finalize: sym!("onecclCommFinalize"),
            comm_destroy: sym!("onecclCommDestroy"),
            comm_split: sym!("onecclCommSplit"),
            comm_count: sym!("onecclCommCount"),
            comm_user_rank: sym!("onecclCommUserRank"),
            get_error_string: sym!("onecclGetErrorString"),
            get_last_error: sym!("onecclGetLastError"),
            all_reduce: sym!("onecclAllReduce"),
            broadcast: sym!("onecclBroadcast"),
            all_gather: sym!("onecclAllGather"),
            send: sym!("onecclSend"),
            recv: sym!("onecclRecv"),
            reduce: sym!("onecclReduce"),
            reduce_scatter: sym!("onecclReduceScatter"),
            all_to_all_v: sym!("onecclAllToAllV"),
            group_start: sym!("onecclGroupStart"),
            group_end: sym!("onecclGroupEnd"),
            path,
            _lib: lib,
        })
    }

    /// `onecclGetVersion`: 20220200 for 2022.2.0.
    pub fn version(&self) -> Result<i32, OnecclError> {
        let mut v: c_int = 0;
        // SAFETY: a valid out pointer.
        let rc = unsafe { (self.get_version)(&mut v) };
        self.check("onecclGetVersion", rc, std::ptr::null_mut())?;
        Ok(v)
    }

    /// Maps a result code to an error carrying oneCCL's own text (`onecclGetLastError`, which
    /// holds the real message for code 11, where `onecclGetErrorString` says "Unknown error").
    /// `comm` is NULL or a communicator oneCCL returned; only oneCCL reads it.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn check(
        &self,
        call: &'static str,
        rc: OnecclResult,
        comm: OnecclComm,
    ) -> Result<(), OnecclError> {
        if rc == ONECCL_SUCCESS {
            return Ok(());
        }
        // SAFETY: both return NUL-terminated static or thread-local strings (or NULL).
        let text = unsafe {
            let last = (self.get_last_error)(comm);
            let s = if last.is_null() || *last == 0 {
                (self.get_error_string)(rc)
            } else {
                last
            };
            if s.is_null() {
                String::new()
            } else {
                CStr::from_ptr(s).to_string_lossy().into_owned()
            }
        };
        Err(OnecclError {
            call,
            code: rc,
            text,
        })
    }
}

/// A failed oneCCL call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{call} failed with oneCCL error {code}: {text}")]
pub struct OnecclError {
    pub call: &'static str,
    pub code: OnecclResult,
    pub text: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_id_has_the_c_size() {
        assert_eq!(std::mem::size_of::<OnecclUniqueId>(), 4096);
    }

    #[test]
    fn a_missing_library_names_the_install_script() {
        // A root that holds no library: the first candidate fails; the message must say how to fix it
        // whether or not a system-wide libccl.so.2 exists.
        let tried = candidates_with_root(Some("/nonexistent".into()));
        assert_eq!(tried[0], "/nonexistent/lib/libccl.so.2");
        assert!(matches!(
            Api::load_from(vec![tried[0].clone()]),
            Err(LoadError::Unavailable { .. })
        ));
        assert_eq!(tried.last().map(String::as_str), Some("libccl.so.2"));
        let e = LoadError::Unavailable {
            tried: "x".into(),
            hint: INSTALL_HINT,
        };
        assert!(e.to_string().contains("scripts/install-oneccl-cpu.sh"));
    }
}
