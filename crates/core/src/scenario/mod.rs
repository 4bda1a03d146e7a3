//! The scenario format: a world, a program every rank runs, and what to expect.
//!
//! `raw` mirrors the TOML, `load` validates it into the typed `model`, `expr` is the formula
//! language used for conditions, fills and templates, `env` builds each rank's environment.
//! docs/scenario-format.md is the user-facing description of the same.

pub mod env;
pub mod expr;
pub mod fault;
pub mod limits;
pub mod load;
pub mod model;
pub mod raw;
pub mod scale;
pub mod store;

pub use fault::{Fault, FaultKind, LinkSets};
pub use load::{load_file, parse, ScenarioError};
pub use model::*;
pub use scale::TimeScale;
