// prepare_data in four passes over the documents: scan (read, validate, measure, apply
// max_bytes), split (by document hash), tokenizer (SentencePiece: train on a sample of the train
// documents), and tokenize (the main thread reads a block of documents, threads encode them, the
// main thread appends them in order, so the shards do not depend on the thread count). Each pass
// reads the files again (DocumentReader yields the same text every time), so memory holds one
// block of text, not the corpus. meta.json's text comes from meta.cpp.
#include "src/data/prepare.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <thread>

#include "kernels/philox.h"
#include "src/core/error.h"
#include "src/data/corpus.h"
#include "src/data/meta.h"
#include "src/data/shard.h"
#include "src/data/tokenizer.h"
#include "src/io/atomic_file.h"
#include "src/io/content_hash.h"

namespace gdn::data {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxUtf8Listed = 20;  // files with invalid UTF-8 named in the summary

struct Doc {
  int64_t bytes = 0;  // used (after a max_bytes cut)
  uint64_t hash = 0;
  int64_t line = 0;  // its line in a JSON Lines file (0: a plain-text file)
  int32_t file = 0;  // index into the input files
  bool val = false;
  int64_t prompt_bytes = -1;  // a prompt/completion pair: its prompt's bytes (Document)
};

// Rank of a document in the split: FNV-1a of its key (its path below the input it was found
// under, so the split does not depend on where the corpus lives), then a splitmix64 finaliser.
uint64_t path_hash(const std::string& path) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : path) h = (h ^ c) * 1099511628211ull;
  h ^= h >> 30, h *= 0xbf58476d1ce4e5b9ull, h ^= h >> 27, h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

// The split key of a document: its file's key, plus ":LINE" for a line of a JSON Lines file.
uint64_t doc_hash(const InputFile& f, int64_t line) {
  return path_hash(line > 0 ? f.key + ":" + std::to_string(line) : f.key);
}

// The longest prefix of at most `limit` bytes that ends after a newline (else on a character
// boundary), so a max_bytes cut keeps whole lines.
size_t cut_point(const std::string& text, size_t limit) {
  if (text.size() <= limit) return text.size();
  size_t nl = text.rfind('\n', limit - 1);
  if (limit > 0 && nl != std::string::npos) return nl + 1;
  size_t n = limit;
  while (n > 0 && (uint8_t(text[n]) & 0xC0) == 0x80) --n;
  return n;
}

class Progress {
 public:
  Progress(bool enabled, std::string stage, std::string unit, int64_t items, int64_t bytes)
      : enabled_(enabled),
        tty_(isatty(2)),
        stage_(std::move(stage)),
        unit_(std::move(unit)),
        items_(items),
        bytes_(bytes),
        start_(Clock::now()),
        last_(start_) {}
  void update(int64_t items, int64_t bytes, int64_t tokens, bool final = false) {
    if (!enabled_) return;
    const auto now = Clock::now();
    const double since = std::chrono::duration<double>(now - last_).count();
    if (!final && since < (tty_ ? 0.25 : 5.0)) return;
    last_ = now;
    const double secs = std::max(1e-9, std::chrono::duration<double>(now - start_).count());
    std::fprintf(stderr, "%sgdn prepare-data: %-9s %s %lld/%lld  %.1f/%.1f MB", tty_ ? "\r" : "",
                 stage_.c_str(), unit_.c_str(), (long long)items, (long long)items_, bytes / 1e6,
                 bytes_ / 1e6);
    if (tokens >= 0)
      std::fprintf(stderr, "  %.2fM tokens  %.2fM tokens/s", tokens / 1e6, tokens / 1e6 / secs);
    std::fprintf(stderr, "  %.1fs%s", secs, tty_ && !final ? "\x1b[K" : "\n");
  }

 private:
  bool enabled_, tty_;
  std::string stage_, unit_;
  int64_t items_, bytes_;
  Clock::time_point start_, last_;
};

std::string fmt_mb(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MB", bytes / 1e6);
  return buf;
}

