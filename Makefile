# Thin wrapper over scripts/setup.sh (installs missing Debian packages, configures, builds) and
# CTest. The README's quick start uses `make run` and `make test`.
.PHONY: all build run test test-gpu test-sanitize format clean

all: build

build:
	./scripts/setup.sh

# The main job.
run: build
	./scripts/run.sh

# Every test (GPU tests skip without a device).
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
	rm -rf build build-asan
