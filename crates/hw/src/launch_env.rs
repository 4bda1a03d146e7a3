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
        let local_world_size = if launcher == "srun" {
            // SLURM_NTASKS_PER_NODE / SLURM_TASKS_PER_NODE look like `2(x3),1`.
            ["SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE"]
                .iter()
                .find_map(|v| leading_number(env.get(*v)?))
                .unwrap_or(world_size)
        } else {
            num(env, lw)?.unwrap_or(world_size)
        };
        // srun sets neither: the first node of the allocation and a port from the job id
        // (15000 + its last 4 digits, PyTorch Lightning's convention), unless the job says.
        let slurm_job = (launcher == "srun")
            .then(|| env.get("SLURM_JOB_ID"))
            .flatten();
        let master_addr = env
            .get("MASTER_ADDR")
            .cloned()
            .or_else(|| {
                (launcher == "srun")
                    .then(|| {
                        env.get("SLURM_JOB_NODELIST")
                            .or_else(|| env.get("SLURM_NODELIST"))
                            .and_then(|l| first_host(l))
                    })
                    .flatten()
            })
            .unwrap_or_else(|| "127.0.0.1".into());
        let master_port = match num(env, "MASTER_PORT")? {
            Some(p) => p as u16,
            None => slurm_job
                .and_then(|j| {
                    let digits: String = j.chars().filter(char::is_ascii_digit).collect();
                    let tail = &digits[digits.len().saturating_sub(4)..];
                    tail.parse::<u16>().ok().map(|n| 15_000 + n)
                })
                .unwrap_or(29500),
        };
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

fn leading_number(v: &str) -> Option<usize> {
    let digits: String = v.trim().chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The first host of a Slurm node list: `node[03-05,07],gpu1` -> `node03`.
pub fn first_host(list: &str) -> Option<String> {
    let list = list.trim();
    let end = list.find([',', '[']).unwrap_or(list.len());
    let prefix = &list[..end];
    let host = if list[end..].starts_with('[') {
        let inner = &list[end + 1..];
        let first: String = inner
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        format!("{prefix}{first}")
    } else {
        prefix.to_string()
    };
    (!host.is_empty()).then_some(host)
}

/// A job token for processes that an external launcher started apart (srun, mpirun): derived
/// from the job's id, so every process of the job computes the same and a process of another
/// job or an earlier step does not. Not a secret (SCEN_HW_JOB_TOKEN is one). Returns the token
/// and the variables it came from; `None` when the launcher gives no job id scen knows.
pub fn job_env_token(
    env: &BTreeMap<String, String>,
    id: &RankIdentity,
) -> Option<(String, String)> {
    let vars: &[&str] = match id.launcher {
        "srun" => &["SLURM_JOB_ID", "SLURM_STEP_ID"],
        "mpirun" => &[
            "OMPI_MCA_ess_base_jobid",
            "PMIX_NAMESPACE",
            "PMI_KVSNAME",
            "I_MPI_JOB_ID",
        ],
        _ => &[],
    };
    let found: Vec<(&str, &String)> = vars
        .iter()
        .filter_map(|v| Some((*v, env.get(*v)?)))
        .collect();
    if found.is_empty() || (id.launcher == "srun" && !env.contains_key("SLURM_JOB_ID")) {
        return None;
    }
    let text = format!(
        "scen-hw-job-token|{}|{:?}|{}:{}|{}",
        id.launcher, found, id.master_addr, id.master_port, id.world_size
    );
    let a = crate::rdzv::fnv64(text.as_bytes(), 0xcbf2_9ce4_8422_2325);
    let b = crate::rdzv::fnv64(text.as_bytes(), a ^ 0x9e37_79b9_7f4a_7c15);
    let from: Vec<&str> = found.iter().map(|(v, _)| *v).collect();
    Some((format!("{a:016x}{b:016x}"), from.join("+")))
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
        let s2 = detect(&env(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_TASKS_PER_NODE", "2(x2)"),
            ("SLURM_JOB_ID", "123456"),
            ("SLURM_JOB_NODELIST", "node[07-08]"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (s2.local_world_size, s2.master_addr.as_str(), s2.master_port),
            (2, "node07", 18456)
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