// The texts of `docs`, in order, each cut to the bytes the scan kept: every file is opened once
// and read in order. Throws when a file no longer holds a document the scan saw.
class DocTexts {
 public:
  DocTexts(const std::vector<InputFile>& files, const std::vector<Doc>& docs, const ReadOptions& ro)
      : files_(files), docs_(docs), ro_(ro) {}
  bool next(size_t& index, std::string& text) {
    if (next_ >= docs_.size()) return false;
    const Doc& d = docs_[next_];
    const std::string& path = files_[size_t(d.file)].path;
    if (!reader_ || file_ != d.file) {
      reader_ = std::make_unique<DocumentReader>(path, ro_);
      file_ = d.file;
    }
    const std::string where = d.line > 0 ? str_cat("'", path, "' line ", d.line) : "'" + path + "'";
    Document doc;
    do {
      GDN_CHECK(reader_->next(doc) && doc.line <= d.line, where,
                " is gone: the file changed since it was scanned");
    } while (doc.line < d.line);
    GDN_CHECK(!doc.binary && int64_t(doc.text.size()) >= d.bytes, where,
              " changed since it was scanned (", d.bytes, " -> ", doc.text.size(), " bytes)");
    doc.text.resize(size_t(d.bytes));
    text = std::move(doc.text);
    index = next_++;
    return true;
  }

 private:
  const std::vector<InputFile>& files_;
  const std::vector<Doc>& docs_;
  ReadOptions ro_;
  std::unique_ptr<DocumentReader> reader_;
  int32_t file_ = -1;
  size_t next_ = 0;
};

ReadOptions read_options(const PrepareOptions& o) {
  ReadOptions ro;
  ro.text_field = o.text_field;
  ro.prompt_field = o.prompt_field;
  ro.completion_field = o.completion_field;
  // The byte tokenizer encodes any byte; the others take text (SentencePiece would map
  // ill-formed bytes to <unk>, Hugging Face's tokenizers take only valid UTF-8).
  ro.utf8 = o.tokenizer == "byte" ? Utf8Policy::keep : Utf8Policy::replace;
  ro.skip_bad_lines = o.skip_bad_lines;
  ro.from_run_config = o.from_run_config;
  return ro;
}

// Pass 1: which documents are text, how many bytes of each are used.
std::vector<Doc> scan(const std::vector<InputFile>& files, const PrepareOptions& o,
                      PrepareSummary& s) {
  std::vector<Doc> docs;
  int64_t total = 0;
  for (const auto& f : files) {
    std::error_code ec;
    total += int64_t(fs::file_size(f.path, ec));
  }
  const ReadOptions ro = read_options(o);
  Progress progress(o.progress, "scan", "files", int64_t(files.size()), total);
  int64_t done_bytes = 0;
  bool spent = false;  // the max_bytes budget
  for (size_t i = 0; i < files.size() && !spent; ++i) {
    const InputFile& f = files[i];
    DocumentReader reader(f.path, ro);
    const bool jsonl = reader.format() == InputFormat::jsonl;
    Document d;
    int64_t used_here = 0, empty_here = 0;
    Utf8FileReport utf8_here{f.path, -1, 0, 0, 0};
    while (!spent && reader.next(d)) {
      progress.update(int64_t(i), done_bytes + reader.raw_bytes_read(), -1);
      if (d.binary) {
        ++s.files_skipped_binary;
        continue;
      }
      if (d.text.empty()) {
        ++empty_here;
        continue;
      }
      size_t used = d.text.size();
      spent = o.max_bytes > 0 && s.bytes + int64_t(used) > o.max_bytes;
      if (spent) used = cut_point(d.text, size_t(o.max_bytes - s.bytes));
      if (used == 0) continue;
      const int64_t prompt = d.prompt_bytes < 0 ? -1 : std::min(d.prompt_bytes, int64_t(used));
      docs.push_back({int64_t(used), doc_hash(f, d.line), d.line, int32_t(i), false, prompt});
      s.pair_documents += prompt >= 0 ? 1 : 0;
      s.bytes += int64_t(used);
      ++used_here;
      if (d.utf8.invalid_bytes > 0) {
        if (utf8_here.documents == 0)
          utf8_here.offset = d.utf8.first_offset, utf8_here.line = d.line;
        utf8_here.documents += 1;
        utf8_here.bytes += d.utf8.invalid_bytes;
        s.utf8_replacements += d.utf8.replacements;
      }
    }
    done_bytes += reader.raw_bytes_read();
    s.lines_skipped += reader.lines_skipped();
    for (const auto& why : reader.skipped())
      if (s.skipped_lines.size() < 10) s.skipped_lines.push_back(why);
    if (jsonl) s.documents_skipped_empty += empty_here;
    if (used_here > 0) {
      ++s.files_used;
      s.files_truncated += spent ? 1 : 0;
    } else if (!d.binary && !spent) {
      ++s.files_skipped_empty;  // an empty file, or JSON Lines without a non-empty document
    }
    if (spent) s.files_skipped_max_bytes = int64_t(files.size() - i - 1) + (used_here > 0 ? 0 : 1);
    if (utf8_here.documents > 0) {
      ++s.utf8_files;
      s.utf8_documents += utf8_here.documents;
      s.utf8_bytes += utf8_here.bytes;
      if (s.utf8_first.size() < kMaxUtf8Listed) s.utf8_first.push_back(utf8_here);
    }
  }
  progress.update(int64_t(files.size()), done_bytes, -1, true);
  s.documents = int64_t(docs.size());
  return docs;
}

