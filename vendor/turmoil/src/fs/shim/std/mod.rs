//! Drop-in replacements for `std` filesystem types.
//!
//! See the parent [`shim`](super) module for full documentation.

pub mod fs;
pub mod os;
