#!/usr/bin/env bash
# Builds the CUDA addon with cmake-js: CMakeLists.txt with MEMPO_CUDA=ON, output in
# build-cuda/Release/mempo.node (node-gyp's build/Release/mempo.node is not touched).
# Needs nvcc (CUDA >= 12; PATH, $CUDACXX or /usr/local/cuda*/bin), cmake >= 3.18, a C++17
# compiler. No GPU is needed to build. Works offline: Node-API headers only, nothing downloaded.
#
#   scripts/build-cuda.sh              # build
#   scripts/build-cuda.sh --cpu        # same CMake build with MEMPO_CUDA=OFF (into build-cuda-cpu/)
#   scripts/build-cuda.sh --install    # also copy the result over build/Release/mempo.node
#   scripts/build-cuda.sh --emulate    # tests only: the CUDA path against a CPU emulation of the
#                                      # CUDA runtime (native/cuda/emu), into build-cuda-emu/; no nvcc
#                                      # needed. MEMPO_EMU_SANITIZE=1 adds ASan/UBSan.
#   MEMPO_CUDA_ARCHS="80-real;90-real;90-virtual" scripts/build-cuda.sh   # other architectures
#   MEMPO_SKIP_EMU=1 scripts/build-cuda.sh   # skip the CPU emulation of the kernels (~25 s)
#   MEMPO_CMAKE_JS=0 scripts/build-cuda.sh   # plain cmake instead of cmake-js (also the fallback
#                                            # when cmake-js is not installed)
#
# After a CUDA build it runs native/cuda/emu/run.sh: the kernels under a CPU emulation of the
# CUDA execution model, compared with native/cpu (the only kernel check possible without a GPU).
#
# Use it: MEMPO_NATIVE_BINDING=build-cuda/Release/mempo.node node ...   (backend() then says
# 'native-cuda' where a GPU is usable, else 'native').
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

cuda=ON
emulate=OFF
out=build-cuda
install=0
for arg in "$@"; do
  case "$arg" in
    --cpu) cuda=OFF; out=build-cuda-cpu ;;
    --emulate) cuda=OFF; emulate=ON; out=build-cuda-emu; [ "${MEMPO_EMU_SANITIZE:-0}" = 1 ] && out=build-cuda-emu-asan ;;
    --install) install=1 ;;
    -h|--help) sed -n "2,21p" "$0"; exit 0 ;;
    *) echo "build-cuda.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

if [ "$cuda" = ON ]; then
  if [ -z "${CUDACXX:-}" ]; then
    if command -v nvcc >/dev/null 2>&1; then
      CUDACXX=$(command -v nvcc)
    else
      for d in /usr/local/cuda/bin /usr/local/cuda-*/bin /opt/cuda/bin; do
        if [ -x "$d/nvcc" ]; then CUDACXX="$d/nvcc"; break; fi
      done
    fi
  fi
  if [ -z "${CUDACXX:-}" ] || [ ! -x "$CUDACXX" ]; then
    echo "build-cuda.sh: nvcc not found (set CUDACXX or put the CUDA toolkit's bin/ on PATH)" >&2
    exit 1
  fi
  export CUDACXX
  echo "build-cuda.sh: nvcc = $CUDACXX ($("$CUDACXX" --version | tail -1))"
fi