// Pass 2: marks val documents (see prepare.h). Returns the description for meta.json.
std::string split(std::vector<Doc>& docs, double val_fraction) {
  if (val_fraction <= 0) return "none (val_fraction 0)";
  if (docs.size() < 2)
    return "single document: val is the last " + std::to_string(val_fraction) + " of its tokens";
  int64_t total = 0;
  for (const auto& d : docs) total += d.bytes;
  const double target = val_fraction * double(total);
  std::vector<size_t> order(docs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return docs[a].hash != docs[b].hash ? docs[a].hash < docs[b].hash : a < b;
  });
  double val_bytes = 0;
  for (size_t i : order) {
    if (val_bytes + double(docs[i].bytes) <= target) {
      docs[i].val = true;
      val_bytes += double(docs[i].bytes);
    }
  }
  if (val_bytes == 0) {  // every document is above the target: take the smallest one
    size_t best = order[0];
    for (size_t i : order)
      if (docs[i].bytes < docs[best].bytes) best = i;
    docs[best].val = true;
  }
  return "by document: documents ranked by a hash of their path below the input they were found "
         "under (plus the line in JSON Lines; FNV-1a + splitmix64) go to val while val stays "
         "within val_fraction of the bytes (at least one document)";
}

// Pass 3 (sentencepiece): about sp_sample_bytes of train text, in chunks of whole lines kept
// with probability sample / train bytes (Philox on the chunk number: deterministic).
std::vector<std::string> training_sample(const std::vector<InputFile>& files,
                                         const std::vector<Doc>& docs, const PrepareOptions& o,
                                         int64_t train_bytes) {
  constexpr size_t kChunk = 1 << 16;
  const double keep = train_bytes <= o.sp_sample_bytes
                          ? 1.0
                          : double(o.sp_sample_bytes) / double(std::max<int64_t>(1, train_bytes));
  std::vector<std::string> sample;
  uint64_t chunk_id = 0;
  const bool single = docs.size() == 1;
  DocTexts texts(files, docs, read_options(o));
  size_t index;
  std::string text;
  while (texts.next(index, text)) {
    if (docs[index].val) continue;
    // A single document's val tail is left out of the sample.
    if (single) text.resize(cut_point(text, size_t(double(text.size()) * (1 - o.val_fraction))));
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = std::min(text.size(), pos + kChunk);
      if (end < text.size()) {
        const size_t nl = text.rfind('\n', end - 1);
        if (nl != std::string::npos && nl >= pos) end = nl + 1;
      }
      if (keep >= 1.0 || kern::philox_uniform(chunk_id, o.seed) < keep)
        sample.push_back(text.substr(pos, end - pos));
      ++chunk_id;
      pos = end;
    }
  }
  return sample;
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::vector<InputFile>& files,
                                          const std::vector<Doc>& docs, const PrepareOptions& o,
                                          PrepareSummary& s) {
  if (names_a_file(o.tokenizer)) {
    auto tok = open_named_tokenizer(o.tokenizer, o.specials);
    GDN_CHECK(o.vocab_size == 0 || o.vocab_size == tok->vocab_size(), "the tokenizer ", o.tokenizer,
              " has ", tok->vocab_size(), " ids, not --vocab-size ", o.vocab_size,
              " (a tokenizer file brings its vocabulary: leave --vocab-size out)");
    return tok;
  }
  GDN_CHECK(o.specials.bos.empty() && o.specials.eos.empty(),
            "--bos/--eos choose among a tokenizer.json's added tokens; the ", o.tokenizer,
            " tokenizer has its own");
  if (o.tokenizer == "byte") {
    GDN_CHECK(o.vocab_size == 0 || o.vocab_size == 256 || o.vocab_size == 258,
              "the byte tokenizer has vocab size 256 (or 258 with bos/eos), got --vocab-size ",
              o.vocab_size);
    return make_byte_tokenizer(o.vocab_size == 258);
  }
  const auto t0 = Clock::now();
  auto sample = training_sample(files, docs, o, s.train_bytes);
  for (const auto& t : sample) s.sp_sample_bytes += int64_t(t.size());
  if (o.progress)
    std::fprintf(stderr, "gdn prepare-data: training SentencePiece %s, vocab %lld, on %s\n",
                 o.sp_model_type.c_str(), (long long)(o.vocab_size ? o.vocab_size : 8192),
                 fmt_mb(s.sp_sample_bytes).c_str());
  SentencePieceOptions so;
  so.vocab_size = o.vocab_size ? o.vocab_size : 8192;
  so.model_type = o.sp_model_type;
  so.byte_fallback = o.sp_byte_fallback;
  so.num_threads = o.threads;
  auto tok = train_sentencepiece(sample, so);
  if (o.progress)
    std::fprintf(stderr, "gdn prepare-data: trained in %.1fs, vocab %lld\n",
                 std::chrono::duration<double>(Clock::now() - t0).count(),
                 (long long)tok->vocab_size());
  return tok;
}

