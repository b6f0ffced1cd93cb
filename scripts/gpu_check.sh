#!/usr/bin/env bash
# The GPU checks in one run that fits a lent device's time: everything it runs finishes within
# GDN_CHECK_BUDGET_S seconds (default 470, under 8 minutes), the most valuable stages first:
#   tests      every test labelled `gpu` (each kernel against the CPU), one time limit per binary
#   bench      the seed sweep, `gdn bench --device cuda --preset seed` (bench-seed.json)
#   fla        fla's Triton chunk_gated_delta_rule at the same shapes (scripts/bench_fla.py,
#              bench-fla.json): the peer to beat. fla 0.6.0 refuses its backward on Hopper with
#              Triton < 3.7.1 (the H200's image had 3.6): those rows are error rows saying so
#   attention  cuDNN's fused attention against our flash kernel beside the fused gated delta
#              rule, bf16, T 2048/8192, full and a 1024 window (bench-attention.json)
#   racecheck  compute-sanitizer's race check on the fused kernels
# and, only when STAGES names them: lab (gdr_lab's tile variants, conv_lab: conv-lab.jsonl) and
# torch (a PyTorch chunked floor, torch-floor.json). Each stage's time limit is cut to what is
# left of the budget; each writes its results as it goes (a row, a test at a time), so a timeout
# keeps what finished. OUT_DIR (default runs/gpu-check) gets at most 8 files: summary.txt (its
# first lines: the machine, and what could not load and why), machine.txt, tests.log,
# stages.log and the JSON of each bench.
#
# Programs come from BIN (default build/) or from a bundle made by scripts/device_bundle.sh
# (BUNDLE=.device_carry/bundle.tar.xz, unpacked to /tmp), whose gpu-tests.txt lists the tests;
# from BIN the list is `ctest -N -L gpu` of that build. GDN_CTEST_DIR=<build dir> also checks that
# the bundle holds exactly the tests CTest labels `gpu`. FLA_WHEELS=<dir> installs the wheels
# there (fla-core) for the fla stage (the bundle's wheels/ by default).
#
#   scripts/gpu_check.sh --dry-run   the same script on a machine without a GPU: every test must
#                                    skip itself (exit 77), every bench row must say "no device",
#                                    the fla script must skip; CI runs this on the bundle.
# On a lent GPU machine (CUDA toolkit, none of our Debian packages), after
# `scripts/device_bundle.sh 90` here, in one call:
#   BUNDLE=.device_carry/bundle.tar.xz OUT_DIR=$OUT scripts/gpu_check.sh
set -u
cd "$(dirname "$0")/.."
dry_run=0
for arg in "$@"; do
  case $arg in
    --dry-run) dry_run=1 ;;
    *) echo "gpu_check: unknown argument '$arg' (known: --dry-run)" >&2; exit 2 ;;
  esac
done
out=${OUT_DIR:-runs/gpu-check}
mkdir -p "$out"
rm -f "$out/summary.txt" "$out/tests.log" "$out/stages.log"
summary() { echo "$*" | tee -a "$out/summary.txt"; }
budget=${GDN_CHECK_BUDGET_S:-470}
t0=$(date +%s)
left() { echo $((budget - ($(date +%s) - t0))); }
failed=0

