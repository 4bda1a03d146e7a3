#!/usr/bin/env bash
# Builds the `pip install scen` wheel (pyproject.toml: maturin, bindings = "bin", plus the Python
# package python/scen) and checks it as a user would get it: installed into a fresh venv, away
# from the repository, it must give `scen --version`, import `scen`, run a shipped scenario and
# (when the recorder and torch are here) record a small torchrun job. tests/sim/wheel.rs runs
# this script under `cargo test`.
#
# Usage: scripts/wheel-check.sh [--release]
#   default: cargo's dev profile (reuses target/debug's dependencies: about 1 min the first
#   time, seconds after); --release: the profile a published wheel uses (a full optimised build,
#   several minutes on 2 cores).
# Environment:
#   MATURIN_VERSION   the maturin taken from PyPI (default pinned below)
#   CARGO_TARGET_DIR  where cargo builds (default: the repository's target/)
#   SCEN_TORCH_VENV   the venv with torch for the record check (default $HOME/.cache/scen-torch/venv)
#   SCEN_TORCH_REQUIRED=1  a missing torch fails the record check instead of skipping it
# Exit: 0 every check passed; 1 a check failed; 77 it cannot run here (no venv module, or pip
# cannot reach PyPI for maturin); the reason is the last line on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
MATURIN_VERSION=${MATURIN_VERSION:-1.16.0}
profile=(--profile dev)
if [ "${1:-}" = "--release" ]; then
  profile=(--release)
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/scen-wheel.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cant() { echo "cannot run here: $*" >&2; exit 77; }
fail() { echo "wheel check FAILED: $*" >&2; exit 1; }
step() { echo "== $* ($SECONDS s)"; }

step "maturin $MATURIN_VERSION from PyPI into a temporary venv"
python3 -m venv "$tmp/build" 2>/dev/null || cant "python3 -m venv does not work (install python3-venv)"
"$tmp/build/bin/pip" install --quiet --disable-pip-version-check "maturin==$MATURIN_VERSION" \
  >"$tmp/pip.log" 2>&1 || { tail -3 "$tmp/pip.log" >&2; cant "pip could not install maturin==$MATURIN_VERSION from PyPI"; }

step "the wheel (${profile[*]})"
"$tmp/build/bin/maturin" build "${profile[@]}" --out "$tmp/dist" >"$tmp/build.log" 2>&1 \
  || { tail -20 "$tmp/build.log" >&2; fail "maturin build"; }
wheel=$(ls "$tmp"/dist/scen-*.whl)
echo "$(basename "$wheel"): $(du -h "$wheel" | cut -f1)"

step "installed into a fresh venv"
python3 -m venv "$tmp/user"
"$tmp/user/bin/pip" install --quiet --disable-pip-version-check --no-index "$wheel" \
  || fail "pip install of the wheel"
cd "$tmp" # away from the repository: nothing may come from it but the scenario file
export PATH="$tmp/user/bin:$PATH"
[ "$(command -v scen)" = "$tmp/user/bin/scen" ] || fail "scen is not on the venv's PATH"

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -1)
got=$(scen --version)
[ "$got" = "scen $version" ] || fail "scen --version said '$got', Cargo.toml has $version"
echo "scen --version: $got"
py_version=$("$tmp/user/bin/python" -c 'import scen; print(scen.__version__)') || fail "import scen"
[ "$py_version" = "$version" ] || fail "scen.__version__ is '$py_version', not $version"
echo "import scen: $py_version"

step "scen run of a shipped scenario"
scen run "$repo/scenarios/missing_rank_all_reduce.toml" >"$tmp/run.out" \
  || { rc=$?; cat "$tmp/run.out"; fail "scen run exited $rc"; }
grep -q '^expectations: 4/4 hold' "$tmp/run.out" || { cat "$tmp/run.out"; fail "scen run's verdict"; }
grep '^outcome:' "$tmp/run.out"

step "scen record of a small torchrun job"
torch_venv=${SCEN_TORCH_VENV:-$HOME/.cache/scen-torch/venv}
skip_record() {
  if [ "${SCEN_TORCH_REQUIRED:-}" = "1" ] && [ "$2" = "torch" ]; then
    fail "SCEN_TORCH_REQUIRED=1 but $1"
  fi
  echo "skip: scen record: $1"
}
"$tmp/user/bin/python" -c 'import scen.recorder' || fail "import scen.recorder (the recorder module is not in the wheel)"
if [ ! -x "$torch_venv/bin/torchrun" ]; then
  skip_record "no torch: $torch_venv/bin/torchrun does not exist (scripts/install-torch-cpu.sh)" torch
else
  "$tmp/user/bin/python" -c 'import importlib.util as u; assert u.find_spec("scen.recorder")' \
    || fail "the wheel has no scen.recorder module"
  cat >"$tmp/prog.py" <<'EOF'
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(4) * dist.get_rank()
dist.all_reduce(t)
dist.barrier()
dist.destroy_process_group()
EOF
  scen record -o "$tmp/job.toml" -- "$torch_venv/bin/torchrun" --nproc-per-node 2 "$tmp/prog.py" \
    >"$tmp/record.out" 2>&1 || { cat "$tmp/record.out"; fail "scen record"; }
  scen check "$tmp/job.toml" || fail "the recorded scenario does not pass scen check"
  scen run "$tmp/job.toml" >"$tmp/job.out" || { cat "$tmp/job.out"; fail "the recorded scenario's run"; }
  grep '^outcome:' "$tmp/job.out"
fi
step "wheel check passed"