// Pass 4: the main thread reads a block of documents, threads encode them (each taking the next
// document not yet taken), the main thread appends them to the two shards in order.
// The shards and, with fine-tuning pairs, their loss masks.
struct ShardWriters {
  ShardWriter train, val;
  std::unique_ptr<ShardWriter> train_mask, val_mask;
  ShardWriters(const PrepareSummary& s, int64_t vocab)
      : train(s.train_path, vocab), val(s.val_path, vocab) {
    if (s.train_mask_path.empty()) return;
    train_mask = std::make_unique<ShardWriter>(s.train_mask_path, 2, 1, ShardKind::loss_mask);
    val_mask = std::make_unique<ShardWriter>(s.val_mask_path, 2, 1, ShardKind::loss_mask);
  }
  // Tokens [begin, end) of a document and their flags (1 from `scored_from` on) to one side.
  void append(bool to_val, const std::vector<int32_t>& ids, size_t begin, size_t end,
              size_t scored_from, PrepareSummary& s) {
    (to_val ? val : train).append(ids.data() + begin, end - begin);
    ShardWriter* mask = (to_val ? val_mask : train_mask).get();
    if (!mask) return;
    flags_.assign(end - begin, 1);
    for (size_t i = begin; i < std::min(end, scored_from); ++i) flags_[i - begin] = 0;
    mask->append(flags_);
    for (int32_t f : flags_) (to_val ? s.val_scored : s.train_scored) += f;
  }
  void finish() {
    for (ShardWriter* w : {&train, &val, train_mask.get(), val_mask.get()})
      if (w) w->finish();
  }

 private:
  std::vector<int32_t> flags_;
};

