// The data pipeline: tokenizers (byte, SentencePiece), token shards (round trip, corrupt files),
// the loaders (determinism, ranks, resume, prefetch, sequential eval) and prepare_data end to
// end on a temporary directory.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "src/data/corpus.h"
#include "src/data/loader.h"
#include "src/data/prepare.h"
#include "src/data/shard.h"
#include "src/data/tokenizer.h"
#include "tests/prepare_test_util.h"
#include "tests/test_helpers.h"

namespace gdn::data {
namespace {

namespace fs = std::filesystem;

using test::error_of;
using test::ints;
using test::read_file;
using test::TempDir;
using test::write_file;

std::vector<int32_t> iota_tokens(int64_t n, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[size_t(i)] = int32_t(i % vocab);
  return t;
}

const std::string kMixed =
    "plain ascii, caf\xc3\xa9, \xe4\xb8\x96\xe7\x95\x8c, \xf0\x9f\x99\x82\n\t end";

// ---- tokenizers ------------------------------------------------------------------------------

TEST(ByteTokenizer, RoundTripMultiByteUtf8) {
  auto tok = make_byte_tokenizer();
  EXPECT_EQ(tok->vocab_size(), 256);
  EXPECT_EQ(tok->eos_id(), -1);
  auto ids = tok->encode(kMixed);
  ASSERT_EQ(ids.size(), kMixed.size());  // one id per byte
  EXPECT_EQ(ids[0], 'p');
  EXPECT_EQ(ids[16], 0xC3);  // first byte of the two-byte e-acute
  EXPECT_EQ(tok->decode(ids), kMixed);
  EXPECT_NE(error_of([&] {
              tok->decode({65, 256});
            }).find("id 256 at position 1"),
            std::string::npos);

  auto special = make_byte_tokenizer(true);
  EXPECT_EQ(special->vocab_size(), 258);
  EXPECT_EQ(special->bos_id(), 256);
  EXPECT_EQ(special->eos_id(), 257);
  EXPECT_EQ(special->decode({256, 'h', 'i', 257}), "hi");  // specials decode to nothing
}

TEST(ByteTokenizer, SaveAndLoad) {
  TempDir dir;
  make_byte_tokenizer(true)->save(dir.path.string());
  auto tok = load_tokenizer(dir.path.string());
  EXPECT_EQ(tok->name(), "byte");
  EXPECT_EQ(tok->vocab_size(), 258);
  TempDir empty;
  EXPECT_NE(error_of([&] { load_tokenizer(empty.path.string()); }).find("no tokenizer"),
            std::string::npos);
}

TEST(Utf8, Validation) {
  EXPECT_TRUE(is_valid_utf8(kMixed));
  EXPECT_TRUE(is_valid_utf8(""));
  size_t at = 99;
  EXPECT_FALSE(is_valid_utf8("ab\xc0\x80", &at));  // overlong NUL
  EXPECT_EQ(at, 2u);
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xe4\xb8"));          // truncated
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xff"));
}

std::vector<std::string> synthetic_corpus() {
  std::vector<std::string> docs;
  const char* words[] = {"the",  "quick", "brown", "fox",    "jumps", "over",
                         "lazy", "dog",   "def",   "return", "self",  "import"};
  for (int d = 0; d < 4; ++d) {
    std::string text;
    for (int i = 0; i < 300; ++i) {
      text += words[(i * 7 + d * 3) % 12];
      text += (i % 9 == 8) ? "\n    " : " ";
    }
    docs.push_back(text + "\n");
  }
  return docs;
}

TEST(SentencePiece, TrainEncodeDecodeTiny) {
  auto docs = synthetic_corpus();
  SentencePieceOptions o;
  o.vocab_size = 60;
  o.byte_fallback = false;
  o.num_threads = 1;
  auto tok = train_sentencepiece(docs, o);
  EXPECT_EQ(tok->name(), "sentencepiece");
  EXPECT_LE(tok->vocab_size(), 60);
  EXPECT_GT(tok->vocab_size(), 20);
  EXPECT_EQ(tok->eos_id(), 2);
  for (const auto& d : docs) {
    auto ids = tok->encode(d);
    EXPECT_LT(ids.size(), d.size() * 2 / 3);  // merges happened
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->vocab_size());
    EXPECT_EQ(tok->decode(ids), d);  // whitespace, indentation and newlines kept exactly
  }
  // Saved and loaded, it encodes identically.
  TempDir dir;
  tok->save(dir.path.string());
  auto loaded = load_tokenizer(dir.path.string());
  EXPECT_EQ(loaded->name(), "sentencepiece");
  EXPECT_EQ(loaded->encode(docs[1]), tok->encode(docs[1]));
  EXPECT_NE(error_of([&] { tok->decode({int32_t(tok->vocab_size())}); }).find("outside"),
            std::string::npos);
}

TEST(SentencePiece, ByteFallbackRoundTripsUnseenText) {
  SentencePieceOptions o;
  o.vocab_size = 300;
  o.num_threads = 1;
  auto tok = train_sentencepiece(synthetic_corpus(), o);
  EXPECT_EQ(tok->decode(tok->encode(kMixed)), kMixed);  // none of these characters was seen
  EXPECT_NE(error_of([&] {
              train_sentencepiece(synthetic_corpus(), SentencePieceOptions{100});
            }).find("too small"),
            std::string::npos);
}

// ---- shards ----------------------------------------------------------------------------------

TEST(Shard, WriteReadRoundTrip) {
  TempDir dir;
  for (int64_t vocab : {int64_t(1000), int64_t(100000)}) {
    const std::string path = dir.file("s" + std::to_string(vocab) + ".bin");
    auto tokens = iota_tokens(5000, vocab);
    tokens[17] = int32_t(vocab - 1);
    write_shard(path, tokens, vocab);
    auto shard = Shard::open(path, /*check_tokens=*/true);
    EXPECT_EQ(shard->size(), 5000);
    EXPECT_EQ(shard->vocab_size(), vocab);
    EXPECT_EQ(shard->token_bytes(), vocab <= 65536 ? 2u : 4u);
    EXPECT_EQ(fs::file_size(path), 64u + 5000u * shard->token_bytes());
    EXPECT_EQ(shard->read(0, 5000), tokens);
    EXPECT_EQ(shard->at(17), vocab - 1);
    EXPECT_EQ(shard->read(4990, 10), std::vector<int32_t>(tokens.end() - 10, tokens.end()));
    EXPECT_THROW(shard->read(4995, 10), Error);
    EXPECT_THROW(shard->at(5000), Error);
    // Little-endian on disk.
    const std::string raw = read_file(path);
    EXPECT_EQ(std::memcmp(raw.data(), "GDNTOK\0\0", 8), 0);
    EXPECT_EQ(uint8_t(raw[64 + 17 * shard->token_bytes()]), uint8_t((vocab - 1) & 0xFF));
  }
  // Nothing but the shards is left behind (the temporaries were renamed).
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()), 2);
}

