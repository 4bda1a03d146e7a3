//! Diagnosis of a run from its call records and stall: consistency of the calls across the
//! members of each group (better than `TORCH_DISTRIBUTED_DEBUG=DETAIL`, docs/rules/c10d.md#r32), a wait-for
//! graph over `(rank, group, seq)` for hangs (better than the flight recorder's analyser and
//! NCCL's desync report, R31/R33), and exports (Graphviz DOT, Chrome/Perfetto timeline).
//!
//! Written once in core: the simulator feeds it records through the probe, the hardware mode
//! will feed it the same records.

pub mod check;
pub mod diagnosis;
pub mod dot;
pub mod env;
pub mod groups;
pub mod hang;
pub mod planned;
pub mod platform;
pub mod record;
pub mod splits;
pub mod timeline;

pub use diagnosis::Diagnosis;
pub use groups::{GroupCall, GroupDivergence, GroupLog, GroupRecord};
pub use planned::{PlannedCalls, PlannedRecord};
pub use record::{CallKind, CallRecord, CallState, Fingerprint, Splits};
