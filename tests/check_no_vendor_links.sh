#!/usr/bin/env bash
# No gdn binary links cuDNN, NCCL or NVRTC (they are opened at run time where present,
# kernels/dynamic_library.h): readelf -d of every executable of the build dir lists none of them.
# Usage: check_no_vendor_links.sh BUILD_DIR
set -euo pipefail
build=$1
n=0 bad=0
while read -r f; do
  head -c 4 "$f" | grep -q "ELF" || continue
  n=$((n + 1))
  if needed=$(readelf -d "$f" | grep NEEDED | grep -E 'lib(cudnn|nccl|nvrtc)'); then
    echo "FAIL: $f links $needed"
    bad=1
  fi
done < <(find "$build" -maxdepth 2 -type f -perm -u+x ! -name '*.so*' ! -path '*/CMakeFiles/*')
[ "$n" -gt 0 ] || { echo "FAIL: no executable found in $build"; exit 1; }
[ $bad = 0 ] && echo "PASS: none of $n executables links cuDNN, NCCL or NVRTC"
exit $bad