TEST(Shard, WriterIsAtomicAndChecksTokens) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  {
    ShardWriter w(path, 10);
    w.append({1, 2, 3});
    EXPECT_NE(error_of([&] { w.append({4, 10}); }).find("token 10 at index 4"), std::string::npos);
    EXPECT_FALSE(fs::exists(path));  // nothing visible before finish()
  }
  EXPECT_TRUE(fs::is_empty(dir.path));  // abandoned writer removed its temporary
  write_shard(path, {}, 10);            // an empty shard is valid
  EXPECT_EQ(Shard::open(path)->size(), 0);
}

// A valid shard's bytes with `patch` written over them at `offset`.
std::string corrupt(const std::string& good, size_t offset, const std::string& patch) {
  std::string bad = good;
  bad.replace(offset, patch.size(), patch);
  return bad;
}

TEST(Shard, CorruptFilesGiveClearErrors) {
  TempDir dir;
  const std::string good_path = dir.file("good.bin");
  write_shard(good_path, iota_tokens(100, 50), 50);
  const std::string good = read_file(good_path);
  const std::string bad = dir.file("bad.bin");
  auto open_error = [&](const std::string& bytes) {
    write_file(bad, bytes);
    return error_of([&] { Shard::open(bad); });
  };
  auto expect_all = [&](const std::string& msg, std::vector<std::string> parts) {
    EXPECT_NE(msg.find(bad), std::string::npos) << msg;  // names the file
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << p << " in: " << msg;
  };
  expect_all(open_error(good.substr(0, good.size() - 1)),
             {"file size mismatch", "264 bytes", "263", "truncated", "offset 16"});
  expect_all(open_error(good + "xx"), {"file size mismatch", "266", "trailing bytes"});
  expect_all(open_error(good.substr(0, 40)), {"truncated header", "40 bytes"});
  expect_all(open_error(""), {"truncated header", "0 bytes"});
  expect_all(open_error(corrupt(good, 0, "NOTGDN")), {"bad magic", "byte offset 0", "NOTGDN"});
  expect_all(open_error(corrupt(good, 8, std::string("\x07\0\0\0", 4))),
             {"unsupported version", "byte offset 8", "expected 1, got 7"});
  expect_all(open_error(corrupt(good, 12, std::string("\x03\0\0\0", 4))),
             {"token width", "byte offset 12", "got 3"});
  expect_all(open_error(corrupt(good, 24, std::string(8, '\0'))),
             {"vocab size", "byte offset 24", "got 0"});
  // A token >= vocab size: found by check_tokens (on open when asked), naming index and offset.
  const std::string oob = corrupt(good, 64 + 2 * 7, std::string("\x33\0", 2));  // token 51
  write_file(bad, oob);
  EXPECT_NO_THROW(Shard::open(bad));
  expect_all(error_of([&] { Shard::open(bad, true); }),
             {"token 51", "index 7", "byte offset 78", "vocab size 50"});
  expect_all(error_of([&] { Shard::open(bad)->check_tokens(); }), {"index 7"});
  EXPECT_NE(error_of([&] { Shard::open(dir.file("missing.bin")); }).find("cannot open"),
            std::string::npos);
}

