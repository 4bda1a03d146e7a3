#!/usr/bin/env bash
# Checks every link and #anchor of the built guide (target/book, from scripts/build-guide.sh)
# with a pinned hyperlink from crates.io, installed once into $HOME/.cache/scen-hyperlink
# (SCEN_HYPERLINK_ROOT) and reused: a link to a page or file the book does not hold (a file
# outside docs/, say) is dead there even where it works on the repository. hyperlink checks
# the HTML offline (no external URLs); it fails on any dead link or anchor.
set -euo pipefail
cd "$(dirname "$0")/.."
HYPERLINK_VERSION=${HYPERLINK_VERSION:-0.3.2}
root=${SCEN_HYPERLINK_ROOT:-$HOME/.cache/scen-hyperlink}
hyperlink="$root/bin/hyperlink"
book=${1:-target/book}
if ! "$hyperlink" --version 2>/dev/null | grep -qx "hyperlink $HYPERLINK_VERSION"; then
  echo "== hyperlink $HYPERLINK_VERSION from crates.io into $root (once per machine)"
  start=$SECONDS
  cargo install hyperlink --locked --version "$HYPERLINK_VERSION" --root "$root"
  echo "hyperlink installed in $((SECONDS - start)) s"
fi
if [ ! -f "$book/index.html" ]; then
  echo "error: no built guide at $book (run scripts/build-guide.sh first)" >&2
  exit 2
fi
"$hyperlink" --check-anchors --sources docs "$book"
