//! PyTorch's flight recorder (docs/rules/c10d.md#r33): its per-rank dump format ([`model`]), a job's dumps
//! turned into scen's call records, diagnosis and a replay scenario ([`import`]), and a run's
//! call records written as the dumps a real job in the same state would leave ([`export`]),
//! which PyTorch's own `torchfrtrace` reads. Pure data and conversion: reading directories and
//! running tools is the binary's and the tests' business.

pub mod export;
pub mod import;
mod infer;
pub mod model;
mod pickle;
mod replay;

pub use import::{import, Import, ImportError, Job};
pub use infer::GroupError;
pub use model::{Dump, Entry, ParseError, PgConfig, PgStatus};