# cmake-js only skips its header download for packages that declare binary.napi_versions; this
# one does not (yet), so give it a nodedir that already has headers: Node's own install prefix
# when it ships include/node/node.h, else a local directory of the node-api-headers package
# (the addon uses Node-API only; node.h is never included, an empty stand-in satisfies the check).
if [ -z "${npm_config_nodedir:-}" ] || [ ! -f "${npm_config_nodedir}/include/node/node.h" ]; then
  prefix=$(node -p "require('path').resolve(process.execPath, '..', '..')")
  if [ -f "$prefix/include/node/node.h" ]; then
    npm_config_nodedir=$prefix
  else
    napi_inc=$(node -p "require('node-api-headers').include_dir")
    npm_config_nodedir="$root/$out/.nodedir"
    mkdir -p "$npm_config_nodedir/include/node"
    cp "$napi_inc"/*.h "$npm_config_nodedir/include/node/"
    [ -f "$npm_config_nodedir/include/node/node.h" ] || echo '#error "mempo uses Node-API only"' >"$npm_config_nodedir/include/node/node.h"
  fi
fi
export npm_config_nodedir

mkdir -p "$out"
printf '*\n' >"$out/.gitignore"  # keep build output out of git without touching the root .gitignore

defs=(-DMEMPO_CUDA="$cuda" -DMEMPO_CUDA_EMULATION="$emulate" -DMEMPO_EMU_SANITIZE="${MEMPO_EMU_SANITIZE:-0}")
if [ -n "${MEMPO_CUDA_ARCHS:-}" ]; then defs+=(-DCMAKE_CUDA_ARCHITECTURES="$MEMPO_CUDA_ARCHS"); fi
if [ -f "$root/node_modules/cmake-js/bin/cmake-js" ] && [ "${MEMPO_CMAKE_JS:-1}" != 0 ]; then
  args=(compile --out "$out")
  for d in "${defs[@]}"; do args+=(--CD"${d#-D}"); done
  if [ -n "${MEMPO_BUILD_JOBS:-}" ]; then args+=(--parallel "$MEMPO_BUILD_JOBS"); fi
  node "$root/node_modules/cmake-js/bin/cmake-js" "${args[@]}"
else
  # No cmake-js (e.g. a GPU machine given only node-addon-api and node-api-headers): plain CMake,
  # same CMakeLists.txt, same output path.
  echo "build-cuda.sh: building with plain cmake (cmake-js not installed, or MEMPO_CMAKE_JS=0)"
  gen=()
  command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
  cmake -S "$root" -B "$out" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_LIBRARY_OUTPUT_DIRECTORY="$root/$out/Release" "${defs[@]}"
  cmake --build "$out" --parallel "${MEMPO_BUILD_JOBS:-$(nproc)}"
fi

node_file="$out/Release/mempo.node"
[ -f "$node_file" ] || { echo "build-cuda.sh: $node_file was not produced" >&2; exit 1; }
if [ "$cuda" = ON ]; then
  # The result must carry device code for both architectures and the PTX, and no dynamic cudart.
  objdump_bin=$(command -v cuobjdump || true)
  [ -n "$objdump_bin" ] || { [ -x "$(dirname "$CUDACXX")/cuobjdump" ] && objdump_bin="$(dirname "$CUDACXX")/cuobjdump"; } || true
  if [ -n "$objdump_bin" ]; then
    listing=$("$objdump_bin" --list-elf --list-ptx "$node_file" 2>/dev/null || true)
    # cuobjdump 13 names the PTX of compute_90 `NAME.sm_90.ptx` (older ones `compute_90`): seen on an H200
    for want in 'ELF file.*sm_80' 'ELF file.*sm_90' 'PTX file.*(compute|sm)_90'; do
      grep -Eq "$want" <<<"$listing" || { echo "build-cuda.sh: $node_file has no code matching '$want' (cuobjdump --list-elf --list-ptx)" >&2; exit 1; }
    done
  else  # no cuobjdump in this toolkit: check what nvcc was asked to generate
    flags=$(cat "$out"/build.ninja "$out"/CMakeFiles/mempo.dir/flags.make 2>/dev/null || true)
    for want in 'arch=compute_80,code=\[sm_80\]' 'arch=compute_90,code=\[sm_90\]' 'arch=compute_90,code=\[compute_90\]'; do
      grep -q "$want" <<<"$flags" || { echo "build-cuda.sh: nvcc was not asked for $want" >&2; exit 1; }
    done
  fi
  sections=$(readelf -S "$node_file" 2>/dev/null || true)  # (no `| grep -q`: SIGPIPE under pipefail)
  grep -q nv_fatbin <<<"$sections" || { echo "build-cuda.sh: $node_file has no .nv_fatbin section" >&2; exit 1; }
  if grep -q libcudart <<<"$(ldd "$node_file" 2>/dev/null || true)"; then
    echo "build-cuda.sh: warning: $node_file links libcudart dynamically" >&2
  fi
fi
if [ "${MEMPO_EMU_SANITIZE:-0}" = 1 ]; then
  echo "build-cuda.sh: built $root/$node_file (sanitized: load it with LD_PRELOAD of libasan/libubsan, see native/cuda/emu/parity.sh)"
else
  node -e "const a = require(process.argv[1]); console.log('build-cuda.sh: built', process.argv[1], JSON.stringify(a.info()))" "$root/$node_file"
fi

if [ "$cuda" = ON ] && [ "${MEMPO_SKIP_EMU:-0}" != 1 ]; then
  "$root/native/cuda/emu/run.sh"
fi

if [ "$install" = 1 ]; then
  mkdir -p build/Release
  cp "$node_file" build/Release/mempo.node
  echo "build-cuda.sh: installed over build/Release/mempo.node (npm run build:native restores the CPU build)"
fi
