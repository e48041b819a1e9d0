#!/usr/bin/env bash
# The linux-arm64 (glibc) prebuild, cross-compiled on an x64 machine with Debian's
# g++-aarch64-linux-gnu: prebuilds/linux-arm64/mempo.node. Built in a scratch copy of the sources,
# so that build/ (this machine's own addon) is left as it is. scripts/arm64-check.sh runs the
# kernel suite on it under qemu-user.
set -euo pipefail
exec 1>&2  # a build log only: npm pack --json (whose prepack runs this) owns stdout
cd "$(dirname "$0")/.."
root=$PWD
command -v aarch64-linux-gnu-g++ >/dev/null || { echo "build-arm64: aarch64-linux-gnu-g++ not found (Debian: apt-get install g++-aarch64-linux-gnu)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r binding.gyp native package.json "$work/"
ln -s "$root/node_modules" "$work/node_modules"
cd "$work"
# node-gyp downloads headers unless nodedir names local ones (npm sets it for its own scripts; the
# N-API headers are the same for every arch).
nodedir=${npm_config_nodedir:-$(npm config get nodedir 2>/dev/null || true)}
if [ -n "$nodedir" ] && [ "$nodedir" != undefined ]; then export npm_config_nodedir=$nodedir; fi
CC=aarch64-linux-gnu-gcc CXX=aarch64-linux-gnu-g++ LINK=aarch64-linux-gnu-g++ AR=aarch64-linux-gnu-ar \
  PREBUILD_STRIP_BIN=aarch64-linux-gnu-strip "$root/node_modules/.bin/prebuildify" --napi --strip --arch arm64
mkdir -p "$root/prebuilds/linux-arm64"
cp prebuilds/linux-arm64/mempo.node "$root/prebuilds/linux-arm64/mempo.node"
file "$root/prebuilds/linux-arm64/mempo.node" 2>/dev/null || true
