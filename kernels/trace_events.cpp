#include "kernels/trace_events.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

namespace gdn::trace {

namespace {

std::atomic<bool> g_on{false};
std::atomic<int64_t (*)()> g_alloc_counter{nullptr};

// One buffer per thread, owned by the registry (threads may outlive or predate a capture).
struct Buffer {
  int thread = 0;
  uint64_t generation = 0;  // the capture its events belong to
  std::vector<Event> events;
};

struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::atomic<int64_t> start_ns{0};     // the capture's start on the steady clock
  std::atomic<uint64_t> generation{0};  // read by recording threads without the lock
  int next_thread = 0;
};

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: workers may record at exit
  return *r;
}

double now_us() {
  return 1e-3 * double(steady_ns() - registry().start_ns.load(std::memory_order_relaxed));
}

Buffer& this_thread_buffer() {
  thread_local Buffer* mine = nullptr;
  Registry& r = registry();
  if (!mine) {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.buffers.push_back(std::make_unique<Buffer>());
    mine = r.buffers.back().get();
    mine->thread = r.next_thread++;
    mine->generation = r.generation.load();
  }
  if (mine->generation != r.generation.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(r.mutex);  // a new capture: renumber, drop old events
    mine->events.clear();
    mine->generation = r.generation.load();
    mine->thread = r.next_thread++;
  }
  return *mine;
}

int64_t alloc_count() {
  const auto counter = g_alloc_counter.load(std::memory_order_relaxed);
  return counter ? counter() : 0;
}

}  // namespace

bool capturing() {
  return g_on.load(std::memory_order_relaxed);
}

void begin_capture() {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.generation.fetch_add(1);
    r.next_thread = 0;
    r.start_ns.store(steady_ns());
  }
  this_thread_buffer();  // the capturing thread is thread 0
  g_on.store(true);
}

std::vector<Event> end_capture() {
  g_on.store(false);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<Event> all;
  for (auto& b : r.buffers) {
    if (b->generation != r.generation) continue;
    all.insert(all.end(), b->events.begin(), b->events.end());
    b->events.clear();
  }
  std::stable_sort(all.begin(), all.end(), [](const Event& a, const Event& b) {
    return a.thread != b.thread ? a.thread < b.thread : a.start_us < b.start_us;
  });
  return all;
}

void set_alloc_counter(int64_t (*counter)()) {
  g_alloc_counter.store(counter);
}

void Span::set_detail(const std::string& detail) {
  if (open_) detail_ = detail;
}

void Span::open(const char* category, const char* name) {
  open_ = true;
  category_ = category;
  name_ = name;
  allocs0_ = alloc_count();
  start_us_ = now_us();
}

void Span::close() {
  const double end = now_us();
  if (!capturing()) return;  // the capture ended while this span was open
  Buffer& b = this_thread_buffer();
  Event e;
  e.name = std::move(name_);
  e.category = category_;
  e.thread = b.thread;
  e.start_us = start_us_;
  e.duration_us = end - start_us_;
  e.flops = flops_;
  e.allocs = alloc_count() - allocs0_;
  e.detail = std::move(detail_);
  b.events.push_back(std::move(e));
}

}  // namespace gdn::trace
