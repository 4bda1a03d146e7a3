//! Every way scen shows a report, in one place: the human text of a run (`human`), the JSON
//! report v2 of a run (`json`: `--format json`, `--report FILE`) and a suite's JUnit XML
//! (`junit`: `scen test --junit FILE`). Core builds the one report every mode feeds; what it
//! looks like to a person, a program or a CI system is decided here.

pub mod human;
pub mod json;
pub mod junit;