void tokenize(const std::vector<InputFile>& files, const std::vector<Doc>& docs,
              const Tokenizer& tok, const PrepareOptions& o, ShardWriters& out, PrepareSummary& s) {
  const int threads =
      o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t block_bytes = int64_t(threads) << 22;  // 4 MiB of text per thread
  constexpr size_t kBlockDocs = 1 << 16;
  const bool eos = o.append_eos && tok.eos_id() >= 0;
  Progress progress(o.progress, "tokenize", "docs", int64_t(docs.size()), s.bytes);
  DocTexts reader(files, docs, read_options(o));
  int64_t bytes_done = 0;
  size_t done = 0;
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;
  std::vector<size_t> prompt_ids;  // a pair's prompt tokens (0 for a plain document)
  for (;;) {
    texts.clear();
    int64_t bytes = 0;
    size_t index;
    std::string text;
    while (texts.size() < kBlockDocs && bytes < block_bytes && reader.next(index, text)) {
      bytes += int64_t(text.size());
      texts.push_back(std::move(text));
    }
    const size_t n = texts.size();
    if (n == 0) break;
    ids.assign(n, {});
    prompt_ids.assign(n, 0);
    std::atomic<size_t> next{0};
    std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
    auto work = [&](int t) {
      try {
        for (size_t i = next++; i < n; i = next++) {
          const std::string_view text = texts[i];
          const int64_t prompt = docs[done + i].prompt_bytes;
          if (prompt >= 0) {  // the prompt's ids, then the completion's
            tok.encode_append(text.substr(0, size_t(prompt)), ids[i]);
            prompt_ids[i] = ids[i].size();
          }
          tok.encode_append(text.substr(size_t(std::max<int64_t>(prompt, 0))), ids[i]);
          if (eos) ids[i].push_back(int32_t(tok.eos_id()));
        }
      } catch (...) {
        errors[size_t(t)] = std::current_exception();
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads && size_t(t) < n; ++t) pool.emplace_back(work, t);
    work(0);
    for (auto& th : pool) th.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    for (size_t i = 0; i < n; ++i) {
      const Doc& d = docs[done + i];
      if (docs.size() == 1 && o.val_fraction > 0) {  // tail split of the single document
        const size_t nt = ids[i].size();
        const size_t nval =
            nt < 2 ? 0 : std::min(nt - 1, size_t(std::ceil(o.val_fraction * double(nt))));
        const size_t ntrain = nt - nval;
        out.append(false, ids[i], 0, ntrain, prompt_ids[i], s);
        out.append(true, ids[i], ntrain, nt, prompt_ids[i], s);
        s.train_docs = 1, s.train_bytes = d.bytes;
      } else {
        out.append(d.val, ids[i], 0, ids[i].size(), prompt_ids[i], s);
        (d.val ? s.val_docs : s.train_docs) += 1;
        (d.val ? s.val_bytes : s.train_bytes) += d.bytes;
      }
      bytes_done += d.bytes;
    }
    done += n;
    progress.update(int64_t(done), bytes_done, out.train.count() + out.val.count());
  }
  progress.update(int64_t(docs.size()), bytes_done, out.train.count() + out.val.count(), true);
  s.train_tokens = out.train.count();
  s.val_tokens = out.val.count();
}

}  // namespace

std::vector<std::string> prepared_file_names() {
  return {"train.bin", "val.bin",        "train.mask.bin", "val.mask.bin",
          "meta.json", "tokenizer.json", "tokenizer.model"};
}

