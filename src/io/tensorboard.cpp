// TensorBoard event files: TFRecord framing, the events, the file's name.
#include "src/io/tensorboard.h"

#include <isa-l.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "src/core/error.h"
#include "tensorboard_event.pb.h"  // generated from src/io/tensorboard_event.proto

namespace gdn::io {

namespace fs = std::filesystem;
namespace pb = gdn::tensorboard;

namespace {

constexpr const char* kPrefix = "events.out.tfevents.";

// The <unix time> of an events file's name, -1 for any other name.
int64_t name_time(const std::string& name) {
  if (name.rfind(kPrefix, 0) != 0) return -1;
  const char* digits = name.c_str() + std::strlen(kPrefix);
  char* end = nullptr;
  const long long t = std::strtoll(digits, &end, 10);
  return end != digits && *end == '.' ? int64_t(t) : -1;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == 0) return "localhost";
  return buf;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  // ISA-L's crc32_iscsi neither inverts its input state nor its result: the standard CRC-32C is
  // ~crc32_iscsi(data, size, ~0).
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  uint32_t state = 0xFFFFFFFFu;
  while (size > 0) {  // its length is an int: 1 GiB at a time
    const size_t n = std::min<size_t>(size, size_t(1) << 30);
    state = crc32_iscsi(p, int(n), state);
    p += n;
    size -= n;
  }
  return ~state;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord(const std::string& data) {
  // Little-endian fields, as TensorFlow's record writer lays them out.
  auto le = [](uint64_t v, int bytes) {
    std::string s(size_t(bytes), '\0');
    for (int i = 0; i < bytes; ++i) s[size_t(i)] = char((v >> (8 * i)) & 0xFF);
    return s;
  };
  const std::string length = le(data.size(), 8);
  return length + le(masked_crc32c(length.data(), length.size()), 4) + data +
         le(masked_crc32c(data.data(), data.size()), 4);
}

double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace {

std::string framed(const pb::Event& e) {
  std::string bytes;
  GDN_CHECK(e.SerializeToString(&bytes), "cannot serialize a TensorBoard event");
  return tfrecord(bytes);
}

}  // namespace

EventWriter::EventWriter(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  GDN_CHECK(!ec, "cannot create the TensorBoard directory ", dir, ": ", ec.message());
  // TensorBoard reads a directory's files in name order: a resume within the same second as
  // the file before it (or a clock set back) still gets a later name.
  int64_t time = int64_t(unix_seconds_now());
  for (const auto& entry : fs::directory_iterator(dir, ec))
    time = std::max(time, name_time(entry.path().filename().string()) + 1);
  GDN_CHECK(!ec, "cannot list the TensorBoard directory ", dir, ": ", ec.message());
  const std::string path =
      (fs::path(dir) / str_cat(kPrefix, time, ".", host_name(), ".", ::getpid())).string();
  GDN_CHECK(!fs::exists(fs::symlink_status(path, ec)), path, " already exists");
  file_ = std::make_unique<AppendFile>(path);
  pb::Event e;
  e.set_wall_time(unix_seconds_now());
  e.set_file_version("brain.Event:2");
  queued_ = framed(e);
  flush();
}

EventWriter::~EventWriter() {
  try {
    flush();
  } catch (const Error&) {
    // Dropped: the owner's last flush() already reported any write that failed.
  }
}

void EventWriter::add_scalar(const std::string& tag, double value, int64_t step, double wall_time) {
  pb::Event e;
  e.set_wall_time(wall_time);
  e.set_step(step);
  pb::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(float(value));
  queued_ += framed(e);
}

void EventWriter::add_text(const std::string& tag, const std::string& text, int64_t step) {
  pb::Event e;
  e.set_wall_time(unix_seconds_now());
  e.set_step(step);
  pb::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  pb::TensorProto* t = v->mutable_tensor();
  t->set_dtype(pb::DT_STRING);
  t->mutable_tensor_shape();  // present and without dims: a scalar string
  t->add_string_val(text);
  queued_ += framed(e);
}

void EventWriter::add_session_start(int64_t step) {
  pb::Event e;
  e.set_wall_time(unix_seconds_now());
  e.set_step(step);
  e.mutable_session_log()->set_status(pb::SessionLog::START);
  queued_ += framed(e);
}

void EventWriter::flush() {
  if (queued_.empty()) return;
  std::string bytes;
  bytes.swap(queued_);  // a failed write is not retried by the destructor
  file_->append(bytes);
}

}  // namespace gdn::io
