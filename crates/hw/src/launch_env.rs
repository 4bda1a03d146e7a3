//! Who this process is: the rank identity a launcher gave it through the environment.
//!
//! scen's own launcher, torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
//! MASTER_PORT), srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE) and
//! mpirun (PMI_RANK/PMI_SIZE, OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE) all say the same
//! thing in different words.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankIdentity {
    pub rank: usize,
    pub world_size: usize,
    pub local_rank: usize,
    pub local_world_size: usize,
    pub master_addr: String,
    pub master_port: u16,
    /// Address peers use to reach this process.
    pub host: String,
    /// Address its listeners bind.
    pub bind_ip: String,
    /// Which launcher set the environment.
    pub launcher: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error("environment variable {var}={value:?} is not a number")]
    NotANumber { var: String, value: String },
}

fn num(env: &BTreeMap<String, String>, var: &str) -> Result<Option<usize>, EnvError> {
    match env.get(var) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| EnvError::NotANumber {
                var: var.into(),
                value: v.clone(),
            }),
    }
}

/// The identity an external launcher gave this process, or `None` when none did.
pub fn detect(env: &BTreeMap<String, String>) -> Result<Option<RankIdentity>, EnvError> {
    let schemes: [(&str, &str, &str, &str, &str); 4] = [
        (
            "torchrun",
            "RANK",
            "WORLD_SIZE",
            "LOCAL_RANK",
            "LOCAL_WORLD_SIZE",
        ),
        (
            "srun",
            "SLURM_PROCID",
            "SLURM_NTASKS",
            "SLURM_LOCALID",
            "SLURM_NTASKS_PER_NODE",
        ),
        (
            "mpirun",
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_SIZE",
        ),
        (
            "mpirun",
            "PMI_RANK",
            "PMI_SIZE",
            "MPI_LOCALRANKID",
            "MPI_LOCALNRANKS",
        ),
    ];
    for (launcher, r, w, lr, lw) in schemes {
        let (Some(rank), Some(world_size)) = (num(env, r)?, num(env, w)?) else {
            continue;
        };
        let local_rank = num(env, lr)?.unwrap_or(rank);
        let local_world_size = num(env, lw)?.unwrap_or(world_size);
        let master_addr = env
            .get("MASTER_ADDR")
            .cloned()
            .unwrap_or_else(|| "127.0.0.1".into());
        let master_port = num(env, "MASTER_PORT")?.unwrap_or(29500) as u16;
        let local = master_addr == "127.0.0.1" || master_addr == "localhost";
        return Ok(Some(RankIdentity {
            rank,
            world_size,
            local_rank,
            local_world_size,
            host: env.get("SCEN_HW_HOST").cloned().unwrap_or_else(|| {
                if local {
                    "127.0.0.1".into()
                } else {
                    hostname()
                }
            }),
            bind_ip: if local { "127.0.0.1" } else { "0.0.0.0" }.into(),
            master_addr,
            master_port,
            launcher,
        }));
    }
    Ok(None)
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

pub fn process_env() -> BTreeMap<String, String> {
    std::env::vars().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn torchrun_srun_and_mpirun_are_recognised() {
        let t = detect(&env(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "4"),
            ("LOCAL_RANK", "1"),
            ("MASTER_PORT", "1234"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (
                t.rank,
                t.world_size,
                t.local_rank,
                t.master_port,
                t.launcher
            ),
            (3, 4, 1, 1234, "torchrun")
        );
        let s = detect(&env(&[
            ("SLURM_PROCID", "2"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_LOCALID", "0"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (s.rank, s.world_size, s.local_rank, s.launcher),
            (2, 8, 0, "srun")
        );
        let m = detect(&env(&[("PMI_RANK", "1"), ("PMI_SIZE", "2")]))
            .unwrap()
            .unwrap();
        assert_eq!((m.rank, m.world_size, m.launcher), (1, 2, "mpirun"));
        assert_eq!(detect(&env(&[("HOME", "/")])).unwrap(), None);
    }

    #[test]
    fn a_bad_number_names_the_variable() {
        let e = detect(&env(&[("RANK", "x"), ("WORLD_SIZE", "2")])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "environment variable RANK=\"x\" is not a number"
        );
    }
}
