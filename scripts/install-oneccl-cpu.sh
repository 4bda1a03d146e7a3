#!/bin/sh
# Installs a minimal CPU-only oneCCL 2022.2.0 for `scen run --hw` on machines without an Intel GPU:
# the C API loader libccl.so.2 + the legacy CPU plugin from the runtime wheel, and a CPU libccl.so.1
# linked from the static CPU archive of the devel wheel (no wheel ships it as a .so), plus a small shim
# for the Intel-compiler symbols. See docs/hw.md. Needs: pip, unzip, cc, c++.
#
# Usage: scripts/install-oneccl-cpu.sh [PREFIX]   (default $ONECCL_PREFIX, else $HOME/.cache/oneccl-cpu)
# The prefix doubles as the cache: a complete install of the pinned version is reused as is.
# As root it also apt-installs the Debian run-time deps (libhwloc15, libfabric1, libze1).
set -eu
PREFIX=${1:-${ONECCL_PREFIX:-$HOME/.cache/oneccl-cpu}}
VER=2022.2.0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  if ! dpkg -s libhwloc15 libfabric1 libze1 >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libhwloc15 libfabric1 >/dev/null
    # The Level Zero loader only serves `scen doctor`/--require-xpu: optional.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libze1 >/dev/null 2>&1 \
      || echo "note: libze1 (Level Zero loader) not installed; scen doctor will say so"
  fi
fi
if [ -f "$PREFIX/VERSION" ] && [ "$(cat "$PREFIX/VERSION")" = "$VER" ] \
   && [ -f "$PREFIX/lib/libccl.so.2" ] && [ -f "$PREFIX/lib/ccl/cpu/lib/libccl.so.1" ]; then
  echo "oneCCL $VER (CPU) already installed in $PREFIX (cached)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pip download -q --no-deps --no-cache-dir -d "$tmp" "oneccl==$VER" "oneccl-devel==$VER"
cd "$tmp"
unzip -q -o "oneccl-$VER-"*.whl "oneccl-$VER.data/data/lib/libccl.so.2" "oneccl-$VER.data/data/lib/libccl_legacy_cpu.so"
unzip -q -o "oneccl_devel-$VER-"*.whl "oneccl_devel-$VER.data/data/lib/ccl/cpu/lib/libccl.a" "oneccl_devel-$VER.data/data/include/*"
rm -rf "$PREFIX"
mkdir -p "$PREFIX/lib/ccl/cpu/lib" "$PREFIX/include"
cp "oneccl-$VER.data/data/lib/libccl.so.2" "oneccl-$VER.data/data/lib/libccl_legacy_cpu.so" "$PREFIX/lib/"
cp -r "oneccl_devel-$VER.data/data/include/." "$PREFIX/include/"
cat > shim.c <<'SHIM'
#include <string.h>
#include <stddef.h>
__attribute__((visibility("default"))) void *_intel_fast_memcpy(void *d, const void *s, size_t n) { return memcpy(d, s, n); }
__attribute__((visibility("default"))) void *_intel_fast_memset(void *d, int c, size_t n) { return memset(d, c, n); }
void *__itt_domain_create_ptr__3_0, *__itt_event_create_ptr__3_0, *__itt_event_end_ptr__3_0,
     *__itt_event_start_ptr__3_0, *__itt_metadata_add_ptr__3_0, *__itt_string_handle_create_ptr__3_0,
     *__itt_task_begin_ptr__3_0, *__itt_task_end_ptr__3_0, *__itt_thread_set_name_ptr__3_0;
SHIM
cc -O2 -fPIC -c shim.c -o shim.o
c++ -shared -o "$PREFIX/lib/ccl/cpu/lib/libccl.so.1" -Wl,-soname,libccl.so.1 \
  -Wl,--whole-archive "oneccl_devel-$VER.data/data/lib/ccl/cpu/lib/libccl.a" -Wl,--no-whole-archive \
  shim.o -l:libhwloc.so.15 -ldl -lpthread -Wl,--no-undefined
echo "$VER" > "$PREFIX/VERSION"
echo "oneCCL $VER (CPU) installed in $PREFIX ($(du -sh "$PREFIX" | cut -f1))"
