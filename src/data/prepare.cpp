// prepare_data in four passes over the files: scan (validate, measure, apply max_bytes), split
// (by document hash), tokenizer (SentencePiece: train on a sample of the train documents), and
// tokenize (threads encode a block of documents, the main thread appends them in order, so the
// shards do not depend on the thread count).
#include "src/data/prepare.h"

#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "kernels/philox.h"
#include "src/core/error.h"
#include "src/data/corpus.h"
#include "src/data/shard.h"
#include "src/data/tokenizer.h"

namespace gdn::data {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Doc {
  std::string path;
  int64_t bytes = 0;  // used (after a max_bytes cut)
  uint64_t hash = 0;
  bool val = false;
};

// Rank of a document in the split: FNV-1a of its key (its path below the input it was found
// under, so the split does not depend on where the corpus lives), then a splitmix64 finaliser.
uint64_t path_hash(const std::string& path) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : path) h = (h ^ c) * 1099511628211ull;
  h ^= h >> 30, h *= 0xbf58476d1ce4e5b9ull, h ^= h >> 27, h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

// Up to `limit` bytes of a file (-1: all).
std::string read_file(const std::string& path, int64_t limit = -1) {
  std::ifstream f(path, std::ios::binary);
  GDN_CHECK(f, "cannot open '", path, "'");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (limit >= 0 && int64_t(s.size()) > limit) s.resize(size_t(limit));
  return s;
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
  Progress(bool enabled, std::string stage, int64_t files, int64_t bytes)
      : enabled_(enabled),
        tty_(isatty(2)),
        stage_(std::move(stage)),
        files_(files),
        bytes_(bytes),
        start_(Clock::now()),
        last_(start_) {}
  void update(int64_t files, int64_t bytes, int64_t tokens, bool final = false) {
    if (!enabled_) return;
    const auto now = Clock::now();
    const double since = std::chrono::duration<double>(now - last_).count();
    if (!final && since < (tty_ ? 0.25 : 5.0)) return;
    last_ = now;
    const double secs = std::max(1e-9, std::chrono::duration<double>(now - start_).count());
    std::fprintf(stderr, "%sgdn prepare-data: %-9s files %lld/%lld  %.1f/%.1f MB", tty_ ? "\r" : "",
                 stage_.c_str(), (long long)files, (long long)files_, bytes / 1e6, bytes_ / 1e6);
    if (tokens >= 0)
      std::fprintf(stderr, "  %.2fM tokens  %.2fM tokens/s", tokens / 1e6, tokens / 1e6 / secs);
    std::fprintf(stderr, "  %.1fs%s", secs, tty_ && !final ? "\x1b[K" : "\n");
  }

 private:
  bool enabled_, tty_;
  std::string stage_;
  int64_t files_, bytes_;
  Clock::time_point start_, last_;
};

std::string fmt_mb(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MB", bytes / 1e6);
  return buf;
}

void write_text_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    GDN_CHECK(f, "cannot write '", tmp, "'");
    f << text;
    f.flush();
    GDN_CHECK(f, "error writing '", tmp, "'");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  GDN_CHECK(!ec, "cannot rename '", tmp, "' to '", path, "': ", ec.message());
}

