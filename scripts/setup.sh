#!/usr/bin/env bash
# Installs the Debian packages gdn needs (when run as root and something is missing), then
# configures and builds into build/. Used by `make run` and `make test`; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config libgtest-dev libyaml-cpp-dev libopenblas-openmp-dev
  nlohmann-json3-dev libcli11-dev libopenmpi-dev openmpi-bin libsentencepiece-dev)
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
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=${GDN_BUILD_TYPE:-Release} "${werror[@]}" ${GDN_CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" -j "$jobs"
