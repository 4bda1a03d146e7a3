//! Time scale: every timeout and delay of a scenario multiplied by one factor (`--time-scale
//! 1/600`), so a 30-minute c10d timeout becomes 3 s and a scenario can run on real PyTorch in a
//! test. The simulator and torch mode apply the same scaled scenario, so their verdicts stay
//! comparable; error texts then name the scaled timeouts, in both.

use super::fault::FaultKind;
use super::model::{Scenario, StepKind, StoreCall};
use std::fmt;

/// `num/den`; 1/1 leaves a scenario as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeScale {
    pub num: u64,
    pub den: u64,
}

impl Default for TimeScale {
    fn default() -> Self {
        TimeScale { num: 1, den: 1 }
    }
}

impl fmt::Display for TimeScale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.num, self.den)
    }
}

/// A time scale that does not read as N/D with positive whole numbers (the text as given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeScaleError {
    #[error("time scale `{0}`: expected N/D with whole numbers, e.g. 1/600")]
    NotWhole(String),
    #[error("time scale `{0}`: both numbers must be positive")]
    NotPositive(String),
}

impl TimeScale {
    /// Parses `1/600`, `0.5` is not accepted (integers keep texts exact).
    pub fn parse(s: &str) -> Result<TimeScale, TimeScaleError> {
        let (n, d) = s.split_once('/').unwrap_or((s, "1"));
        let not_whole = |_| TimeScaleError::NotWhole(s.to_string());
        let num: u64 = n.trim().parse().map_err(not_whole)?;
        let den: u64 = d.trim().parse().map_err(not_whole)?;
        if num == 0 || den == 0 {
            return Err(TimeScaleError::NotPositive(s.to_string()));
        }
        Ok(TimeScale { num, den })
    }

    pub fn is_identity(self) -> bool {
        self.num == self.den
    }

    /// `ms` scaled, rounded down, at least 1 ms for a non-zero input.
    pub fn apply(self, ms: u64) -> u64 {
        if ms == 0 {
            return 0;
        }
        ((ms as u128 * self.num as u128 / self.den as u128) as u64).max(1)
    }
}

impl Scenario {
    /// Scales every timeout and delay the scenario states (steps, faults) and records the
    /// scale, which the model applies to the timeouts PyTorch would default (R9).
    pub fn scale_times(&mut self, scale: TimeScale) {
        let s = |v: &mut Option<u64>| *v = v.map(|x| scale.apply(x));
        for step in &mut self.steps {
            match &mut step.kind {
                StepKind::InitProcessGroup { timeout_ms, .. }
                | StepKind::NewGroup { timeout_ms, .. }
                | StepKind::SplitGroup { timeout_ms, .. }
                | StepKind::InitDistributedEnvironment { timeout_ms, .. }
                | StepKind::MonitoredBarrier { timeout_ms, .. }
                | StepKind::Wait { timeout_ms, .. } => s(timeout_ms),
                StepKind::Sleep { ms } => *ms = scale.apply(*ms),
                StepKind::SetTimeout { timeout_ms, .. } => *timeout_ms = scale.apply(*timeout_ms),
                StepKind::Store(st) => match &mut st.call {
                    StoreCall::Wait { timeout_ms, .. } => s(timeout_ms),
                    StoreCall::MakeTcp { spec, .. } => {
                        spec.timeout_ms = scale.apply(spec.timeout_ms)
                    }
                    _ => {}
                },
                _ => {}
            }
        }
        for f in &mut self.faults {
            match &mut f.kind {
                FaultKind::Crash { at_ms, .. } => s(at_ms),
                FaultKind::CrashNode { at_ms, .. } | FaultKind::Bounce { at_ms, .. } => {
                    *at_ms = scale.apply(*at_ms)
                }
                FaultKind::Partition {
                    at_ms, until_ms, ..
                }
                | FaultKind::Hold {
                    at_ms, until_ms, ..
                }
                | FaultKind::Loss {
                    at_ms, until_ms, ..
                } => {
                    *at_ms = scale.apply(*at_ms);
                    s(until_ms);
                }
                FaultKind::Slow { step_ms, .. } => *step_ms = scale.apply(*step_ms),
                FaultKind::LateStart { delay_ms, .. } => *delay_ms = scale.apply(*delay_ms),
                FaultKind::Latency { .. } | FaultKind::Env { .. } => {}
            }
        }
        let t = self.time_scale;
        self.time_scale = TimeScale {
            num: t.num * scale.num,
            den: t.den * scale.den,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_applies() {
        let s = TimeScale::parse("1/600").unwrap();
        assert_eq!(s.apply(1_800_000), 3_000);
        assert_eq!(s.apply(1), 1);
        assert_eq!(s.apply(0), 0);
        assert!(TimeScale::parse("0/2").is_err());
        assert!(TimeScale::parse("x").is_err());
        assert!(TimeScale::parse("2").unwrap().apply(5) == 10);
    }
}
