// TensorBoard event files (src/io/tensorboard.h), read back by a reader of this test's own: the
// TFRecord framing and both CRCs of every record, the events (file_version first, scalars, the
// config text, SessionLog START) and their wire bytes, a corrupted byte caught by the CRC, a
// failed write named, and the trainer's files: a resume opens a second file whose START drops
// what metrics.jsonl dropped.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "src/io/tensorboard.h"
#include "src/train/metrics.h"
#include "src/train/trainer.h"
#include "tensorboard_event.pb.h"  // generated from src/io/tensorboard_event.proto
#include "tests/test_helpers.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

namespace fs = std::filesystem;
namespace pb = gdn::tensorboard;

uint64_t read_le(const std::string& bytes, size_t at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t(uint8_t(bytes[at + size_t(i)])) << (8 * i);
  return v;
}

// The records of a TFRecord file; each length and data checked against its masked CRC-32C.
// A damaged or cut file throws naming the record.
std::vector<std::string> read_records(const std::string& path) {
  const std::string bytes = test::read_file(path);
  std::vector<std::string> out;
  size_t at = 0;
  while (at < bytes.size()) {
    const size_t n = out.size();
    GDN_CHECK(at + 12 <= bytes.size(), "record ", n, ": cut in its header");
    const uint64_t length = read_le(bytes, at, 8);
    GDN_CHECK(read_le(bytes, at + 8, 4) == io::masked_crc32c(bytes.data() + at, 8), "record ", n,
              ": length CRC mismatch");
    GDN_CHECK(at + 12 + length + 4 <= bytes.size(), "record ", n, ": cut in its data");
    const std::string data = bytes.substr(at + 12, length);
    GDN_CHECK(read_le(bytes, at + 12 + length, 4) == io::masked_crc32c(data.data(), data.size()),
              "record ", n, ": data CRC mismatch");
    out.push_back(data);
    at += 12 + length + 4;
  }
  return out;
}

std::vector<pb::Event> read_events(const std::string& path) {
  std::vector<pb::Event> out;
  for (const std::string& r : read_records(path)) {
    out.emplace_back();
    EXPECT_TRUE(out.back().ParseFromString(r));
  }
  return out;
}

// The events files of a directory in name order: TensorBoard's reading order.
std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

const pb::Summary::Value& only_value(const pb::Event& e) {
  EXPECT_TRUE(e.has_summary());
  EXPECT_EQ(e.summary().value_size(), 1);
  return e.summary().value(0);
}

