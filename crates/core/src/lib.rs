//! scen's model, written once: the scenario format, PyTorch c10d semantics, collectives over a
//! transport trait, traces and verdicts. No simulator and no FFI here: `scen-sim` supplies a
//! turmoil network and a virtual clock, `scen-hw` real sockets and oneCCL.

#![forbid(unsafe_code)]

pub mod algo;
pub mod c10d;
pub mod class;
pub mod diagnose;
pub mod dtype;
pub mod fr;
pub mod log;
pub mod net;
pub mod observe;
pub mod outcome;
pub mod parity;
pub mod payload;
pub mod perf;
pub mod probe;
pub mod ranks;
pub mod record;
pub mod reduce;
pub mod report;
pub mod runtime;
pub mod scenario;
pub mod sglang;
pub mod stall;
pub mod stall_evidence;
pub mod tensor;
pub mod trace;
pub mod verdict;
pub mod wire;
