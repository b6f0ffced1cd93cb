# Thin wrapper over scripts/setup.sh (installs missing Debian packages, configures, builds) and
# CTest. The README's quick start uses `make run` (build-run/: the program only) and `make test`
# (build/: everything).
.PHONY: all build run test test-gpu test-sanitize format clean

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

# ASan + UBSan build of the CPU tests.
test-sanitize:
	GDN_BUILD_DIR=build-asan GDN_BUILD_TYPE=RelWithDebInfo \
	  GDN_CMAKE_ARGS="-DGDN_CUDA=OFF -DGDN_SANITIZE=ON" ./scripts/setup.sh
	cd build-asan && ASAN_OPTIONS=detect_leaks=0 ctest --output-on-failure -j 2 -L cpu

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp' '*.cc' '*.cu')

clean:
	rm -rf build build-run build-asan
