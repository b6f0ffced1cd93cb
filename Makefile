# Thin wrapper over scripts/setup.sh (installs missing Debian packages, configures, builds) and
# CTest. The README's quick start uses `make run` (build-run/: the program only) and `make test`
# (build/: everything).
.PHONY: all build run test test-gpu test-sanitize gpu-check-dry-run format clean

all: build

build:
	./scripts/setup.sh

# The main job: only the gdn program, in build-run/ (no tests, no examples), with CUDA code only
# for the GPUs this machine has (none without a GPU), so a first run builds what it needs.
run:
	GDN_BUILD_DIR=build-run GDN_TARGETS=gdn GDN_FOR_THIS_MACHINE=1 \
	  GDN_CMAKE_ARGS="-DGDN_BUILD_TESTS=OFF $(GDN_CMAKE_ARGS)" ./scripts/setup.sh
	GDN_BIN=build-run/gdn ./scripts/run.sh

# Everything (CUDA for 80;86;90 when nvcc is found) and every test (GPU tests skip without a
# device).
test: build
	cd build && ctest --output-on-failure -j 2

# Only the GPU tests (label gpu).
test-gpu: build
	cd build && ctest --output-on-failure -L gpu

# scripts/gpu_check.sh on this machine, GPU or not, over a bundle of build/'s programs packed as
# for a lent GPU machine (scripts/device_bundle.sh --from build): without a device every test
# must skip itself and every bench row say "no device", so the script and the bundle are proven
# coherent before a device is ever lent. CI runs it.
gpu-check-dry-run: build
	GDN_BUNDLE_XZ=-0 GDN_FLA_WHEELS=0 ./scripts/device_bundle.sh --from build
	BUNDLE=.device_carry/bundle.tar.xz GDN_CTEST_DIR=build OUT_DIR=runs/gpu-check-dry-run \
	  ./scripts/gpu_check.sh --dry-run

# ASan + UBSan build of the CPU tests.
test-sanitize:
	GDN_BUILD_DIR=build-asan GDN_BUILD_TYPE=RelWithDebInfo \
	  GDN_CMAKE_ARGS="-DGDN_CUDA=OFF -DGDN_SANITIZE=ON" ./scripts/setup.sh
	cd build-asan && ASAN_OPTIONS=detect_leaks=0 ctest --output-on-failure -j 2 -L cpu

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp' '*.cc' '*.cu')

clean:
	rm -rf build build-run build-asan
