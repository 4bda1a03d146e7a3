#!/bin/sh
# Installs the real PyTorch that `scen run --torch` and tests/torch.rs run scenarios on: a venv
# with torch (pinned) and numpy. Torch mode uses gloo on CPU only, but PyPI's default torch
# wheel is the one users have, so that is the one pinned here (about 5 GB, ~60 s on a fast link).
#
# Usage: scripts/install-torch-cpu.sh [--sglang]
#   SCEN_TORCH_VENV  where the venv lives (default $HOME/.cache/scen-torch/venv); it is the cache:
#                    a venv that already has the pinned version is reused as is (about a second).
#   --sglang         also installs real sglang (pinned, --no-deps) and the small pure-Python
#                    modules its distributed start-up imports (docs/torch.md, "Real sglang").
# Needs: python3 with the venv module, pip, network access on the first run.
set -eu
VENV=${SCEN_TORCH_VENV:-$HOME/.cache/scen-torch/venv}
TORCH_VER=2.15.0
SGLANG_VER=0.5.23
SGLANG=0
for a in "$@"; do
  case "$a" in
    --sglang) SGLANG=1 ;;
    *) echo "usage: $0 [--sglang]" >&2; exit 2 ;;
  esac
done
have() { "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(0 if m.version('$1') == '$2' else 1)" 2>/dev/null; }
if [ -x "$VENV/bin/python" ] && have torch "$TORCH_VER" && "$VENV/bin/python" -c "import numpy" 2>/dev/null; then
  echo "torch $TORCH_VER already installed in $VENV (cached)"
else
  if [ ! -x "$VENV/bin/python" ]; then
    mkdir -p "$(dirname "$VENV")"
    python3 -m venv "$VENV"
  fi
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "torch==$TORCH_VER" numpy
  have torch "$TORCH_VER" || { echo "error: torch $TORCH_VER did not install into $VENV" >&2; exit 1; }
  echo "torch $TORCH_VER installed in $VENV"
fi
# Real sglang for torch mode's sglang steps: the package alone (--no-deps: its full dependency
# set is a GPU serving stack), plus the pure-Python modules the import chain of its distributed
# start-up needs (measured: `import sglang.multimodal_gen.runtime.distributed.parallel_state`
# and `maybe_init_distributed_environment_and_model_parallel` under torchrun, CPU, gloo).
# apache-tvm-ffi is the version sglang 0.5.23 pins (srt's coordinator imports it). sglang itself
# asks for torch 2.14.1; pip's warning about it is expected: the start-up runs on torch 2.15.0.
SGLANG_DEPS="orjson==3.13.0 psutil==7.2.2 pybase64==1.5.1 requests==2.34.2 packaging==26.3
  pillow==13.0.0 starlette==1.10.0 msgspec==0.22.0 pydantic==2.14.3 pyzmq==27.3.0 tqdm==4.70.1
  ipython==9.18.1 aiohttp==3.14.5 apache-tvm-ffi==0.1.11"
have_all() {
  "$VENV/bin/python" - "sglang==$SGLANG_VER" $SGLANG_DEPS <<'PY' 2>/dev/null
import importlib.metadata as m, sys
sys.exit(0 if all(m.version(n) == v for n, v in (a.split("==") for a in sys.argv[1:])) else 1)
PY
}
if [ "$SGLANG" = 1 ]; then
  if have_all; then
    echo "sglang $SGLANG_VER already installed in $VENV (cached)"
  else
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps "sglang==$SGLANG_VER"
    # shellcheck disable=SC2086
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check $SGLANG_DEPS 2>&1 \
      | grep -v -e "sglang $SGLANG_VER requires" -e "pip's dependency resolver" || true
    have_all || { echo "error: sglang $SGLANG_VER or its start-up modules did not install into $VENV" >&2; exit 1; }
    echo "sglang $SGLANG_VER installed in $VENV"
  fi
fi
