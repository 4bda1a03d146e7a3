//! Running a rank: the process model (runtime/rank.rs) over the environment traits (crate::net,
//! which the store uses too) and the rank-to-rank transport (fabric.rs).

pub(crate) mod coll;
mod cost;
pub mod device;
mod duplex;
pub mod fabric;
mod inbox;
pub mod link;
mod on_gloo;
mod peer_addrs;
pub mod rank;
pub(crate) mod reuse;
pub mod torchrun;
