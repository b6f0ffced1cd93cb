#!/usr/bin/env bash
# Every repository path a source comment or doc cites exists: a path-like token with a folder
# and a known file ending (kernels/cpu/gemm.h, docs/design.md) in the C++/CUDA sources, scripts,
# CMake files and Markdown must name a file in the repository, from its root or from the citing
# file's folder. Placeholders (RUN_DIR/..., DIR/..., out/...) and system headers are skipped.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
missing=0
files=$(git ls-files '*.h' '*.cpp' '*.cc' '*.cu' '*.cuh' '*.py' '*.sh' '*.md' 'CMakeLists.txt' \
  '*/CMakeLists.txt' Makefile 2>/dev/null || find . -type f \( -name '*.h' -o -name '*.cpp' \
  -o -name '*.cu' -o -name '*.cuh' -o -name '*.md' \))
for f in $files; do
  dir=$(dirname "$f")
  while IFS=: read -r line path; do
    case "$path" in
      RUN_DIR/* | DIR/* | OUT_DIR/* | out/* | runs/* | build*/* | /* | sys/* | gtest/* | nvtx3/* | yaml-cpp/* \
        | nlohmann/* | cuda/* | openblas/* | unicode/* | isa-l/* | google/* | http*) continue ;;
    esac
    [ -e "$path" ] || [ -e "$dir/$path" ] && continue
    echo "$f:$line cites $path, which is not in the repository"
    missing=1
  done < <(grep -noE '(^|[^A-Za-z0-9_./-])[A-Za-z0-9_][A-Za-z0-9_.-]*/[A-Za-z0-9_./-]+\.(h|cpp|cu|cuh|md|py|sh|json|yaml)\b' "$f" \
    | sed -E 's/^([0-9]+):[^A-Za-z0-9_]?/\1:/')
done
exit $missing