# ---- the programs ---------------------------------------------------------------------------
own_runtime=0
if [ -n "${BUNDLE:-}" ]; then
  root=/tmp/gdn-bundle
  rm -rf "$root" && mkdir -p "$root" && tar -C "$root" -xf "$BUNDLE"
  bin=$root/bin tests=$root/bin stubs=$root/stub_libs
  test_list=$(cat "$root/gpu-tests.txt")
  FLA_WHEELS=${FLA_WHEELS:-$root/wheels}
  export LD_LIBRARY_PATH=$root/lib:${LD_LIBRARY_PATH:-}
  # Built against a newer glibc than this machine's (or GDN_OWN_RUNTIME=1): every program runs
  # through the bundle's own loader and C/C++ runtime, behind a wrapper with the program's name.
  need=$(cat "$root/sys/glibc-version" 2>/dev/null || echo 0)
  have=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
  if [ "${GDN_OWN_RUNTIME:-0}" = 1 ] ||
    [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
    summary "runtime: glibc $have here, $need in the bundle: programs run on the bundle's runtime"
    own_runtime=1
    mkdir -p "$root/real"
    for p in "$root"/bin/*; do
      mv "$p" "$root/real/"
      printf '#!/bin/sh\nexec %s/sys/ld-linux-x86-64.so.2 --library-path "%s/lib:%s/sys:${LD_LIBRARY_PATH:-}" %s/real/%s "$@"\n' \
        "$root" "$root" "$root" "$root" "$(basename "$p")" >"$p"
      chmod +x "$p"
    done
  fi
else
  bin=${BIN:-build} tests=${BIN:-build}/tests stubs=${BIN:-build}/tests/stub_libs
  test_list=$(cd "$bin" && ctest -N -L gpu | awk '/Test +#/ {print $3}')
fi
[ -n "$test_list" ] || { summary "tests: no test labelled gpu found"; failed=1; }
# The kernels against the CPU first (if time runs short, these have run), then the rest.
first="test_cuda_gdr test_cuda_packed test_cuda_parity test_cuda_ops test_cuda_nn test_cuda_attention"
ordered=""
for t in $first; do case " $(echo $test_list) " in *" $t "*) ordered="$ordered $t" ;; esac; done
for t in $test_list; do case " $first " in *" $t "*) ;; *) ordered="$ordered $t" ;; esac; done
if [ -n "${GDN_CTEST_DIR:-}" ]; then  # the bundle holds exactly what CTest labels gpu
  want=$(cd "$GDN_CTEST_DIR" && ctest -N -L gpu | awk '/Test +#/ {print $3}' | sort)
  have=$(printf '%s\n' $test_list | sort)
  if [ "$want" != "$have" ]; then
    summary "bundle: its test list differs from ctest -L gpu -N: $(diff <(echo "$want") <(echo "$have") | grep '^[<>]' | tr '\n' ' ')"
    failed=1
  else
    summary "bundle: the $(echo "$want" | wc -l) tests ctest labels gpu"
  fi
fi

# cuDNN and NCCL are opened at run time where found; a machine whose only copies come with
# PyTorch's wheels (nvidia-cudnn-cu13, nvidia-nccl-cu13) gets their folders on the library path.
find_wheel_lib='
import glob, os, site, sys
for root in site.getsitepackages() + [site.getusersitepackages()]:
    for f in sorted(glob.glob(os.path.join(root, "nvidia", "**", sys.argv[1]), recursive=True)):
        print(os.path.dirname(f))
        sys.exit(0)
sys.exit(1)'
for lib in libcudnn.so.9 libnccl.so.2; do
  if ! ldconfig -p 2>/dev/null | grep -q "$lib"; then
    d=$(python3 -c "$find_wheel_lib" "$lib" 2>/dev/null) && export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}
  fi
done

# ---- the machine, and what could not load (the summary's first lines) -----------------------
{ nvidia-smi || echo "nvidia-smi: none"; nvcc --version || echo "nvcc: none"; } >"$out/machine.txt" 2>&1
if gpus=$(nvidia-smi -L 2>/dev/null) && [ -n "$gpus" ]; then
  summary "machine: $gpus"
  [ $dry_run = 1 ] && summary "dry run on a machine with a GPU: the results are real"
else
  summary "machine: no GPU"
  [ $dry_run = 1 ] || { summary "no GPU here: run with --dry-run to check the script alone"; failed=1; }
fi
if [ $own_runtime = 0 ] && missing=$(ldd "$bin/gdn" 2>&1 | grep "not found"); then
  summary "cannot load $bin/gdn: $missing"
  failed=1
fi
if info=$("$bin/gdn" info 2>&1); then
  echo "$info" >>"$out/machine.txt"
  echo "$info" | grep -E '^(cuda devices|cudnn|nccl|nvrtc)' | while read -r line; do summary "$line"; done
else
  summary "gdn info failed: $info"
  failed=1
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}

# ---- stages -----------------------------------------------------------------------------------
wanted() { case " ${STAGES:-tests bench fla attention racecheck} " in *" $1 "*) return 0 ;; esac; return 1; }
# stage NAME LIMIT: sets $limit to what the stage may use, or says why it does not run.
stage() {
  wanted "$1" || return 1
  limit=$2
  local rest
  rest=$(left)
  [ "$limit" -gt "$rest" ] && limit=$rest
  if [ "$limit" -lt 10 ]; then
    summary "$1: not run (the budget of ${budget} s is spent)"
    failed=1
    return 1
  fi
  echo "== $1 (limit ${limit} s)" | tee -a "$out/stages.log"
  stage_t0=$(date +%s)
}
took() { echo $(($(date +%s) - stage_t0)); }
# A bench's JSON in a dry run: every row an error row that says "no device".
all_no_device() {
  python3 - "$1" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))["results"]
bad = [r for r in rows if not str(r.get("error", "")).startswith("no device")]
print(f"{len(rows)} rows, {len(bad)} without 'no device'")
sys.exit(1 if bad or not rows else 0)
EOF
}
# Judges a bench stage: exit status `rc` of the program, its JSON `json`.
judge_bench() {
  local name=$1 rc=$2 json=$3 rows
  rows=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['results']; print(len(r), 'rows,', sum('error' in x for x in r), 'failed')" "$json" 2>/dev/null || echo "no JSON")
  if [ $dry_run = 1 ] && [ $rc = 2 ] && check=$(all_no_device "$json"); then
    summary "$name: dry run: $check (exit $rc after $(took) s)"
  elif [ $rc = 0 ]; then
    summary "$name: passed, $rows (after $(took) s)"
  else
    summary "$name: FAILED (exit $rc after $(took) s; $rows)"
    failed=1
  fi
}

if stage tests 200; then
  # One log for all, one summary line per binary as it ends. Exit 77: the test skipped itself
  # (no device, or a second device it needs): not a failure.
  per_test=${GDN_TEST_LIMIT_S:-60}
  npass=0 nskip=0 nfail=0
  for t in $ordered; do
    rest=$((limit - $(took)))
    if [ "$rest" -lt 5 ]; then
      summary "  $t: not run (the stage's ${limit} s are spent)"
      nfail=$((nfail + 1))
      continue
    fi
    cap=$per_test
    [ "$cap" -gt "$rest" ] && cap=$rest
    echo "--- $t (limit ${cap} s)" >>"$out/tests.log"
    if [ ! -x "$tests/$t" ]; then
      summary "  $t: MISSING from $tests"
      nfail=$((nfail + 1))
      continue
    fi
    s=$(date +%s)
    # GDN_BINARY: the gdn that tests running it use (the bundle's wrappers hide where they are).
    GDN_BINARY="$bin/gdn" timeout "$cap" "$tests/$t" --gtest_brief=1 >>"$out/tests.log" 2>&1
    rc=$?
    dt=$(($(date +%s) - s))
    case $rc in
      0) summary "  $t: passed in $dt s"; npass=$((npass + 1)) ;;
      77) summary "  $t: skipped itself (see tests.log)"; nskip=$((nskip + 1)) ;;
      124) summary "  $t: TIMEOUT after $cap s"; nfail=$((nfail + 1)) ;;
      *) summary "  $t: FAILED (exit $rc after $dt s)"; nfail=$((nfail + 1)) ;;
    esac
  done
  # Without cuDNN and NCCL (empty stand-ins first on the library path): gdn info says so, a hybrid
  # trains on the CPU, and on the GPU attention leaves cuDNN for the flash kernel.
  if [ $((limit - $(took))) -ge 20 ]; then
    echo "--- without cuDNN and NCCL (tests/check_without_vendor_libraries.sh)" >>"$out/tests.log"
    if timeout 60 tests/check_without_vendor_libraries.sh "$bin/gdn" "$stubs" . \
      >>"$out/tests.log" 2>&1; then
      summary "  without cuDNN and NCCL: passed"
      npass=$((npass + 1))
    else
      summary "  without cuDNN and NCCL: FAILED (see tests.log)"
      nfail=$((nfail + 1))
    fi
  fi
  summary "tests: $npass passed, $nskip skipped, $nfail failed or not run (after $(took) s)"
  [ $nfail = 0 ] || failed=1
fi

if stage bench 130; then
  # The JSON is rewritten after every row: a timeout keeps the rows measured.
  timeout "$limit" "$bin/gdn" bench --device cuda --preset seed --out "$out/bench-seed.json" \
    >>"$out/stages.log" 2>&1
  judge_bench bench $? "$out/bench-seed.json"
fi

if stage fla 150; then
  if [ -n "${FLA_WHEELS:-}" ] && ls "$FLA_WHEELS"/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/gdn-fla-site "$FLA_WHEELS"/*.whl >>"$out/stages.log" 2>&1 &&
      export PYTHONPATH=/tmp/gdn-fla-site${PYTHONPATH:+:$PYTHONPATH}
  fi
  # T 2048 first: Triton compiles and autotunes each shape for 20-30 s on an H200, and a stage
  # that runs out of time keeps the rows it finished.
  PYTHONUNBUFFERED=1 timeout "$limit" python3 scripts/bench_fla.py --seq 2048,8192,512 \
    --out "$out/bench-fla.json" \
    >>"$out/stages.log" 2>&1
  rc=$?
  if [ $rc = 77 ]; then
    why=$(grep "bench_fla: skipped" "$out/stages.log" | tail -n 1)
    if [ $dry_run = 1 ]; then summary "fla: dry run: $why"
    else summary "fla: SKIPPED on a GPU machine: $why"; failed=1; fi
  else
    judge_bench fla $rc "$out/bench-fla.json"
  fi
fi

if stage attention 60; then
  timeout "$limit" "$bin/gdn" bench --device cuda --impls fused,attention_flash,attention_cudnn \
    --modes fwd,fwd_bwd --dtypes bfloat16 --batch 1 --heads 16 --seq 2048,8192 --dims 128 \
    --window 0,1024 --out "$out/bench-attention.json" >>"$out/stages.log" 2>&1
  judge_bench attention $? "$out/bench-attention.json"
fi

if stage racecheck 60; then
  filter="--gtest_filter=CudaGdrFused.MatchesItsCpuEmulation*:CudaGdrFused.SubChunks*"
  if [ $dry_run = 1 ] && [ -z "${gpus:-}" ]; then
    # No device for compute-sanitizer: the binary is there and skips.
    timeout "$limit" "$tests/test_cuda_gdr" "$filter" >>"$out/stages.log" 2>&1
    rc=$?
    if [ $rc = 77 ]; then summary "racecheck: dry run: test_cuda_gdr skipped (no device)"
    else summary "racecheck: FAILED (dry run: test_cuda_gdr exit $rc, not 77)"; failed=1; fi
  elif ! command -v compute-sanitizer >/dev/null; then
    summary "racecheck: FAILED (compute-sanitizer not on the PATH)"
    failed=1
  else
    timeout "$limit" compute-sanitizer --tool racecheck --error-exitcode 1 \
      "$tests/test_cuda_gdr" "$filter" >>"$out/stages.log" 2>&1
    rc=$?
    if [ $rc = 0 ]; then summary "racecheck: passed (after $(took) s)"
    else summary "racecheck: FAILED (exit $rc after $(took) s)"; failed=1; fi
  fi
fi

if stage lab 120; then
  {
    timeout 40 "$bin/conv_lab" --repeats 20 --out "$out/conv-lab.jsonl" &&
      for dt in bfloat16 float32; do
        "$bin/gdr_lab" --B 4 --T 8192 --H 8 --K 128 --V 128 --dtype $dt --check first \
          --repeats 10 --variants fused,fused:vt=32,fused:sub=32,chunked --peak-tflops 989 || exit 1
      done
  } >>"$out/stages.log" 2>&1
  rc=$?
  if [ $rc = 0 ]; then summary "lab: passed (after $(took) s)"
  else summary "lab: FAILED (exit $rc after $(took) s)"; failed=1; fi
fi

if stage torch 60; then
  timeout "$limit" python3 scripts/torch_chunked_floor.py --out "$out/torch-floor.json" \
    >>"$out/stages.log" 2>&1
  rc=$?
  if [ $rc = 0 ]; then summary "torch: passed (after $(took) s)"
  else summary "torch: FAILED (exit $rc after $(took) s)"; failed=1; fi
fi

summary "gpu_check: $([ $failed = 0 ] && echo passed || echo FAILED) after $(($(date +%s) - t0)) s of a ${budget} s budget$([ $dry_run = 1 ] && echo ' (dry run)')"
exit $failed