// ---- loaders ---------------------------------------------------------------------------------

std::shared_ptr<const Shard> make_shard(const TempDir& dir, int64_t n, int64_t vocab) {
  const std::string path = dir.file("tokens_" + std::to_string(n) + ".bin");
  write_shard(path, iota_tokens(n, vocab), vocab);
  return Shard::open(path);
}

std::vector<std::vector<int64_t>> run(DataLoader& loader, int steps) {
  std::vector<std::vector<int64_t>> out;
  for (int i = 0; i < steps; ++i) out.push_back(ints(loader.next().tokens));
  return out;
}

TEST(DataLoader, TargetsAreInputsShiftedByOne) {
  TempDir dir;
  auto shard = make_shard(dir, 10000, 10000);  // token i == i, so rows are runs
  for (DType dt : {DType::int32, DType::int64}) {
    DataLoader loader(shard, {4, 16, 7, 0, 1, true, 2, dt});
    Batch b = loader.next();
    EXPECT_EQ(b.tokens.dtype(), dt);
    EXPECT_EQ(b.tokens.shape(), (Shape{4, 17}));
    EXPECT_EQ(b.inputs.shape(), (Shape{4, 16}));
    EXPECT_EQ(b.targets.shape(), (Shape{4, 16}));
    auto tok = ints(b.tokens), in = ints(b.inputs), tgt = ints(b.targets);
    for (int r = 0; r < 4; ++r) {
      EXPECT_GE(b.starts[r], 0);
      EXPECT_LE(b.starts[r], 10000 - 17);
      for (int t = 0; t < 16; ++t) {
        EXPECT_EQ(in[r * 16 + t], b.starts[r] + t);
        EXPECT_EQ(tgt[r * 16 + t], in[r * 16 + t] + 1);
        EXPECT_EQ(tok[r * 17 + t], in[r * 16 + t]);
      }
      EXPECT_EQ(tok[r * 17 + 16], tgt[r * 16 + 15]);
    }
  }
}

TEST(DataLoader, DeterministicPerSeedAndRank) {
  TempDir dir;
  auto shard = make_shard(dir, 50000, 1000);
  LoaderOptions o{8, 32, 1234};
  DataLoader a(shard, o), b(shard, o);
  auto ra = run(a, 6);
  EXPECT_EQ(ra, run(b, 6));
  o.rank = 1, o.world_size = 2;
  DataLoader other_rank(shard, o);
  o.rank = 0, o.seed = 99;
  DataLoader other_seed(shard, o);
  std::vector<int64_t> sa, sr, ss;
  for (int s = 0; s < 6; ++s) {
    for (int64_t x : a.batch_at(s).starts) sa.push_back(x);
    for (int64_t x : other_rank.batch_at(s).starts) sr.push_back(x);
    for (int64_t x : other_seed.batch_at(s).starts) ss.push_back(x);
  }
  EXPECT_NE(sa, sr);
  EXPECT_NE(sa, ss);
  // The window starts are the pure function window_start: row 1 of step 1 on rank 1 of 2 is
  // global row 8 + 1 of the global batch of 16.
  EXPECT_EQ(sr[9], window_start(1234, 1, 9, 16, 50000 - 32));
  // The windows are spread over the shard, not stuck at one place.
  EXPECT_GT(*std::max_element(sa.begin(), sa.end()) - *std::min_element(sa.begin(), sa.end()),
            25000);
}