PrepareSummary prepare_data(const PrepareOptions& o) {
  const auto t0 = Clock::now();
  GDN_CHECK(!o.out_dir.empty(), "prepare_data: no output directory");
  GDN_CHECK(o.val_fraction >= 0 && o.val_fraction < 1, "val fraction must be in [0, 1), got ",
            o.val_fraction);
  GDN_CHECK(o.max_bytes >= 0, "max bytes must be >= 0, got ", o.max_bytes);
  GDN_CHECK(!o.text_field.empty(), "the JSON Lines text field name is empty");
  GDN_CHECK(!o.prompt_field.empty() && !o.completion_field.empty() &&
                o.prompt_field != o.completion_field,
            "the JSON Lines prompt and completion fields must be two names, got \"", o.prompt_field,
            "\" and \"", o.completion_field, "\"");
  PrepareSummary s;
  s.out_dir = o.out_dir;
  std::error_code ec;
  // What an interrupted preparation left: its temporary files (never a live process's).
  if (fs::is_directory(o.out_dir, ec)) {
    s.temp_files_removed = io::remove_stale_temp_files(o.out_dir, prepared_file_names());
    for (const auto& f : s.temp_files_removed)
      if (o.progress)
        std::fprintf(stderr, "gdn prepare-data: removed %s (left by an interrupted preparation)\n",
                     f.c_str());
  }
  std::vector<InputFile> files;
  if (o.inputs.empty()) {
    Corpus c = find_default_corpus();
    if (o.progress)
      std::fprintf(stderr, "gdn prepare-data: default corpus %s (%s, %zu files, %s)\n",
                   c.name.c_str(), c.root.c_str(), c.files.size(), fmt_mb(c.bytes).c_str());
    for (const auto& f : c.files)
      files.push_back({f, fs::path(f).lexically_relative(c.root).string()});
  } else {
    files = expand_inputs_keyed(o.inputs);
  }
  s.files_found = int64_t(files.size());
  GDN_CHECK(!files.empty(), "no input files");
  for (const auto& f : files) {
    const bool jsonl = input_format(f.path) == InputFormat::jsonl;
    (jsonl ? s.files_jsonl : s.files_text) += 1;
    s.files_json_as_text += !jsonl && is_json_name(f.path) ? 1 : 0;
  }
  // A tokenizer file is checked before the corpus is read, not after.
  GDN_CHECK(!names_a_file(o.tokenizer) || fs::exists(o.tokenizer),
            o.from_run_config ? "data.tokenizer" : "--tokenizer", " '", o.tokenizer,
            "': no such file or directory (expected byte, sentencepiece, a tokenizer.json, a "
            "tokenizer.model, or a directory holding one)");
  s.utf8_handling = o.tokenizer == "byte" ? "kept" : "replaced";

  std::vector<Doc> docs = scan(files, o, s);
  GDN_CHECK(!docs.empty(), "no usable text among ", files.size(), " files (",
            s.files_skipped_binary, " binary, ", s.files_skipped_empty, " empty; ",
            s.documents_skipped_empty, " empty JSON Lines documents, ", s.lines_skipped,
            " bad JSON lines skipped)");
  s.split = split(docs, o.val_fraction);
  for (const auto& d : docs) s.train_bytes += d.val ? 0 : d.bytes;

  fs::create_directories(o.out_dir, ec);
  GDN_CHECK(fs::is_directory(o.out_dir), "cannot create the output directory '", o.out_dir,
            "': ", ec.message());
  auto tok = make_tokenizer(files, docs, o, s);
  s.tokenizer = tok->name();
  s.vocab_size = tok->vocab_size();
  s.train_bytes = 0;  // recounted by tokenize() (the single-document case splits tokens)

  s.train_path = (fs::path(o.out_dir) / "train.bin").string();
  s.val_path = (fs::path(o.out_dir) / "val.bin").string();
  if (s.pair_documents > 0) {
    s.train_mask_path = loss_mask_path(s.train_path);
    s.val_mask_path = loss_mask_path(s.val_path);
  }
  {
    ShardWriters out(s, tok->vocab_size());
    tokenize(files, docs, *tok, o, out, s);
    out.finish();
  }
  // A loss mask an earlier preparation left would not match these shards.
  if (s.pair_documents == 0)
    for (const std::string& shard : {s.train_path, s.val_path})
      fs::remove(loss_mask_path(shard), ec);
  // Only one tokenizer file may be present, or load_tokenizer could pick a stale one.
  const bool json_file = tok->name() != "sentencepiece";
  fs::remove(fs::path(o.out_dir) / (json_file ? "tokenizer.model" : "tokenizer.json"), ec);
  if (tok->name() != kHuggingFaceTokenizer)
    for (const char* stale : {"tokenizer_config.json", "special_tokens_map.json"})
      fs::remove(fs::path(o.out_dir) / stale, ec);
  s.tokenizer_path = tok->save(o.out_dir);
  if (names_a_file(o.tokenizer)) s.tokenizer_hash = io::content_hash({s.tokenizer_path});

  s.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  s.meta_path = (fs::path(o.out_dir) / "meta.json").string();
  io::write_file_atomic(s.meta_path, meta_json_text(s, o, *tok));
  return s;
}

