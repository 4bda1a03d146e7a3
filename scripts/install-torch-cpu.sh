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
if [ "$SGLANG" = 1 ]; then
  if have sglang "$SGLANG_VER"; then
    echo "sglang $SGLANG_VER already installed in $VENV (cached)"
  else
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps "sglang==$SGLANG_VER"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check numpy orjson psutil pybase64 \
      requests packaging pillow starlette msgspec pydantic pyzmq tqdm ipython aiohttp apache-tvm-ffi
    echo "sglang $SGLANG_VER installed in $VENV"
  fi
fi