TEST(DataLoader, PrefetchOnOffAndResumeGiveTheSameBatches) {
  TempDir dir;
  auto shard = make_shard(dir, 20000, 3000);
  LoaderOptions o{3, 64, 5};
  o.prefetch = false;
  DataLoader plain(shard, o);
  auto want = run(plain, 12);
  o.prefetch = true;
  for (int depth : {1, 2}) {
    o.prefetch_depth = depth;
    DataLoader pre(shard, o);
    EXPECT_EQ(run(pre, 12), want) << "prefetch depth " << depth;
  }
  // Interrupted at step 5 and resumed in a fresh loader from the saved state alone.
  DataLoader first(shard, o);
  run(first, 5);
  const LoaderState saved = first.state();
  EXPECT_EQ(saved.step, 5);
  DataLoader resumed(shard, o);
  resumed.set_state(saved);
  auto rest = run(resumed, 7);
  EXPECT_EQ(rest, std::vector<std::vector<int64_t>>(want.begin() + 5, want.end()));
  // Rewinding a running (prefetching) loader replays the same steps.
  first.set_state({2});
  EXPECT_EQ(run(first, 3), std::vector<std::vector<int64_t>>(want.begin() + 2, want.begin() + 5));
  EXPECT_EQ(first.state().step, 5);
}

TEST(DataLoader, WorkerErrorsReachTheCaller) {
  TempDir dir;
  auto good = make_shard(dir, 200, 10);
  const std::string path = dir.file("oob.bin");
  std::string bytes = read_file(good->path());
  for (size_t i = 64; i < bytes.size(); i += 2) bytes[i] = char(200);  // every token 200 >= 10
  write_file(path, bytes);
  LoaderOptions o{2, 8, 0};
  DataLoader loader(Shard::open(path), o);
  EXPECT_NE(error_of([&] { loader.next(); }).find(">= the vocab size 10"), std::string::npos);
  EXPECT_THROW(loader.next(), Error);
  {
    DataLoader unused(good, o);
    unused.next();
  }  // destroyed with a batch in flight: joins cleanly
  EXPECT_NE(error_of([&] {
              DataLoader(good, {2, 200, 0});
            }).find("at least 201"),
            std::string::npos);
}

TEST(SequentialLoader, CoversTheShardInOrder) {
  TempDir dir;
  auto shard = make_shard(dir, 103, 1000);  // (103 - 1) / 8 = 12 windows
  SequentialLoader seq(shard, 5, 8);
  EXPECT_EQ(seq.num_windows(), 12);
  EXPECT_EQ(seq.num_batches(), 3);
  std::vector<int64_t> inputs, targets;
  std::vector<int64_t> rows;
  Batch b;
  while (seq.next(b)) {
    rows.push_back(b.batch_size());
    for (int64_t v : ints(b.inputs)) inputs.push_back(v);
    for (int64_t v : ints(b.targets)) targets.push_back(v);
  }
  EXPECT_EQ(rows, (std::vector<int64_t>{5, 5, 2}));
  ASSERT_EQ(inputs.size(), 96u);
  for (int64_t i = 0; i < 96; ++i) {
    EXPECT_EQ(inputs[size_t(i)], i);  // every input position once, in order
    EXPECT_EQ(targets[size_t(i)], i + 1);
  }
  seq.reset();
  ASSERT_TRUE(seq.next(b));
  EXPECT_EQ(b.starts[0], 0);
  SequentialLoader capped(shard, 5, 8, /*max_batches=*/2);
  EXPECT_EQ(capped.num_batches(), 2);
  // Two ranks interleave the windows and together cover each exactly once.
  std::vector<int64_t> starts;
  for (int r = 0; r < 2; ++r) {
    SequentialLoader part(shard, 4, 8, 0, r, 2);
    while (part.next(b))
      for (int64_t s : b.starts) starts.push_back(s);
  }
  std::sort(starts.begin(), starts.end());
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(starts[size_t(i)], 8 * i);
}

// ---- prepare_data ----------------------------------------------------------------------------