// Pass 1: which files are text, how many bytes of each are used.
std::vector<Doc> scan(const std::vector<InputFile>& inputs, const PrepareOptions& o,
                      PrepareSummary& s) {
  std::vector<Doc> docs;
  std::vector<std::string> files;
  for (const auto& in : inputs) files.push_back(in.path);
  int64_t total = 0;
  for (const auto& f : files) {
    std::error_code ec;
    total += int64_t(fs::file_size(f, ec));
  }
  Progress progress(o.progress, "scan", int64_t(files.size()), total);
  int64_t seen = 0, files_read = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    std::string text = read_file(files[i]);
    seen += int64_t(text.size());
    progress.update(++files_read, seen, -1);
    if (text.empty()) {
      ++s.files_skipped_empty;
      continue;
    }
    if (text.find('\0') != std::string::npos) {
      ++s.files_skipped_binary;
      continue;
    }
    if (!is_valid_utf8(text)) {
      ++s.files_skipped_utf8;
      continue;
    }
    size_t used = text.size();
    const bool cut = o.max_bytes > 0 && s.bytes + int64_t(used) > o.max_bytes;
    if (cut) used = cut_point(text, size_t(o.max_bytes - s.bytes));
    if (used > 0) {
      docs.push_back({files[i], int64_t(used), path_hash(inputs[i].key), false});
      s.bytes += int64_t(used);
      s.files_truncated += cut ? 1 : 0;
    }
    if (cut) {  // the budget is spent: this file was the last (cut after a newline)
      s.files_skipped_max_bytes = int64_t(files.size() - i - 1) + (used > 0 ? 0 : 1);
      break;
    }
  }
  progress.update(files_read, seen, -1, true);
  s.files_used = int64_t(docs.size());
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
  return "by document: files ranked by a hash of their path below the input they were found "
         "under (FNV-1a + splitmix64) go to val while val stays within val_fraction of the bytes "
         "(at least one file)";
}

