//! sglang multimodal_gen's distributed start-up, modelled as pure data (docs/rules/sglang.md).
//!
//! Which `new_group` calls every rank makes, in which order and with which backend, per code
//! version (V0/V1/V2), and what the Ulysses all-to-alls move where. Checked against the golden
//! group lists in testdata/sglang_groups.json. Scenario steps that drive these plans through the
//! c10d model come with the sglang issue.

pub mod all_to_all_4d;
pub mod parallel_state;
pub mod rank_generator;