struct TextFiles {
  TempDir dir;
  std::vector<std::string> texts;  // of the usable files, in path order
  TextFiles() {
    fs::create_directories(dir.path / "in" / "sub");
    const char* names[] = {"in/a.txt", "in/b.txt", "in/sub/c.txt", "in/sub/d.txt", "in/e.txt"};
    for (int i = 0; i < 5; ++i) {
      std::string t;
      for (int k = 0; k < 40 + 30 * i; ++k)
        t += "line " + std::to_string(k) + " of file " + std::to_string(i) + " caf\xc3\xa9\n";
      write_file(dir.file(names[i]), t);
    }
    for (const char* n : {"in/a.txt", "in/b.txt", "in/e.txt", "in/sub/c.txt", "in/sub/d.txt"})
      texts.push_back(read_file(dir.file(n)));
    write_file(dir.file("in/blob.bin"), std::string("\x01\x02\0\x03", 4));
    write_file(dir.file("in/latin1.txt"), "caf\xe9\n");
    write_file(dir.file("in/empty.txt"), "");
  }
  // prepare_data's options for these inputs (names under the directory): out/, no progress.
  PrepareOptions options(std::initializer_list<const char*> inputs) const {
    PrepareOptions o;
    for (const char* in : inputs) o.inputs.push_back(dir.file(in));
    o.out_dir = dir.file("out");
    o.progress = false;
    return o;
  }
};

TEST(PrepareData, ExpandInputs) {
  TextFiles c;
  auto files = expand_inputs({c.dir.file("in/*.txt"), c.dir.file("in")});
  ASSERT_EQ(files.size(), 8u);  // 5 *.txt at the top, then the rest of the walk, no duplicates
  EXPECT_EQ(files[0], c.dir.file("in/a.txt"));
  EXPECT_NE(error_of([&] { expand_inputs({c.dir.file("nothing*.txt")}); }).find("matches no file"),
            std::string::npos);
}

TEST(PrepareData, TheSplitDoesNotDependOnWhereTheCorpusLives) {
  TextFiles a, b;  // the same files in two temporary directories
  auto val_of = [](TextFiles& c) {
    PrepareOptions o = c.options({"in"});
    o.val_fraction = 0.3;
    prepare_data(o);
    return read_file(c.dir.file("out/val.bin"));
  };
  EXPECT_NE(a.dir.file("in"), b.dir.file("in"));
  EXPECT_EQ(val_of(a), val_of(b));
  // Keys: below the directory given, or the file name of a file given directly.
  const auto keyed = expand_inputs_keyed({a.dir.file("in/sub"), a.dir.file("in/a.txt")});
  ASSERT_EQ(keyed.size(), 3u);
  EXPECT_EQ(keyed[0].key, "c.txt");
  EXPECT_EQ(keyed[2].key, "a.txt");
}

TEST(PrepareData, ByteEndToEnd) {
  TextFiles c;
  PrepareOptions o = c.options({"in"});
  o.val_fraction = 0.3;
  o.threads = 2;
  PrepareSummary s = prepare_data(o);
  // The byte tokenizer keeps invalid UTF-8: latin1.txt is used (and reported), in path order.
  std::vector<std::string> texts = c.texts;
  texts.insert(texts.begin() + 3, read_file(c.dir.file("in/latin1.txt")));
  EXPECT_EQ(s.files_found, 8);
  EXPECT_EQ(s.files_used, 6);
  EXPECT_EQ(s.files_skipped_binary, 1);
  EXPECT_EQ(s.utf8_files, 1);
  EXPECT_EQ(s.files_skipped_empty, 1);
  int64_t total = 0;
  std::string all;
  for (const auto& t : texts) total += int64_t(t.size());
  EXPECT_EQ(s.bytes, total);
  EXPECT_GE(s.val_docs, 1);
  EXPECT_GE(s.train_docs, 1);
  EXPECT_EQ(s.train_docs + s.val_docs, 6);
  EXPECT_LE(double(s.val_bytes), 0.3 * double(total) + 1);
  EXPECT_EQ(s.train_tokens + s.val_tokens, total);  // byte: one token per byte, no eos
  auto train = Shard::open(c.dir.file("out/train.bin"), true);
  auto val = Shard::open(c.dir.file("out/val.bin"), true);
  EXPECT_EQ(train->size(), s.train_tokens);
  EXPECT_EQ(val->vocab_size(), 256);
  // The shards hold whole files, in path order: train + val re-decoded = the usable files.
  auto tok = load_tokenizer(c.dir.file("out"));
  std::string train_text = tok->decode(train->read(0, train->size()));
  std::string val_text = tok->decode(val->read(0, val->size()));
  std::string rebuilt_train, rebuilt_val;
  for (const auto& t : texts) {
    if (train_text.find(t) != std::string::npos)
      rebuilt_train += t;
    else
      rebuilt_val += t;
  }
  EXPECT_EQ(rebuilt_train, train_text);
  EXPECT_EQ(rebuilt_val, val_text);
  auto meta = nlohmann::json::parse(read_file(c.dir.file("out/meta.json")));
  EXPECT_EQ(meta["tokenizer"], "byte");
  EXPECT_EQ(meta["vocab_size"], 256);
  EXPECT_EQ(meta["train"]["tokens"], s.train_tokens);
  EXPECT_EQ(meta["val"]["tokens"], s.val_tokens);
  EXPECT_EQ(meta["source_files"], 6);
  EXPECT_EQ(meta["bytes"], total);
  EXPECT_TRUE(fs::exists(c.dir.file("out/tokenizer.json")));
  // The same inputs give the same shards (and the thread count does not matter).
  o.out_dir = c.dir.file("out2");
  o.threads = 1;
  prepare_data(o);
  EXPECT_EQ(read_file(c.dir.file("out/train.bin")), read_file(c.dir.file("out2/train.bin")));
  // The loader reads the result.
  DataLoader loader(train, {2, 16, 0});
  EXPECT_EQ(loader.next().inputs.shape(), (Shape{2, 16}));
}

