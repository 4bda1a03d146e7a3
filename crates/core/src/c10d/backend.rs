//! Backends, the device→backend map and dispatch (docs/rules/c10d.md#r1 to #r6, #r9).
//!
//! A process group holds one backend per device type; a collective is dispatched on its
//! tensor's device type. That single lookup is where the famous
//! `No backend type associated with device type xpu` comes from (R4, R23).

use super::error::{self, C10dError};
use std::collections::BTreeMap;

/// R1: which devices each backend supports.
pub fn capability(backend: &str) -> &'static [&'static str] {
    match backend {
        "gloo" => &["cpu", "cuda"],
        "nccl" => &["cuda"],
        "xccl" => &["xpu"],
        "ucc" | "mpi" => &["cpu", "cuda"],
        "fake" => &["cpu", "cuda", "hpu", "xpu"],
        _ => &[],
    }
}

/// R1: default_device_backend_map.
pub fn default_backend_for(device: &str) -> Option<&'static str> {
    match device {
        "cpu" | "mps" => Some("gloo"),
        "cuda" => Some("nccl"),
        "xpu" => Some("xccl"),
        _ => None,
    }
}

const KNOWN: [&str; 7] = ["undefined", "gloo", "nccl", "xccl", "ucc", "mpi", "fake"];

/// The parsed backend string of a group (R2): device type → backend name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendConfig {
    pub map: BTreeMap<String, String>,
    /// The string as given, lower-cased; `new_group` without a backend reuses it (R18).
    pub original: String,
}

impl BackendConfig {
    /// R2. `accelerator` is the current accelerator's device type (`None` when only checking syntax).
    pub fn parse(s: &str, accelerator: Option<&str>) -> Result<BackendConfig, C10dError> {
        let lower = s.to_ascii_lowercase();
        let acc = accelerator.unwrap_or("cpu");
        let mut map = BTreeMap::new();
        if lower.contains(':') || lower.contains(',') {
            for pair in lower.split(',') {
                let parts: Vec<&str> = pair.split(':').collect();
                if parts.len() != 2 || parts[0].is_empty() || parts[1].is_empty() {
                    return Err(error::bad_backend_pair(pair, s));
                }
                if map
                    .insert(parts[0].to_string(), parts[1].to_string())
                    .is_some()
                {
                    return Err(error::duplicate_device_in_backend(parts[0], s));
                }
            }
        } else if lower == "undefined" {
            let b = default_backend_for(acc).unwrap_or("gloo");
            map.insert(acc.to_string(), b.to_string());
        } else if KNOWN.contains(&lower.as_str()) {
            for d in capability(&lower) {
                map.insert(d.to_string(), lower.clone());
            }
        } else {
            map.insert("cpu".to_string(), lower.clone());
            map.insert(acc.to_string(), lower.clone());
        }
        Ok(BackendConfig {
            map,
            original: lower,
        })
    }

    /// The backend names PyTorch 2.15 accepts, checked where `_new_process_group_helper` checks
    /// them (after the rendezvous, members only). Texts from real torch 2.15 (docs/diagnosis.md):
    /// a bare name not in `Backend.backend_type_map` fails `AssertionError: Unknown backend type
    /// mpi2` (lower-cased), a `device:backend` pair with an unregistered backend `AssertionError:
    /// Unknown c10d backend type XCLL` (upper-cased).
    pub fn check_known(&self) -> Result<(), C10dError> {
        let s = &self.original;
        if !s.contains(':') && !s.contains(',') {
            if KNOWN.contains(&s.as_str()) {
                return Ok(());
            }
            return Err(error::unknown_backend(s));
        }
        for pair in s.split(',') {
            let b = pair.split(':').nth(1).unwrap_or_default();
            if !KNOWN[1..].contains(&b) {
                return Err(error::unknown_c10d_backend(b));
            }
        }
        Ok(())
    }

    /// pip wheels of PyTorch 2.15 are built without MPI: `_create_mpi_process_group` raises this
    /// before any rendezvous (measured with real torch 2.15, docs/diagnosis.md).
    pub fn check_built_in(&self) -> Result<(), C10dError> {
        if self.backends().contains(&"mpi") {
            return Err(error::mpi_not_built());
        }
        Ok(())
    }

    /// R4: the backend serving `device`, or the c10d error.
    pub fn backend_for(&self, device: &str) -> Result<&str, C10dError> {
        self.map
            .get(device)
            .map(|s| s.as_str())
            .ok_or_else(|| error::no_backend_for_device(device))
    }

    /// The distinct backends of this group, in a stable order.
    pub fn backends(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.map.values().map(|s| s.as_str()).collect();
        v.sort();
        v.dedup();
        v
    }

