#!/usr/bin/env bash
# A PNG of an HTML page (train-report.html, report.html) from headless chromium (Debian:
# `apt-get install -y chromium`), e.g. docs/train-report.png from a real `mempo train` run:
#
#   scripts/screenshot-report.sh out/train/train-report.html docs/train-report.png [WIDTH HEIGHT]
#
# WIDTH × HEIGHT is the window (default 1200 × 1800). The PNG is written under a temporary name
# and renamed, so a failed run never leaves a half-written file at OUT.
set -euo pipefail
if [ $# -ne 2 ] && [ $# -ne 4 ]; then
  echo "usage: $0 IN.html OUT.png [WIDTH HEIGHT]" >&2
  exit 2
fi
in=$1 out=$2 width=${3:-1200} height=${4:-1800}
[ -f "$in" ] || { echo "$0: $in: no such file" >&2; exit 2; }
case "$width$height" in *[!0-9]*) echo "$0: WIDTH and HEIGHT must be whole numbers, got $width × $height" >&2; exit 2 ;; esac
bin=$(command -v chromium || command -v chromium-browser || true)
[ -n "$bin" ] || { echo "$0: no chromium on PATH (Debian: apt-get install -y chromium)" >&2; exit 1; }
work=$(mktemp -d)
tmp="$out.tmp.$$"
trap 'rm -rf "$work" "$tmp"' EXIT
url="file://$(realpath "$in")"
# --no-sandbox: chromium refuses to run as root with its sandbox (CI containers).
timeout 120 "$bin" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
  --user-data-dir="$work/profile" --window-size="$width,$height" --screenshot="$work/shot.png" "$url" \
  >"$work/log" 2>&1 || { cat "$work/log" >&2; echo "$0: chromium failed on $in" >&2; exit 1; }
[ "$(head -c 8 "$work/shot.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] \
  || { cat "$work/log" >&2; echo "$0: chromium wrote no PNG for $in" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
cp "$work/shot.png" "$tmp"
mv -f "$tmp" "$out"
echo "$out: ${width}x${height} PNG, $(wc -c <"$out") bytes"
