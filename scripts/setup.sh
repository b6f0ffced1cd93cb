#!/usr/bin/env bash
# Installs the Debian packages gdn needs (when run as root and something is missing), then
# configures and builds into build/. Used by `make run` and `make test`; safe to run again.
# Environment: GDN_BUILD_DIR (build), GDN_BUILD_TYPE (Release), GDN_JOBS (nproc), GDN_WERROR,
# GDN_CMAKE_ARGS (extra cmake arguments, last so they win), GDN_TARGETS (only these targets, e.g.
# "gdn"; default all), GDN_FOR_THIS_MACHINE=1 (CUDA only for the GPUs present: architectures
# "native"; no CUDA at all when there is no GPU). A CUDA configure downloads cuDNN's frontend
# headers (attention) into the build dir; offline, GDN_CMAKE_ARGS=-DGDN_CUDNN_FRONTEND_DIR=<dir>.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config libgtest-dev libyaml-cpp-dev libopenblas-openmp-dev
  nlohmann-json3-dev libcli11-dev libopenmpi-dev openmpi-bin libsentencepiece-dev zlib1g-dev
  libpcre2-dev libicu-dev libprotobuf-dev protobuf-compiler libisal-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "gdn: missing Debian packages: ${missing[*]}" >&2
    echo "gdn: run as root, or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "gdn: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${missing[@]}" ||
    { apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"; }
fi

build_dir=${GDN_BUILD_DIR:-build}
jobs=${GDN_JOBS:-$(nproc)}
werror=()
[ "${GDN_WERROR:-OFF}" = ON ] && werror=(-DGDN_WERROR=ON)
machine=()
if [ "${GDN_FOR_THIS_MACHINE:-0}" = 1 ]; then
  # GDN_CUDA is set both ways, so a build dir configured on another machine follows this one.
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    machine=(-DGDN_CUDA=AUTO -DCMAKE_CUDA_ARCHITECTURES=native)
  else
    machine=(-DGDN_CUDA=OFF)
  fi
fi
targets=()
for t in ${GDN_TARGETS:-}; do targets+=(--target "$t"); done
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=${GDN_BUILD_TYPE:-Release} "${werror[@]}" \
  "${machine[@]}" ${GDN_CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" -j "$jobs" "${targets[@]}"
