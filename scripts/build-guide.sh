#!/usr/bin/env bash
# Builds the user guide (docs/book.toml, docs/SUMMARY.md) into target/book with a pinned mdBook
# from crates.io, installed once into $HOME/.cache/scen-mdbook (SCEN_MDBOOK_ROOT) and reused.
# Dead links and anchors of the built book: scripts/check-guide-links.sh (after this script, in
# .ci/run); of the markdown: tests/sim/doc_refs.rs (cargo test). mdBook itself fails here on a
# chapter SUMMARY.md lists that does not exist (create-missing = false).
set -euo pipefail
cd "$(dirname "$0")/.."
MDBOOK_VERSION=${MDBOOK_VERSION:-0.5.4}
root=${SCEN_MDBOOK_ROOT:-$HOME/.cache/scen-mdbook}
mdbook="$root/bin/mdbook"
if ! "$mdbook" --version 2>/dev/null | grep -qx "mdbook v$MDBOOK_VERSION"; then
  echo "== mdbook $MDBOOK_VERSION from crates.io into $root (once per machine)"
  start=$SECONDS
  cargo install mdbook --locked --version "$MDBOOK_VERSION" --root "$root" \
    --no-default-features --features search
  echo "mdbook installed in $((SECONDS - start)) s"
fi
start=$SECONDS
"$mdbook" build docs
echo "guide built in $((SECONDS - start)) s: target/book/index.html"
