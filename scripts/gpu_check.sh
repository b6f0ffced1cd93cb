#!/usr/bin/env bash
# The GPU checks in one run, for a machine with an NVIDIA GPU: the `gpu` tests, compute-sanitizer's
# race check on the fused kernels, the fused kernels side by side in the kernel lab (and the causal
# conv1d's direct kernels against cuDNN: conv_lab, conv-lab.jsonl), the seed
# sweep (`gdn bench --device cuda --preset seed`), causal attention on cuDNN's fused attention
# against our flash kernel beside the fused gated delta rule (`gdn bench --impls
# fused,attention_flash,attention_cudnn`, bf16, T 2048 and 8192, full and a 1024 window:
# bench-attention.json) and, where python3 has PyTorch, the floor of a
# straightforward PyTorch chunked implementation (scripts/torch_chunked_floor.py). Each stage has a time limit and writes
# its log to OUT_DIR (default runs/gpu-check); summary.txt has one line per stage.
#
# Programs come from BIN (default build/, as scripts/setup.sh builds them) or from a bundle
# made by scripts/device_bundle.sh (BUNDLE=.device_carry/bundle.tar.xz: unpacked to /tmp).
# STAGES (default "tests racecheck lab bench attention torch") picks stages.
#
# On a lent GPU machine with the CUDA toolkit but none of our Debian packages: build the bundle
# here (scripts/device_bundle.sh 90), carry .device_carry, and run there, in calls of at most
# 10 minutes each (the stage limits add up to more):
#   BUNDLE=.device_carry/bundle.tar.xz OUT_DIR=$OUT STAGES="tests racecheck lab" scripts/gpu_check.sh
#   BUNDLE=.device_carry/bundle.tar.xz OUT_DIR=$OUT STAGES="bench torch" scripts/gpu_check.sh
#   BUNDLE=.device_carry/bundle.tar.xz OUT_DIR=$OUT STAGES="attention" scripts/gpu_check.sh
set -u
cd "$(dirname "$0")/.."
out=${OUT_DIR:-runs/gpu-check}
mkdir -p "$out"
own_runtime=0
if [ -n "${BUNDLE:-}" ]; then
  rm -rf /tmp/gdn-bundle && mkdir -p /tmp/gdn-bundle && tar -C /tmp/gdn-bundle -xJf "$BUNDLE"
  bin=/tmp/gdn-bundle/bin tests=/tmp/gdn-bundle/bin
  export LD_LIBRARY_PATH=/tmp/gdn-bundle/lib:${LD_LIBRARY_PATH:-}
  # Built against a newer glibc than this machine's (or GDN_OWN_RUNTIME=1): every program runs
  # through the bundle's own loader and C/C++ runtime, behind a wrapper with the program's name.
  need=$(cat /tmp/gdn-bundle/sys/glibc-version 2>/dev/null || echo 0)
  have=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
  if [ "${GDN_OWN_RUNTIME:-0}" = 1 ] ||
    [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
    echo "gpu_check: glibc $have here, $need in the bundle: programs run on the bundle's runtime"
    own_runtime=1
    mkdir -p /tmp/gdn-bundle/real
    for p in /tmp/gdn-bundle/bin/*; do
      mv "$p" /tmp/gdn-bundle/real/
      printf '#!/bin/sh\nexec /tmp/gdn-bundle/sys/ld-linux-x86-64.so.2 --library-path "/tmp/gdn-bundle/lib:/tmp/gdn-bundle/sys:${LD_LIBRARY_PATH:-}" /tmp/gdn-bundle/real/%s "$@"\n' \
        "$(basename "$p")" >"$p"
      chmod +x "$p"
    done
  fi
else
  bin=${BIN:-build} tests=${BIN:-build}/tests
fi
# cuDNN and NCCL are linked, not bundled: where the loader does not know them (a machine whose
# only copies come with PyTorch's wheels), the wheels' folders go on the library path.
for lib in cudnn nccl; do
  if ! ldconfig -p 2>/dev/null | grep -q "lib$lib\.so"; then
    d=$(python3 -c "import nvidia.$lib as m, os; print(os.path.join(list(m.__path__)[0], 'lib'))" \
      2>/dev/null) && [ -d "$d" ] && export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}
  fi
done
# A library still missing stops every program at start: say which, once, up front.
# (On the bundle's runtime this machine's ldd cannot tell; the first program says it instead.)
if [ $own_runtime = 0 ] && missing=$(ldd "$bin/gdn" | grep "not found"); then
  echo "gpu_check: $bin/gdn cannot load: $missing" | tee -a "$out/summary.txt" >&2
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8} bin tests out
stage() {  # name, seconds, command...
  local name=$1 limit=$2 start rc
  shift 2
  case " ${STAGES:-tests racecheck lab bench attention torch} " in *" $name "*) ;; *) return 0 ;; esac
  echo "== $name (limit ${limit}s)"
  start=$(date +%s)
  timeout "$limit" bash -c "$*" >"$out/$name.log" 2>&1  # functions below are exported
  rc=$?
  echo "$name: exit $rc after $(($(date +%s) - start)) s" | tee -a "$out/summary.txt"
  tail -n 15 "$out/$name.log"
}
{ nvidia-smi; nvcc --version; } >"$out/machine.txt" 2>&1
run_tests() {
  local failed=0
  for t in "$tests"/test_cuda_*; do
    echo "--- $(basename "$t")"
    # One binary that hangs (a kernel waiting forever) must not eat the others' time.
    # GDN_BINARY: the gdn that tests running it use (the bundle's wrappers hide where they are).
    # Exit 77: the test skipped itself (e.g. a second device it needs is absent): not a failure.
    local rc=0
    GDN_BINARY="$bin/gdn" timeout 150 "$t" --gtest_brief=1 || rc=$?
    case $rc in
      0) ;;
      77) echo "SKIPPED: $(basename "$t")" ;;
      *) echo "FAILED ($rc): $(basename "$t")"; failed=1 ;;
    esac
  done
  return $failed
}
export -f run_tests
stage tests 240 run_tests
stage racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 1 \
  '"$tests/test_cuda_gdr"' "--gtest_filter=CudaGdrFused.MatchesItsCpuEmulation*:CudaGdrFused.SubChunks*"
lab() {
  # The causal conv1d, direct kernels vs cuDNN (checked against the CPU, timed): one JSON line per
  # (shape, dtype, implementation, pass) in conv-lab.jsonl; its failure fails the stage at the end.
  local conv=0
  if [ -x "$bin/conv_lab" ]; then
    rm -f "$out/conv-lab.jsonl"
    timeout 60 "$bin/conv_lab" --repeats 20 --out "$out/conv-lab.jsonl" || conv=1
  else
    echo "conv_lab: not in $bin (scripts/device_bundle.sh must build it)"
    conv=1
  fi
  for dt in bfloat16 float32; do
    for d in 64 128; do
      "$bin/gdr_lab" --B 4 --T 8192 --H 8 --K $d --V $d --dtype $dt --check first --repeats 10 \
        --variants fused,fused:vt=16,fused:vt=32,fused:vt=64,fused:sub=32,fused:sub=32:vt=32,chunked \
        --peak-tflops 989 || return 1
    done
  done
  "$bin/gdr_lab" --B 2 --T 1024 --H 4 --K 128 --V 128 --dtype bfloat16 --check cpu --repeats 3 \
    --variants fused,chunked,recurrent,lab || return 1
  return $conv
}
export -f lab
stage lab 240 lab
stage bench 420 '"$bin/gdn"' bench --device cuda --preset seed --out '"$out/bench-seed.json"'
# Rows cuDNN cannot run are error rows naming why (exit 2; the JSON is still written). The fp64
# CPU reference runs once per T and window.
stage attention 240 '"$bin/gdn"' bench --device cuda --impls fused,attention_flash,attention_cudnn \
  --modes fwd,fwd_bwd --dtypes bfloat16 --batch 1 --heads 16 --seq 2048,8192 --dims 128 \
  --window 0,1024 --out '"$out/bench-attention.json"'
stage torch 150 python3 scripts/torch_chunked_floor.py --out '"$out/torch-floor.json"'
echo "results in $out:"
ls -la "$out"