    /// `cpu:gloo, xpu:xccl` style text for traces.
    pub fn describe(&self) -> String {
        self.map
            .iter()
            .map(|(d, b)| format!("{d}:{b}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// R9: a call's timeout, `init_process_group`'s and `new_group`'s alike: the one given, else
/// the backend's default ([`default_timeout_ms`]) on the scenario's time scale.
pub fn timeout_or_default_ms(
    given_ms: Option<u64>,
    config: &BackendConfig,
    scale: crate::scenario::TimeScale,
) -> u64 {
    given_ms.unwrap_or_else(|| scale.apply(default_timeout_ms(config)))
}

/// R9: the default timeout for a backend string: NCCL 10 min, everything else 30 min.
pub fn default_timeout_ms(config: &BackendConfig) -> u64 {
    if config.backends().contains(&"nccl") {
        10 * 60 * 1000
    } else {
        30 * 60 * 1000
    }
}

/// R11/R34: only NCCL (and Gloo in 2.15) support splitting and eager init; XCCL does not.
pub fn supports_splitting(backend: &str) -> bool {
    matches!(backend, "nccl" | "gloo")
}

/// The devices a process sees on a node with `physical` GPUs. Level Zero's `ZE_AFFINITY_MASK`
/// (a comma-separated list of root devices `N` or sub-devices `N.M`) hides the others and
/// renumbers the visible ones from 0, so `torch.xpu.device_count()` is the number of valid
/// entries; entries past the node's devices are ignored and an unset or empty mask shows all
/// (Level Zero spec, "Affinity Mask"). scen counts a sub-device entry as one device, as the
/// default FLAT hierarchy exposes sub-devices as devices [inf for COMPOSITE mode].
pub fn visible_devices(physical: usize, ze_affinity_mask: Option<&str>) -> usize {
    let Some(mask) = ze_affinity_mask.map(str::trim).filter(|m| !m.is_empty()) else {
        return physical;
    };
    let mut seen: Vec<&str> = Vec::new();
    for entry in mask.split(',').map(str::trim) {
        let root = entry.split('.').next().unwrap_or_default();
        let valid = root.parse::<usize>().is_ok_and(|r| r < physical)
            && entry.split('.').skip(1).all(|s| s.parse::<usize>().is_ok());
        if valid && !seen.contains(&entry) {
            seen.push(entry);
        }
    }
    seen.len()
}

/// A torch.device: type and optional index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub ty: String,
    pub index: Option<usize>,
}

impl Device {
    pub fn parse(s: &str) -> Option<Device> {
        let (ty, idx) = match s.split_once(':') {
            Some((t, i)) => (t, Some(i.parse::<usize>().ok()?)),
            None => (s, None),
        };
        if !["xpu", "cuda", "cpu", "mps"].contains(&ty) {
            return None;
        }
        Some(Device {
            ty: ty.to_string(),
            index: idx,
        })
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.index {
            Some(i) => write!(f, "{}:{i}", self.ty),
            None => write!(f, "{}", self.ty),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r2_backend_strings() {
        let x = BackendConfig::parse("xccl", Some("xpu")).unwrap();
        assert_eq!(x.describe(), "xpu:xccl");
        let g = BackendConfig::parse("GLOO", Some("xpu")).unwrap();
        assert_eq!(g.describe(), "cpu:gloo,cuda:gloo");
        let m = BackendConfig::parse("cpu:gloo,xpu:xccl", Some("xpu")).unwrap();
        assert_eq!(m.backends(), vec!["gloo", "xccl"]);
        assert!(BackendConfig::parse("cpu:gloo,cpu:nccl", None).is_err());
        assert!(BackendConfig::parse("cpu-gloo,xpu", None).is_err());
        let u = BackendConfig::parse("undefined", Some("xpu")).unwrap();
        assert_eq!(u.describe(), "xpu:xccl");
    }

    #[test]
    fn unknown_backend_names_fail_as_torch_2_15_does() {
        let e = |s: &str| {
            BackendConfig::parse(s, Some("cpu"))
                .unwrap()
                .check_known()
                .unwrap_err()
                .to_string()
        };
        assert_eq!(e("mpi2"), "AssertionError: Unknown backend type mpi2");
        assert_eq!(e("XCLL"), "AssertionError: Unknown backend type xcll");
        assert_eq!(
            e("cpu:gloo,xpu:xcll"),
            "AssertionError: Unknown c10d backend type XCLL"
        );
        for ok in ["gloo", "undefined", "cpu:gloo,xpu:xccl", "fake"] {
            let c = BackendConfig::parse(ok, Some("xpu")).unwrap();
            assert!(c.check_known().is_ok(), "{ok}");
        }
        let mpi = BackendConfig::parse("mpi", Some("cpu")).unwrap();
        assert!(mpi
            .check_built_in()
            .unwrap_err()
            .to_string()
            .starts_with("RuntimeError: Distributed package doesn't have MPI built in."));
    }

    #[test]
    fn ze_affinity_mask_restricts_and_renumbers_devices() {
        assert_eq!(visible_devices(4, None), 4);
        assert_eq!(visible_devices(4, Some("")), 4);
        assert_eq!(visible_devices(4, Some("2")), 1);
        assert_eq!(visible_devices(4, Some("0,3")), 2);
        assert_eq!(visible_devices(2, Some("0,3")), 1);
        assert_eq!(visible_devices(4, Some("0.0,0.1")), 2);
        assert_eq!(visible_devices(4, Some("x,1")), 1);
    }

    #[test]
    fn r4_gloo_has_no_xpu() {
        let g = BackendConfig::parse("gloo", Some("xpu")).unwrap();
        assert_eq!(
            g.backend_for("xpu").unwrap_err().to_string(),
            "RuntimeError: No backend type associated with device type xpu"
        );
        assert_eq!(g.backend_for("cuda").unwrap(), "gloo");
    }

    #[test]
    fn r9_timeouts() {
        let n = BackendConfig::parse("nccl", Some("cuda")).unwrap();
        assert_eq!(default_timeout_ms(&n), 600_000);
        let x = BackendConfig::parse("xccl", Some("xpu")).unwrap();
        assert_eq!(default_timeout_ms(&x), 1_800_000);
    }
}
