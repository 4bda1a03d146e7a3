//! The binary's allocator and its one setting.
//!
//! mimalloc instead of glibc's malloc: a simulated world allocates and frees small buffers for
//! every message and store request, and glibc's malloc/free were ~20 % of a 1024-rank run
//! (docs/scale.md).
//!
//! mimalloc gives memory that stayed free for a second back to the kernel ("purge"); a large
//! world frees its start-up's buffers and allocates again in the next phase, and each page
//! given back was zeroed by the kernel again when touched: at 4096 sglang ranks a third of the
//! page faults and ~0.9 s of system time (docs/scale.md, issue 31). A run is one short process,
//! so scen keeps freed memory for reuse (the peak grew by 4 %). `MIMALLOC_PURGE_DELAY` in the
//! environment still decides when set.

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay`: its place in mimalloc v3's `mi_option_t` (libmimalloc-sys names
/// only the options of older versions; the test below checks it by its default).
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed memory is never purged, unless `MIMALLOC_PURGE_DELAY` says otherwise.
pub fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    #[allow(unsafe_code)]
    // SAFETY: mi_option_set stores an integer in mimalloc's option table (any option index and
    // value are valid); it is called first thing in main, before any other thread exists.
    unsafe {
        libmimalloc_sys::mi_option_set(PURGE_DELAY, -1)
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_option_set_is_the_purge_delay() {
        // No option of mimalloc v3 but purge_delay defaults to 1000 (ms); the test binary does
        // not call keep_freed_memory.
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            #[allow(unsafe_code)]
            // SAFETY: reads mimalloc's option table.
            let v = unsafe { libmimalloc_sys::mi_option_get(super::PURGE_DELAY) };
            assert_eq!(v, 1000);
        }
    }
}
