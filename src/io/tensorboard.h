// TensorBoard event files: `events.out.tfevents.<unix time>.<host>.<pid>`, a sequence of
// TFRecords (uint64 length, masked crc32c of the length, the data, masked crc32c of the data)
// each holding one serialized Event proto (src/io/tensorboard_event.proto), the first one
// `file_version: "brain.Event:2"`. Scalars, a text summary and SessionLog START are written;
// events are queued and written by flush() in one checked append (a full disk throws naming the
// file), so a killed run keeps every batch it flushed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "src/io/atomic_file.h"

namespace gdn::io {

// CRC-32C (Castagnoli), the standard one: crc32c("123456789") = 0xE3069283.
uint32_t crc32c(const void* data, size_t size);
// TFRecord's masked CRC-32C: rotated right by 15 bits, plus 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t size);
// One TFRecord holding `data`.
std::string tfrecord(const std::string& data);

// Seconds since the Unix epoch, as an Event's wall_time.
double unix_seconds_now();

class EventWriter {
 public:
  // Creates `dir` (and its parents) and a new events file in it, never reopening an existing
  // one: its name's time is past every events file already there, so it sorts (and TensorBoard
  // reads it) last. Writes the file_version event at once.
  explicit EventWriter(const std::string& dir);
  ~EventWriter();  // flushes; an error there is dropped (call flush() to see it)
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  void add_scalar(const std::string& tag, double value, int64_t step, double wall_time);
  // A text summary (TensorBoard's text plugin: a string tensor), shown as Markdown.
  void add_text(const std::string& tag, const std::string& text, int64_t step);
  // SessionLog START: TensorBoard drops every event it read before of a step >= `step` (those
  // of earlier files too): what a resumed run logs again replaces what was logged past it.
  void add_session_start(int64_t step);
  // Writes the queued events.
  void flush();
  const std::string& path() const { return file_->path(); }

 private:
  std::unique_ptr<AppendFile> file_;
  std::string queued_;  // framed records not yet written
};

}  // namespace gdn::io
