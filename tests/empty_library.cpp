// An empty shared library, built as libcudnn.so.9 and libnccl.so.2 for
// tests/check_without_vendor_libraries.sh: first on LD_LIBRARY_PATH, it stands for a machine whose
// cuDNN and NCCL are unusable (it opens, and has none of their functions).
extern "C" int gdn_empty_library_marker() {
  return 0;
}
