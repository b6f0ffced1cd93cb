// `gdn train --trace`: the Chrome trace-event file of a tiny run (kernels/trace_events.h,
// src/train/trace_file.h) parses as trace-event JSON (complete events with name, cat, ph, ts,
// dur, pid, tid; thread names), covers the traced steps with nested phases whose sum is the step
// time within 5%, has module, op and worker spans, GEMMs with their FLOPs, and the table names
// them; spans recorded with no capture on are dropped, and a capture sees every thread that
// worked.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kernels/trace_events.h"
#include "src/train/trace_file.h"
#include "src/train/trainer.h"
#include "tests/test_helpers.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(Trace, SpansAreKeptOnlyWhileCapturing) {
  { trace::Span before("op", "before"); }
  trace::begin_capture();
  {
    trace::Span outer("phase", "outer");
    trace::Span inner("gemm", "inner");
    inner.set_flops(1e6);
  }
  trace::Span late("op", "open at the end");
  const std::vector<trace::Event> ev = trace::end_capture();
  late.end();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].name, "outer");
  EXPECT_EQ(ev[1].name, "inner");
  EXPECT_EQ(ev[1].flops, 1e6);
  EXPECT_LE(ev[0].start_us, ev[1].start_us);
  EXPECT_GE(ev[0].start_us + ev[0].duration_us, ev[1].start_us + ev[1].duration_us);
  EXPECT_TRUE(trace::end_capture().empty());
}

TEST(Trace, EveryThreadOfAParallelLoopRecords) {
  trace::begin_capture();
#pragma omp parallel num_threads(3)
  { GDN_TRACE_WORKER("loop"); }
  const std::vector<trace::Event> ev = trace::end_capture();
  std::set<int> threads;
  for (const trace::Event& e : ev) threads.insert(e.thread);
  EXPECT_EQ(ev.size(), 3u);
  EXPECT_EQ(threads, (std::set<int>{0, 1, 2}));
}

TEST(Trace, TrainWritesAChromeTraceWhosePhasesSumToTheStep) {
  const std::string root = test::fresh_dir("gdn_test_trace_train");
  test::write_tiny_corpus(fs::path(root) / "corpus");
  train::RunConfig cfg = test::tiny_text_run(root, "run", {"train.eval_every=0"});
  train::TrainerOptions o;
  o.quiet = true;
  o.trace_path = (fs::path(root) / "trace.json").string();
  testing::internal::CaptureStderr();
  train::Trainer(cfg, o).run();
  const std::string table = testing::internal::GetCapturedStderr();
  std::ifstream f(o.trace_path);
  ASSERT_TRUE(f) << "no trace written";
  const json doc = json::parse(f);
  ASSERT_TRUE(doc.contains("traceEvents") && doc["traceEvents"].is_array());
  EXPECT_EQ(doc["displayTimeUnit"], "ms");
  // 8 steps: 2 of warm-up, then 3 traced (steps 3-5).
  EXPECT_EQ(doc["otherData"]["first_step"], 3);
  EXPECT_EQ(doc["otherData"]["steps"], 3);
  std::map<std::string, int> categories;
  double steps_us = 0, phases_us = 0;
  int steps = 0, gemms_with_flops = 0, thread_names = 0;
  for (const json& e : doc["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("name")) << e.dump();
    if (e["ph"] == "M") {
      thread_names += e["name"] == "thread_name";
      continue;
    }
    ASSERT_EQ(e["ph"], "X") << e.dump();
    for (const char* key : {"cat", "ts", "dur", "tid"}) ASSERT_TRUE(e.contains(key)) << e.dump();
    ASSERT_GE(double(e["dur"]), 0.0);
    const std::string cat = e["cat"];
    categories[cat]++;
    if (cat == "step") {
      steps++;
      steps_us += double(e["dur"]);
    }
    if (cat == "phase" && e["tid"] == 0) phases_us += double(e["dur"]);
    if (cat == "gemm" && e["args"].contains("flops")) gemms_with_flops++;
  }
  EXPECT_EQ(steps, 3);
  for (const char* cat : {"phase", "module", "kernel", "gemm", "backward", "worker"})
    EXPECT_GT(categories[cat], 0) << "no " << cat << " span";
  EXPECT_GT(gemms_with_flops, 0);
  EXPECT_GE(thread_names, 1);
  // The phases (zero_grad, data, forward, backward, clip, optimizer) cover the steps.
  EXPECT_NEAR(phases_us / steps_us, 1.0, 0.05)
      << "phases " << phases_us << " us, steps " << steps_us << " us";
  EXPECT_NEAR(double(doc["otherData"]["step_ms"]) * 1e3, steps_us, 0.05 * steps_us);
  EXPECT_NE(table.find("op (own time)"), std::string::npos) << table;
  EXPECT_NE(table.find("gemm "), std::string::npos) << table;
  EXPECT_NE(table.find("gated_delta_rule"), std::string::npos) << table;
}

}  // namespace
}  // namespace gdn