TEST(TensorBoard, Crc32cCheckValueAndMask) {
  EXPECT_EQ(io::crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(io::crc32c("", 0), 0u);
  const uint32_t c = io::crc32c("abc", 3);
  EXPECT_EQ(io::masked_crc32c("abc", 3), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(TensorBoard, WritesFramedEventsTensorBoardReads) {
  test::TempDir tmp;
  const std::string dir = tmp.file("tb");
  std::string path;
  {
    io::EventWriter w(dir);
    path = w.path();
    w.add_session_start(7);
    w.add_scalar("loss", 2.5, 7, 1700000000.25);
    w.add_scalar("val_loss", 1.0 / 3.0, 8, 1700000001.5);
    w.add_text("config", "model:\n  hidden_size: 32\n", 7);
    w.flush();
  }
  const std::string name = fs::path(path).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  EXPECT_NE(name.find(str_cat(".", ::getpid())), std::string::npos) << name;

  const std::vector<pb::Event> ev = read_events(path);
  ASSERT_EQ(ev.size(), 5u);
  EXPECT_EQ(ev[0].file_version(), "brain.Event:2");
  EXPECT_GT(ev[0].wall_time(), 1.6e9);
  EXPECT_EQ(ev[1].step(), 7);
  ASSERT_TRUE(ev[1].has_session_log());
  EXPECT_EQ(ev[1].session_log().status(), pb::SessionLog::START);

  EXPECT_EQ(ev[2].step(), 7);
  EXPECT_EQ(ev[2].wall_time(), 1700000000.25);
  EXPECT_EQ(only_value(ev[2]).tag(), "loss");
  EXPECT_EQ(only_value(ev[2]).simple_value(), 2.5f);
  EXPECT_EQ(ev[3].step(), 8);
  EXPECT_EQ(only_value(ev[3]).tag(), "val_loss");
  EXPECT_EQ(only_value(ev[3]).simple_value(), float(1.0 / 3.0));

  const pb::Summary::Value& text = only_value(ev[4]);
  EXPECT_EQ(text.tag(), "config");
  EXPECT_EQ(text.metadata().plugin_data().plugin_name(), "text");
  EXPECT_EQ(text.tensor().dtype(), pb::DT_STRING);
  EXPECT_TRUE(text.tensor().has_tensor_shape());
  EXPECT_EQ(text.tensor().tensor_shape().dim_size(), 0);  // a scalar
  ASSERT_EQ(text.tensor().string_val_size(), 1);
  EXPECT_EQ(text.tensor().string_val(0), "model:\n  hidden_size: 32\n");
}

TEST(TensorBoard, WireBytesAreTensorBoardsFieldNumbers) {
  // Event{step: 3, session_log{status: START}} by hand: step is field 2 (varint), session_log
  // field 7 (length-delimited) holding status, field 1.
  pb::Event e;
  e.set_step(3);
  e.mutable_session_log()->set_status(pb::SessionLog::START);
  EXPECT_EQ(e.SerializeAsString(), std::string("\x10\x03\x3a\x02\x08\x01", 6));
  // Summary.Value{tag: "a", simple_value: 1}: tag field 1, simple_value field 2 (fixed32).
  pb::Summary::Value v;
  v.set_tag("a");
  v.set_simple_value(1.0f);
  EXPECT_EQ(v.SerializeAsString(), std::string("\x0a\x01"
                                               "a"
                                               "\x15\x00\x00\x80\x3f",
                                               8));
}

TEST(TensorBoard, ACorruptedByteIsCaughtByTheCrc) {
  test::TempDir tmp;
  std::string path;
  {
    io::EventWriter w(tmp.file("tb"));
    w.add_scalar("loss", 1.25, 1, 1.0);
    path = w.path();
  }
  const std::string good = test::read_file(path);
  ASSERT_EQ(read_records(path).size(), 2u);
  std::string bad = good;
  bad[bad.size() - 6] ^= 0x01;  // in the last record's data
  test::write_file(path, bad);
  EXPECT_NE(test::error_of([&] { read_records(path); }).find("record 1: data CRC mismatch"),
            std::string::npos);
  bad = good;
  bad[0] ^= 0x01;  // the first record's length
  test::write_file(path, bad);
  EXPECT_NE(test::error_of([&] { read_records(path); }).find("record 0: length CRC mismatch"),
            std::string::npos);
  test::write_file(path, good.substr(0, good.size() - 1));
  EXPECT_NE(test::error_of([&] { read_records(path); }).find("record 1: cut"), std::string::npos);
}

TEST(TensorBoard, AFailedWriteThrowsNamingTheFileAndLeavesItWhole) {
  test::TempDir tmp;
  io::EventWriter w(tmp.file("tb"));
  const std::string before = test::read_file(w.path());
  // A full disk, as a file size limit: write() fails with EFBIG (SIGXFSZ ignored) part way.
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = before.size() + 10;
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  w.add_text("config", std::string(1000, 'x'), 0);
  const std::string err = test::error_of([&] { w.flush(); });
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(err.find("cannot write " + w.path()), std::string::npos) << err;
  EXPECT_EQ(test::read_file(w.path()), before);  // the partial record cut back off
  w.add_scalar("loss", 1, 1, 1);
  w.flush();
  EXPECT_EQ(read_records(w.path()).size(), 2u);
}

TEST(TensorBoard, ASecondWriterOpensANewFileThatSortsLast) {
  test::TempDir tmp;
  const std::string dir = tmp.file("tb");
  std::string first, second;
  {
    io::EventWriter w(dir);
    w.add_scalar("loss", 1, 1, 1);
    first = w.path();
  }
  const std::string first_bytes = test::read_file(first);
  {
    io::EventWriter w(dir);  // the same second, the same process: still a new name
    w.add_scalar("loss", 2, 2, 2);
    second = w.path();
  }
  EXPECT_NE(first, second);
  EXPECT_EQ(event_files(dir), (std::vector<std::string>{first, second}));
  EXPECT_EQ(test::read_file(first), first_bytes);  // never reopened
  EXPECT_EQ(read_events(second).size(), 2u);
}

TEST(TensorBoard, MetricsLogWritesNumericFieldsAsScalars) {
  test::TempDir tmp;
  {
    train::MetricsLog log(tmp.file("metrics.jsonl"));
    log.attach(std::make_unique<io::EventWriter>(tmp.file("tb")));
    log.write({{"step", 5}, {"loss", 2.0}, {"tokens", 640}, {"note", "x"}, {"flag", true}});
    log.write({{"step", 6}, {"skipped", true}, {"loss", nullptr}});
    log.write({{"step", 6}, {"val_loss", 1.5}});
  }
  const std::vector<std::string> files = event_files(tmp.file("tb"));
  ASSERT_EQ(files.size(), 1u);
  std::vector<std::pair<std::string, int64_t>> seen;
  std::vector<float> values;
  for (const pb::Event& e : read_events(files[0]))
    if (e.has_summary()) {
      seen.emplace_back(only_value(e).tag(), e.step());
      values.push_back(only_value(e).simple_value());
    }
  // Fields in the order nlohmann keeps them (by name); `step`, strings, booleans, nulls: none.
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, int64_t>>{
                      {"loss", 5}, {"tokens", 5}, {"val_loss", 6}}));
  EXPECT_EQ(values, (std::vector<float>{2.0f, 640.0f, 1.5f}));
}

// What TensorBoard shows of a run's tb/ directory: the scalars (tag, step) -> value, read file
// by file in name order; a SessionLog START drops every scalar read so far of a step >= its.
// Also counts the files and the config texts.
struct Shown {
  std::map<std::pair<std::string, int64_t>, float> scalars;
  std::vector<std::string> configs;
  std::vector<int64_t> starts;
};

Shown shown(const std::string& dir) {
  Shown s;
  for (const std::string& f : event_files(dir)) {
    const std::vector<pb::Event> ev = read_events(f);
    EXPECT_TRUE(!ev.empty() && ev[0].file_version() == "brain.Event:2") << f;
    for (const pb::Event& e : ev) {
      if (e.has_session_log() && e.session_log().status() == pb::SessionLog::START) {
        s.starts.push_back(e.step());
        for (auto it = s.scalars.begin(); it != s.scalars.end();)
          it = it->first.second >= e.step() ? s.scalars.erase(it) : std::next(it);
      }
      if (!e.has_summary()) continue;
      const pb::Summary::Value& v = only_value(e);
      if (v.tag() == "config")
        s.configs.push_back(v.tensor().string_val(0));
      else
        s.scalars[{v.tag(), e.step()}] = v.simple_value();
    }
  }
  return s;
}

// metrics.jsonl's numeric fields: (name, step) -> value as a float.
std::map<std::pair<std::string, int64_t>, float> logged(const std::string& run_dir) {
  std::map<std::pair<std::string, int64_t>, float> out;
  std::ifstream f(fs::path(run_dir) / "metrics.jsonl");
  std::string line;
  while (std::getline(f, line)) {
    const auto j = nlohmann::json::parse(line);
    for (const auto& [name, value] : j.items())
      if (name != "step" && value.is_number())
        out[{name, j["step"].get<int64_t>()}] = float(value.get<double>());
  }
  return out;
}

TEST(TensorBoard, TrainerResumeOpensASecondFileAndDropsWhatMetricsDropped) {
  const std::string root = test::fresh_dir("gdn_test_tensorboard_resume");
  test::write_tiny_corpus(fs::path(root) / "corpus");
  const train::RunConfig cfg = test::tiny_text_run(root, "run");
  const std::string run_dir = cfg.train.out_dir, tb = (fs::path(run_dir) / "tb").string();
  train::TrainerOptions o;
  o.quiet = true;
  o.stop_after = 3;  // saved at step 3
  {
    train::Trainer t(cfg, o);
    EXPECT_EQ(t.run().step, 3);
  }
  ASSERT_EQ(event_files(tb).size(), 1u);
  EXPECT_EQ(shown(tb).scalars, logged(run_dir));
  // A run killed after logging steps 4 and 5 past its last checkpoint (step 3).
  {
    train::MetricsLog log((fs::path(run_dir) / "metrics.jsonl").string());
    log.attach(std::make_unique<io::EventWriter>(tb));
    log.write({{"step", 4}, {"loss", 99.0}, {"orphan", 1.0}});
    log.write({{"step", 5}, {"loss", 98.0}});
  }
  o.stop_after = -1;
  o.resume = run_dir;
  {
    train::Trainer t(cfg, o);
    EXPECT_EQ(t.state().step, 3);
    EXPECT_EQ(t.run().step, 8);
  }
  const std::vector<std::string> files = event_files(tb);
  ASSERT_EQ(files.size(), 3u);
  const std::vector<pb::Event> resumed = read_events(files[2]);
  ASSERT_GE(resumed.size(), 2u);
  ASSERT_TRUE(resumed[1].has_session_log());  // first, after the file version
  EXPECT_EQ(resumed[1].step(), 4);
  const Shown s = shown(tb);
  EXPECT_EQ(s.starts, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(s.scalars, logged(run_dir));  // the orphans gone from both
  EXPECT_EQ(s.scalars.count({"orphan", 4}), 0u);
  for (const char* tag : {"loss", "lr", "grad_norm", "tokens_per_s", "mfu", "mem_bytes"})
    for (int64_t step = 1; step <= 8; ++step)
      EXPECT_EQ(s.scalars.count({tag, step}), 1u) << tag << " " << step;
  EXPECT_EQ(s.scalars.count({"val_loss", 4}), 1u);
  EXPECT_EQ(s.scalars.count({"val_loss", 8}), 1u);
  const std::string config = test::read_file((fs::path(run_dir) / "config.yaml").string());
  EXPECT_EQ(s.configs, (std::vector<std::string>(2, "```yaml\n" + config + "```\n")));
}

TEST(TensorBoard, TrainerWritesNoneWhenTurnedOff) {
  const std::string root = test::fresh_dir("gdn_test_tensorboard_off");
  test::write_tiny_corpus(fs::path(root) / "corpus");
  train::TrainerOptions o;
  o.quiet = true;
  o.stop_after = 1;
  train::Trainer t(test::tiny_text_run(root, "run", {"train.tensorboard=false"}), o);
  t.run();
  EXPECT_FALSE(fs::exists(fs::path(root) / "run" / "tb"));
  EXPECT_TRUE(fs::exists(fs::path(root) / "run" / "metrics.jsonl"));
}

}  // namespace
}  // namespace gdn