// Pass 3 (sentencepiece): about sp_sample_bytes of train text, in chunks of whole lines kept
// with probability sample / train bytes (Philox on the chunk number: deterministic).
std::vector<std::string> training_sample(const std::vector<Doc>& docs, const PrepareOptions& o,
                                         int64_t train_bytes) {
  constexpr size_t kChunk = 1 << 16;
  const double keep = train_bytes <= o.sp_sample_bytes
                          ? 1.0
                          : double(o.sp_sample_bytes) / double(std::max<int64_t>(1, train_bytes));
  std::vector<std::string> sample;
  uint64_t chunk_id = 0;
  const bool single = docs.size() == 1;
  for (const auto& d : docs) {
    if (d.val) continue;
    std::string text = read_file(d.path, d.bytes);
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

std::unique_ptr<Tokenizer> make_tokenizer(const std::vector<Doc>& docs, const PrepareOptions& o,
                                          PrepareSummary& s) {
  if (o.tokenizer == TokenizerKind::byte) {
    GDN_CHECK(o.vocab_size == 0 || o.vocab_size == 256 || o.vocab_size == 258,
              "the byte tokenizer has vocab size 256 (or 258 with bos/eos), got --vocab-size ",
              o.vocab_size);
    return make_byte_tokenizer(o.vocab_size == 258);
  }
  const auto t0 = Clock::now();
  auto sample = training_sample(docs, o, s.train_bytes);
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

// Pass 4: encodes every document (threads within a block), appends to the two shards in order.
void tokenize(const std::vector<Doc>& docs, const Tokenizer& tok, const PrepareOptions& o,
              ShardWriter& train, ShardWriter& val, PrepareSummary& s) {
  const int threads =
      o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  const size_t block = size_t(threads) * 4;
  const bool eos = o.append_eos && tok.eos_id() >= 0;
  Progress progress(o.progress, "tokenize", int64_t(docs.size()), s.bytes);
  int64_t bytes_done = 0;
  for (size_t first = 0; first < docs.size(); first += block) {
    const size_t n = std::min(block, docs.size() - first);
    std::vector<std::vector<int32_t>> ids(n);
    std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
    auto work = [&](int t) {
      try {
        for (size_t i = size_t(t); i < n; i += size_t(threads)) {
          const Doc& d = docs[first + i];
          const std::string text = read_file(d.path, d.bytes);
          GDN_CHECK(int64_t(text.size()) == d.bytes, "'", d.path, "' shrank since it was read (",
                    d.bytes, " -> ", text.size(), " bytes)");
          tok.encode_append(text, ids[i]);
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
      const Doc& d = docs[first + i];
      if (docs.size() == 1 && o.val_fraction > 0) {  // tail split of the single document
        const size_t nt = ids[i].size();
        const size_t nval =
            nt < 2 ? 0 : std::min(nt - 1, size_t(std::ceil(o.val_fraction * double(nt))));
        const size_t ntrain = nt - nval;
        train.append(ids[i].data(), ntrain);
        val.append(ids[i].data() + ntrain, nval);
        s.train_docs = 1, s.train_bytes = d.bytes;
      } else {
        (d.val ? val : train).append(ids[i]);
        (d.val ? s.val_docs : s.train_docs) += 1;
        (d.val ? s.val_bytes : s.train_bytes) += d.bytes;
      }
      bytes_done += d.bytes;
    }
    progress.update(int64_t(first + n), bytes_done, train.count() + val.count());
  }
  progress.update(int64_t(docs.size()), bytes_done, train.count() + val.count(), true);
  s.train_tokens = train.count();
  s.val_tokens = val.count();
}

}  // namespace

std::vector<InputFile> expand_inputs_keyed(const std::vector<std::string>& inputs) {
  std::vector<InputFile> out;
  std::set<std::string> seen;
  auto add = [&](const std::string& p, const std::string& key) {
    if (seen.insert(p).second) out.push_back({p, key});
  };
  for (const auto& in : inputs) {
    std::vector<std::string> matches;
    std::error_code exists_ec;
    if (fs::exists(in, exists_ec)) {  // a literal path, even one with glob characters
      matches.push_back(in);
    } else {
      glob_t g{};
      const int rc = ::glob(in.c_str(), GLOB_TILDE | GLOB_BRACE, nullptr, &g);
      if (rc == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i) matches.emplace_back(g.gl_pathv[i]);
      ::globfree(&g);
      GDN_CHECK(rc == 0 || rc == GLOB_NOMATCH, "glob('", in, "') failed (code ", rc, ")");
    }
    GDN_CHECK(!matches.empty(), "input '", in, "' matches no file");
    for (const auto& m : matches) {
      std::error_code ec;
      if (fs::is_directory(m, ec)) {
        std::vector<std::string> files;
        for (fs::recursive_directory_iterator it(m, ec), end; !ec && it != end; it.increment(ec))
          if (it->is_regular_file()) files.push_back(it->path().string());
        GDN_CHECK(!ec, "cannot walk '", m, "': ", ec.message());
        std::sort(files.begin(), files.end());
        for (const auto& f : files) add(f, fs::path(f).lexically_relative(m).string());
      } else if (fs::is_regular_file(m, ec)) {
        add(m, fs::path(m).filename().string());
      }
    }
  }
  return out;
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> out;
  for (auto& f : expand_inputs_keyed(inputs)) out.push_back(std::move(f.path));
  return out;
}

PrepareSummary prepare_data(const PrepareOptions& o) {
  const auto t0 = Clock::now();
  GDN_CHECK(!o.out_dir.empty(), "prepare_data: no output directory");
  GDN_CHECK(o.val_fraction >= 0 && o.val_fraction < 1, "val fraction must be in [0, 1), got ",
            o.val_fraction);
  GDN_CHECK(o.max_bytes >= 0, "max bytes must be >= 0, got ", o.max_bytes);
  PrepareSummary s;
  s.out_dir = o.out_dir;
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

  std::vector<Doc> docs = scan(files, o, s);
  GDN_CHECK(!docs.empty(), "no usable text among ", files.size(), " files (",
            s.files_skipped_binary, " binary, ", s.files_skipped_utf8, " invalid UTF-8, ",
            s.files_skipped_empty, " empty)");
  s.split = split(docs, o.val_fraction);
  for (const auto& d : docs) s.train_bytes += d.val ? 0 : d.bytes;

  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  GDN_CHECK(fs::is_directory(o.out_dir), "cannot create the output directory '", o.out_dir,
            "': ", ec.message());
  auto tok = make_tokenizer(docs, o, s);
  s.tokenizer = tok->name();
  s.vocab_size = tok->vocab_size();
  s.train_bytes = 0;  // recounted by tokenize() (the single-document case splits tokens)

  s.train_path = (fs::path(o.out_dir) / "train.bin").string();
  s.val_path = (fs::path(o.out_dir) / "val.bin").string();
  {
    ShardWriter train(s.train_path, tok->vocab_size());
    ShardWriter val(s.val_path, tok->vocab_size());
    tokenize(docs, *tok, o, train, val, s);
    train.finish();
    val.finish();
  }
  // Only one tokenizer file may be present, or load_tokenizer could pick a stale one.
  fs::remove(fs::path(o.out_dir) / (tok->name() == "byte" ? "tokenizer.model" : "tokenizer.json"),
             ec);
  s.tokenizer_path = tok->save(o.out_dir);

  s.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  nlohmann::json meta = {
      {"format", "gdn token shards"},
      {"shard_version", kShardVersion},
      {"tokenizer", s.tokenizer},
      {"tokenizer_file", fs::path(s.tokenizer_path).filename().string()},
      {"vocab_size", s.vocab_size},
      {"bos_id", tok->bos_id()},
      {"eos_id", tok->eos_id()},
      {"eos_appended", o.append_eos && tok->eos_id() >= 0},
      {"token_bytes", token_bytes_for_vocab(s.vocab_size)},
      {"train",
       {{"file", "train.bin"},
        {"tokens", s.train_tokens},
        {"documents", s.train_docs},
        {"bytes", s.train_bytes}}},
      {"val",
       {{"file", "val.bin"},
        {"tokens", s.val_tokens},
        {"documents", s.val_docs},
        {"bytes", s.val_bytes}}},
      {"val_fraction", o.val_fraction},
      {"split", s.split},
      {"source_files", s.files_used},
      {"files_found", s.files_found},
      {"files_skipped",
       {{"binary", s.files_skipped_binary},
        {"invalid_utf8", s.files_skipped_utf8},
        {"empty", s.files_skipped_empty},
        {"max_bytes", s.files_skipped_max_bytes}}},
      {"files_truncated", s.files_truncated},
      {"bytes", s.bytes},
      {"max_bytes", o.max_bytes},
      {"inputs", o.inputs.empty() ? std::vector<std::string>{"(default corpus)"} : o.inputs},
  };
  if (s.tokenizer == "sentencepiece")
    meta["sentencepiece"] = {{"model_type", o.sp_model_type},
                             {"requested_vocab_size", o.vocab_size ? o.vocab_size : 8192},
                             {"byte_fallback", o.sp_byte_fallback},
                             {"sample_bytes", s.sp_sample_bytes},
                             {"seed", o.seed}};
  s.meta_path = (fs::path(o.out_dir) / "meta.json").string();
  write_text_atomic(s.meta_path, meta.dump(2) + "\n");
  return s;
}

std::string format_summary(const PrepareSummary& s) {
  std::string out;
  out += str_cat("files: ", s.files_used, " used of ", s.files_found,
                 " (skipped: ", s.files_skipped_binary, " binary, ", s.files_skipped_utf8,
                 " invalid UTF-8, ", s.files_skipped_empty, " empty, ", s.files_skipped_max_bytes,
                 " past --max-bytes; ", s.files_truncated, " truncated)\n");
  out += str_cat("text: ", fmt_mb(s.bytes), "; tokenizer ", s.tokenizer, ", vocab ", s.vocab_size);
  if (s.sp_sample_bytes) out += str_cat(" (trained on ", fmt_mb(s.sp_sample_bytes), ")");
  out += "\n";
  out += str_cat("train: ", s.train_tokens, " tokens, ", s.train_docs, " documents, ",
                 fmt_mb(s.train_bytes), " -> ", s.train_path, "\n");
  out += str_cat("val:   ", s.val_tokens, " tokens, ", s.val_docs, " documents, ",
                 fmt_mb(s.val_bytes), " -> ", s.val_path, "\n");
  out += str_cat("split: ", s.split, "\n");
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", s.seconds);
  out += str_cat("wrote ", s.tokenizer_path, " and ", s.meta_path, " in ", secs, "s\n");
  return out;
}

}  // namespace gdn::data