std::string format_summary(const PrepareSummary& s) {
  std::string out;
  out += str_cat("files: ", s.files_used, " used of ", s.files_found, " (", s.files_jsonl,
                 " JSON Lines, ", s.files_text, " plain text; skipped: ", s.files_skipped_binary,
                 " binary, ", s.files_skipped_empty, " empty, ", s.files_skipped_max_bytes,
                 " past --max-bytes; ", s.files_truncated, " truncated)\n");
  out += str_cat("documents: ", s.documents);
  if (s.pair_documents > 0) out += str_cat(" (", s.pair_documents, " prompt/completion pairs)");
  if (s.documents_skipped_empty > 0 || s.lines_skipped > 0)
    out += str_cat(" (skipped: ", s.documents_skipped_empty, " empty, ", s.lines_skipped,
                   " bad JSON lines)");
  out += "\n";
  for (const auto& why : s.skipped_lines) out += "  skipped " + why + "\n";
  if (s.files_json_as_text > 0)
    out += str_cat("note: ", s.files_json_as_text,
                   " .json files were read as plain text; JSON Lines (what datasets' to_json "
                   "writes) must be named .jsonl\n");
  if (s.utf8_bytes > 0) {
    out += str_cat("invalid UTF-8: ", s.utf8_bytes, " bytes in ", s.utf8_documents,
                   " documents of ", s.utf8_files, " files, ",
                   s.utf8_handling == "kept"
                       ? std::string("kept as bytes (byte tokenizer)")
                       : str_cat("replaced by U+FFFD (", s.utf8_replacements, " replacements)"),
                   "\n");
    for (const auto& r : s.utf8_first) {
      out += str_cat("  ", r.file, ": ");
      if (r.line > 0) out += str_cat("line ", r.line, ", ");
      out += str_cat("first at byte offset ", r.offset, " (", r.bytes, " bytes in ", r.documents,
                     r.documents == 1 ? " document)\n" : " documents)\n");
    }
    if (s.utf8_files > int64_t(s.utf8_first.size()))
      out += str_cat("  ... and ", s.utf8_files - int64_t(s.utf8_first.size()), " more files\n");
  }
  if (!s.temp_files_removed.empty())
    out += str_cat("removed ", s.temp_files_removed.size(),
                   " temporary files left by an interrupted preparation\n");
  out += str_cat("text: ", fmt_mb(s.bytes), "; tokenizer ", s.tokenizer, ", vocab ", s.vocab_size);
  if (s.sp_sample_bytes) out += str_cat(" (trained on ", fmt_mb(s.sp_sample_bytes), ")");
  out += "\n";
  out += str_cat("train: ", s.train_tokens, " tokens, ", s.train_docs, " documents, ",
                 fmt_mb(s.train_bytes), " -> ", s.train_path, "\n");
  out += str_cat("val:   ", s.val_tokens, " tokens, ", s.val_docs, " documents, ",
                 fmt_mb(s.val_bytes), " -> ", s.val_path, "\n");
  if (!s.train_mask_path.empty())
    out += str_cat("loss mask: ", s.train_scored, " of ", s.train_tokens, " train and ",
                   s.val_scored, " of ", s.val_tokens,
                   " val tokens scored (completions, their eos and plain documents) -> ",
                   s.train_mask_path, ", ", s.val_mask_path, "\n");
  out += str_cat("split: ", s.split, "\n");
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", s.seconds);
  out += str_cat("wrote ", s.tokenizer_path, " and ", s.meta_path, " in ", secs, "s\n");
  return out;
}

}  // namespace gdn::data
