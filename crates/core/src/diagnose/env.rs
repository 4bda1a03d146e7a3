//! Rendezvous settings that differ between ranks: MASTER_ADDR, MASTER_PORT and WORLD_SIZE must
//! be the same on every rank (R16). A rank with another value looks for the store elsewhere or
//! waits for another number of clients, and the real error (a client connect timeout, "3/4
//! clients joined") names no rank; scen points at the odd one out.

use crate::diagnose::hang::ranges;
use crate::scenario::RankSpec;
use serde::Serialize;
use std::collections::BTreeMap;

/// The environment variables every rank must agree on.
pub const RENDEZVOUS_VARS: [&str; 3] = ["MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE"];

/// One variable whose value differs between ranks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvDifference {
    pub var: String,
    /// The most common value (ties: the one of the lowest rank) and its ranks.
    pub common: (String, Vec<usize>),
    /// Every other value with its ranks ("unset" when a rank lacks the variable).
    pub odd: Vec<(String, Vec<usize>)>,
}

impl EnvDifference {
    /// `MASTER_PORT differs: rank 3 has 29501, ranks 0-2 have 29500 (...)`.
    pub fn render(&self) -> String {
        let who = |rs: &[usize]| {
            if rs.len() == 1 {
                format!("rank {} has", rs[0])
            } else {
                format!("ranks {} have", ranges(rs))
            }
        };
        let odd: Vec<String> = self
            .odd
            .iter()
            .map(|(v, rs)| format!("{} {v}", who(rs)))
            .collect();
        let why = match self.var.as_str() {
            "WORLD_SIZE" => "the store host waits for its own WORLD_SIZE clients (R16)",
            _ => "the odd rank looks for the TCPStore at another address (R16)",
        };
        format!(
            "{} differs between ranks: {}, {} {} ({why})",
            self.var,
            odd.join(", "),
            who(&self.common.1),
            self.common.0
        )
    }
}

/// The rendezvous variables whose values differ between ranks.
pub fn check(ranks: &[RankSpec]) -> Vec<EnvDifference> {
    let mut out = Vec::new();
    for var in RENDEZVOUS_VARS {
        let mut by_value: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for r in ranks {
            let v = r.env.get(var).cloned().unwrap_or_else(|| "unset".into());
            by_value.entry(v).or_default().push(r.rank);
        }
        if by_value.len() < 2 {
            continue;
        }
        let mut values: Vec<(String, Vec<usize>)> = by_value.into_iter().collect();
        values.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.1[0].cmp(&b.1[0])));
        let common = values.remove(0);
        out.push(EnvDifference {
            var: var.to_string(),
            common,
            odd: values,
        });
    }
    out
}