TEST(PrepareData, SentencePieceEndToEndWithMaxBytes) {
  TextFiles c;
  PrepareOptions o = c.options({"in/*.txt", "in/sub/*.txt"});
  o.max_bytes = 6000;
  const PrepareSummary s = prepare_data(test::with_sentencepiece(o));
  EXPECT_LE(s.bytes, 6000);
  EXPECT_GT(s.bytes, 5000);
  EXPECT_EQ(s.files_truncated, 1);
  EXPECT_GT(s.sp_sample_bytes, 0);
  EXPECT_EQ(s.tokenizer, "sentencepiece");
  auto tok = load_tokenizer(c.dir.file("out"));
  EXPECT_EQ(tok->vocab_size(), s.vocab_size);
  auto train = Shard::open(c.dir.file("out/train.bin"), true);
  auto val = Shard::open(c.dir.file("out/val.bin"), true);
  auto ids = train->read(0, train->size());
  EXPECT_EQ(ids.back(), tok->eos_id());  // every document ends with eos
  const std::string text = tok->decode(ids) + tok->decode(val->read(0, val->size()));
  EXPECT_NE(text.find(c.texts[0]), std::string::npos);  // a.txt and b.txt decode back exactly
  EXPECT_NE(text.find(c.texts[1]), std::string::npos);
  EXPECT_LT(s.train_tokens + s.val_tokens, s.bytes);  // fewer tokens than bytes
  EXPECT_TRUE(fs::exists(c.dir.file("out/tokenizer.model")));
}

TEST(PrepareData, SingleFileSplitsAtATail) {
  TextFiles c;
  PrepareOptions o = c.options({"in/e.txt"});
  o.val_fraction = 0.1;
  const PrepareSummary s = prepare_data(o);
  const int64_t n = int64_t(c.texts[2].size());
  EXPECT_EQ(s.val_tokens, (n + 9) / 10);
  EXPECT_EQ(s.train_tokens + s.val_tokens, n);
  auto train = Shard::open(s.train_path), val = Shard::open(s.val_path);
  auto tok = make_byte_tokenizer();
  EXPECT_EQ(tok->decode(train->read(0, train->size())) + tok->decode(val->read(0, val->size())),
            c.texts[2]);
}

TEST(Corpus, DefaultCorpusOrClearError) {
  try {
    Corpus c = find_default_corpus();
    EXPECT_FALSE(c.files.empty());
    EXPECT_GT(c.bytes, 1000000);
    EXPECT_TRUE(std::is_sorted(c.files.begin(), c.files.end()));
    EXPECT_EQ(c.files[0].rfind(c.root, 0), 0u);
    std::printf("default corpus %s: %zu files, %.1f MB\n", c.name.c_str(), c.files.size(),
                c.bytes / 1e6);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/usr/lib/python3."), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gdn::data
