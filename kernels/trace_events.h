// Spans of work for `gdn train --trace FILE.json` (Chrome's trace-event format, which Perfetto and
// chrome://tracing open): a phase of the step, a layer, an op, a kernel, one thread's share of a
// parallel loop. Off unless a capture is on: then a Span costs two clock reads and an append to
// its thread's own buffer (a lock only the first time a thread records), and end_capture()
// collects every thread's events. Thread 0 is the one that began the capture; OpenMP workers are
// numbered as they first record. The lowest layer has it, so CPU kernels can mark their workers'
// parts (GDN_TRACE_WORKER inside `omp parallel`).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gdn::trace {

struct Event {
  std::string name;
  const char* category = "";  // phase, module, op, kernel, gemm, backward, worker
  int thread = 0;
  double start_us = 0, duration_us = 0;  // from the capture's start
  double flops = 0;                      // when defined (GEMMs, the gated delta rule), else 0
  int64_t allocs = 0;                    // allocator calls inside the span, when counted
  std::string detail;                    // e.g. the module of a backward node
};

// Whether a capture is on (one relaxed atomic load).
bool capturing();
// Starts a capture on this thread (thread 0), dropping any earlier events.
void begin_capture();
// Ends it and returns every thread's events, ordered by thread then start.
std::vector<Event> end_capture();

// Where allocator calls are counted (src/core sets it): Spans record the calls made inside them.
void set_alloc_counter(int64_t (*counter)());

class Span {
 public:
  Span(const char* category, const char* name) {
    if (capturing()) open(category, name);
  }
  Span(const char* category, const std::string& name) {
    if (capturing()) open(category, name.c_str());
  }
  ~Span() { end(); }
  // Closes the span now (the destructor then does nothing).
  void end() {
    if (open_) close();
    open_ = false;
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  void set_flops(double flops) { flops_ = flops; }
  void set_detail(const std::string& detail);

 private:
  void open(const char* category, const char* name);
  void close();
  bool open_ = false;
  const char* category_ = "";
  std::string name_, detail_;
  double start_us_ = 0, flops_ = 0;
  int64_t allocs0_ = 0;
};

}  // namespace gdn::trace

// One worker's share of a parallel loop: inside `#pragma omp parallel`, before its `omp for`.
#define GDN_TRACE_WORKER(name) ::gdn::trace::Span gdn_trace_worker_("worker", name)
