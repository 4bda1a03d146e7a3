# Source me: run-time environment for oneCCL (CPU plugin) ranks on one machine, loopback only.
# `scen run --hw` sets these itself for the ranks it starts (unless already set); this file is for
# running ranks by hand or under torchrun/srun/mpirun. See docs/hw.md.
export ONECCL_ROOT=${ONECCL_ROOT:-$HOME/.cache/oneccl-cpu}
export CCL_PLUGIN=ONECCL_LEGACY_CPU     # pick the CPU plugin explicitly (auto-selection tries the SYCL one first)
export CCL_KVS_IFACE=lo                 # KVS/bootstrap on 127.0.0.1 (loopback is skipped by default)
export FI_PROVIDER=tcp                  # libfabric provider: tcp on loopback (not 'net' on eth0)
export FI_TCP_IFACE=lo
export CCL_ATL_SHM=0                    # 1 = intra-node shm provider (2-3x faster at >=1 MiB), but with it
                                        # concurrent 2-rank sub-communicators of an 8-process job hung in init
export CCL_YIELD=sched_yield            # default 'pause' spinning is ~100x slower on 2 cores
export CCL_PROCESS_LAUNCHER=none        # no mpiexec/hydra; CCL_LOCAL_RANK/CCL_LOCAL_SIZE per rank
export CCL_LOG_LEVEL=error              # oneCCL prints warnings on stdout otherwise
export CCL_KVS_CONNECTION_TIMEOUT=30    # bound a non-root rank's connect to a dead KVS (default 120 s)
export IPATH_NO_BACKTRACE=1             # libinfinipath (via Debian libfabric1) signal handler writes .btr files and can hang exit
