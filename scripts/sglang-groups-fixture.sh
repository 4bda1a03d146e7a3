#!/bin/sh
# Makes crates/core/testdata/sglang_0.5.23_groups.json with real sglang: for each of the six
# golden configs of docs/rules/sglang.md (§8) it runs sglang-groups-fixture.py under torchrun on CPU
# (gloo) and merges what the ranks recorded: the new_group calls (which must be the same on
# every rank, R1) and each rank's groups. Needs the venv of `scripts/install-torch-cpu.sh --sglang`.
# Usage: scripts/sglang-groups-fixture.sh [OUT.json]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
VENV=${SCEN_TORCH_VENV:-$HOME/.cache/scen-torch/venv}
out=${1:-$here/../crates/core/testdata/sglang_0.5.23_groups.json}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port=29611
# name world tp ulysses ring cfg
for c in "w8_tp1_u2_r2_cfg2_dp1 8 1 2 2 2" "w8_tp2_u2_r1_cfg2 8 2 2 1 2" "w4_u4 4 1 4 1 1" \
         "w4_tp2_cfg2 4 2 1 1 2" "w16_tp2_u2_r2_cfg2 16 2 2 2 2" "w2_cfg2 2 1 1 1 2"; do
  set -- $c
  mkdir -p "$work/$1"
  echo "sglang start-up $1 ($2 ranks)" >&2
  port=$((port + 1))
  OMP_NUM_THREADS=1 "$VENV/bin/torchrun" --nproc-per-node "$2" --master-port "$port" \
    "$here/sglang-groups-fixture.py" "$work/$1" "$3" "$4" "$5" "$6" >"$work/$1.log" 2>&1 \
    || { tail -20 "$work/$1.log" >&2; exit 1; }
done
"$VENV/bin/python" - "$work" "$out" <<'PY'
import json, os, sys
work, out = sys.argv[1], sys.argv[2]
configs = {}
for name in sorted(d for d in os.listdir(work) if os.path.isdir(os.path.join(work, d))):
    ranks = {}
    for f in os.listdir(os.path.join(work, name)):
        ranks[int(f[4:-5])] = json.load(open(os.path.join(work, name, f)))
    calls = ranks[0]["calls"]
    for r, d in ranks.items():
        assert d["calls"] == calls, "%s: rank %d made other new_group calls than rank 0" % (name, r)
    configs[name] = dict(new_group_calls=calls,
                         per_rank={str(r): ranks[r]["groups"] for r in sorted(ranks)})
meta = dict(sglang=ranks[0]["sglang"], backend=ranks[0]["backend"],
            made_by="scripts/sglang-groups-fixture.sh (real sglang under torchrun, CPU, gloo)",
            note="new_group_calls: every torch.distributed.new_group call of "
                 "maybe_init_distributed_environment_and_model_parallel in order, identical on "
                 "every rank; backend is the argument passed (null = default PG's). per_rank: "
                 "each coordinator's ranks (and unique_name) and the ulysses/ring/dit groups.")
with open(out, "w") as f:
    json.dump(dict(_meta=meta, **configs), f, indent=1, sort_keys=True)
    f.write("\n")
print("wrote", out, file=sys.stderr)
PY
