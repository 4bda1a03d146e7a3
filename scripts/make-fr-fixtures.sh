#!/usr/bin/env bash
# Makes the flight-recorder fixtures of `scen import-fr` (tests/fixtures/fr/CASE/{pickle,json})
# with real PyTorch: tests/fixtures/fr/fr_job.py runs each case as a gloo/CPU job under torchrun
# with the recorder on (TORCH_FR_BUFFER_SIZE, small: the dumps stay around 1 KB), and every
# rank dumps its recorder after DUMP_AFTER_S seconds, stuck or not. Arguments (CASE:RANKS ...)
# remake only those cases. Run it on an idle machine: a rank starved of CPU may not finish its
# dump before another one's exit (abort_mid_dump) ends the job. Needs torch: $SCEN_PYTHON, else
# ~/.cache/scen-torch/venv/bin/python (torchrun beside it).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${SCEN_PYTHON:-$HOME/.cache/scen-torch/venv/bin/python}"
torchrun="$(dirname "$py")/torchrun"
[ -x "$torchrun" ] || { echo "error: no torchrun beside $py (set SCEN_PYTHON)" >&2; exit 2; }
"$py" -c 'import torch; print("torch", torch.__version__)'
cases="${*:-missing_rank:4 count_mismatch:2 size_mismatch:2 group_cycle:3 gloo_timeout:3 abort_mid_dump:3}"
for spec in $cases; do
  case="${spec%%:*}" n="${spec##*:}"
  out="$here/tests/fixtures/fr/$case"
  rm -rf "$out"
  echo "== $case ($n ranks)"
  port="$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  TORCH_FR_BUFFER_SIZE=20 DUMP_AFTER_S=6 OMP_NUM_THREADS=1 \
    "$torchrun" --nproc-per-node "$n" --master-addr 127.0.0.1 --master-port "$port" \
    "$here/tests/fixtures/fr/fr_job.py" "$case" "$out" 2>&1 | grep -v '^W' || true
  ls "$out/pickle" "$out/json"
done
