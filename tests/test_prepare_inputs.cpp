// prepare_data's inputs and outputs beyond plain text: JSON Lines (plain and gzip, made here
// with zlib), the text field, bad lines, directories and globs, invalid UTF-8 with the byte and
// SentencePiece tokenizers, meta.json validation, the refusal of an empty val.bin and the
// removal of leftover temporary files.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "src/data/meta.h"
#include "src/data/prepare.h"
#include "src/data/shard.h"
#include "src/data/text_inputs.h"
#include "src/data/tokenizer.h"
#include "src/data/utf8.h"
#include "src/io/atomic_file.h"
#include "src/train/data_source.h"
#include "tests/prepare_test_util.h"
#include "tests/test_helpers.h"
#include "tests/tiny_runs.h"

namespace gdn::data {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::read_file;
using test::TempDir;
using test::write_file;

bool has(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Writes `bytes` gzip-compressed through zlib.
void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

std::string jsonl_line(const std::string& field, const std::string& text) {
  return nlohmann::json{{"id", 7}, {field, text}}.dump() + "\n";
}

PrepareOptions options_for(const TempDir& dir, std::vector<std::string> inputs) {
  PrepareOptions o;
  for (auto& in : inputs) o.inputs.push_back(dir.file(in));
  o.out_dir = dir.file("out");
  o.progress = false;
  o.threads = 2;
  o.val_fraction = 0;
  return o;
}

// The text of train.bin + val.bin decoded by the byte tokenizer (specials dropped).
std::string decoded(const std::string& out_dir) {
  auto tok = load_tokenizer(out_dir);
  auto train = Shard::open(out_dir + "/train.bin"), val = Shard::open(out_dir + "/val.bin");
  return tok->decode(train->read(0, train->size())) + tok->decode(val->read(0, val->size()));
}

// ---- JSON Lines ------------------------------------------------------------------------------

TEST(PrepareInputs, JsonlLinesAreDocumentsWithoutTheJsonSyntax) {
  TempDir dir;
  write_file(dir.file("a.jsonl"), jsonl_line("text", "first doc\n") + "\n" +
                                      jsonl_line("text", "second \"quoted\" doc") +
                                      jsonl_line("text", "") + "  \r\n" +
                                      jsonl_line("text", "third caf\xc3\xa9"));
  PrepareOptions o = options_for(dir, {"a.jsonl"});
  o.vocab_size = 258;  // eos after each document
  const PrepareSummary s = prepare_data(o);
  EXPECT_EQ(s.files_jsonl, 1);
  EXPECT_EQ(s.documents, 3);
  EXPECT_EQ(s.documents_skipped_empty, 1);
  EXPECT_EQ(s.train_docs, 3);
  const std::string text = decoded(o.out_dir);
  EXPECT_EQ(text, "first doc\nsecond \"quoted\" docthird caf\xc3\xa9");
  EXPECT_FALSE(has(text, "{\"")) << "JSON syntax reached the shard";
  auto train = Shard::open(s.train_path);
  int eos = 0;
  for (int32_t id : train->read(0, train->size())) eos += id == 257;
  EXPECT_EQ(eos, 3);
  auto meta = nlohmann::json::parse(read_file(s.meta_path));
  EXPECT_EQ(meta["documents"], 3);
  EXPECT_EQ(meta["train"]["documents"], 3);
  EXPECT_EQ(meta["text_field"], "text");
  EXPECT_EQ(meta["files_by_format"]["jsonl"], 1);
}

TEST(PrepareInputs, GzipJsonlGzipTextAndTheTextField) {
  TempDir dir;
  std::string lines;
  for (int i = 0; i < 50; ++i) lines += jsonl_line("content", "row " + std::to_string(i) + "\n");
  write_gzip(dir.file("d.jsonl.gz"), lines);
  write_gzip(dir.file("notes.txt.gz"), "plain gzip text\n");
  PrepareOptions o = options_for(dir, {"d.jsonl.gz", "notes.txt.gz"});
  o.text_field = "content";
  o.val_fraction = 0.2;
  const PrepareSummary s = prepare_data(o);
  EXPECT_EQ(s.files_jsonl, 1);
  EXPECT_EQ(s.files_text, 1);
  EXPECT_EQ(s.documents, 51);
  EXPECT_GE(s.val_docs, 1);
  std::string all;
  for (int i = 0; i < 50; ++i) all += "row " + std::to_string(i) + "\n";
  EXPECT_EQ(s.bytes, int64_t(all.size() + 16));
  EXPECT_EQ(s.train_tokens + s.val_tokens, s.bytes);
  const std::string text = decoded(o.out_dir);
  EXPECT_TRUE(has(text, "plain gzip text\n"));
  EXPECT_TRUE(has(text, "row 0\n"));
  // The default field is missing in these lines: the error names it and the fields there are.
  o.text_field = "text";
  const std::string e = error_of([&] { prepare_data(o); });
  EXPECT_TRUE(
      has(e, "d.jsonl.gz' line 1 (byte offset 0): no \"text\" field (its fields: content, id"))
      << e;
  // A truncated gzip file is an error naming the file.
  const std::string gz = read_file(dir.file("d.jsonl.gz"));
  write_file(dir.file("cut.jsonl.gz"), gz.substr(0, gz.size() / 2));
  o = options_for(dir, {"cut.jsonl.gz"});
  o.text_field = "content";
  const std::string cut = error_of([&] { prepare_data(o); });
  EXPECT_TRUE(has(cut, "cut.jsonl.gz': gzip error")) << cut;
  EXPECT_TRUE(has(cut, "truncated")) << cut;
}

TEST(PrepareInputs, BadJsonLinesAreErrorsNamingFileAndLineOrSkipped) {
  TempDir dir;
  const std::string good = jsonl_line("text", "good\n");
  auto error_for = [&](const std::string& bad) {
    write_file(dir.file("b.jsonl"), good + bad + "\n" + good);
    return error_of([&] { prepare_data(options_for(dir, {"b.jsonl"})); });
  };
  const int64_t offset = int64_t(good.size());
  const std::string at = "b.jsonl' line 2 (byte offset " + std::to_string(offset) + "): ";
  std::string e = error_for("{\"text\": \"unterminated}");
  EXPECT_TRUE(has(e, at + "not valid JSON: ")) << e;
  EXPECT_TRUE(has(e, "--skip-bad-lines")) << e;
  e = error_for("[\"an\", \"array\"]");
  EXPECT_TRUE(has(e, at + "expected a JSON object with a \"text\" field, got array")) << e;
  e = error_for("{\"body\": \"x\"}");
  EXPECT_TRUE(has(e, at + "no \"text\" field (its fields: body")) << e;
  e = error_for("{\"text\": 12}");
  EXPECT_TRUE(has(e, at + "field \"text\" is number, not a string")) << e;
  e = error_for("{\"text\": null}");
  EXPECT_TRUE(has(e, at + "field \"text\" is null, not a string")) << e;

  // skip_bad_lines: counted, the reasons kept for the summary.
  write_file(dir.file("b.jsonl"), good + "nope\n" + good + "{\"text\": 1}\n" + good);
  PrepareOptions o = options_for(dir, {"b.jsonl"});
  o.skip_bad_lines = true;
  const PrepareSummary s = prepare_data(o);
  EXPECT_EQ(s.documents, 3);
  EXPECT_EQ(s.lines_skipped, 2);
  ASSERT_EQ(s.skipped_lines.size(), 2u);
  EXPECT_TRUE(has(s.skipped_lines[0], "b.jsonl' line 2")) << s.skipped_lines[0];
  EXPECT_TRUE(has(s.skipped_lines[1], "b.jsonl' line 4")) << s.skipped_lines[1];
  const std::string summary = format_summary(s);
  EXPECT_TRUE(has(summary, "2 bad JSON lines")) << summary;
  EXPECT_EQ(nlohmann::json::parse(read_file(s.meta_path))["documents_skipped"]["bad_lines"], 2);
}

// ---- directories and globs -------------------------------------------------------------------

TEST(PrepareInputs, DirectoriesAndGlobsMixFormats) {
  TempDir dir;
  fs::create_directories(dir.path / "in" / "sub");
  write_file(dir.file("in/a.txt"), "plain a\n");
  write_file(dir.file("in/sub/b.jsonl"), jsonl_line("text", "json b1") + jsonl_line("text", "b2"));
  write_gzip(dir.file("in/sub/c.JSONL.gz"), jsonl_line("text", "json c"));
  write_file((dir.path / "in" / "exported.json").string(), jsonl_line("text", "not jsonl by name"));
  PrepareSummary s = prepare_data(options_for(dir, {"in"}));
  EXPECT_EQ(s.files_found, 4);
  EXPECT_EQ(s.files_jsonl, 2);
  EXPECT_EQ(s.files_text, 2);
  EXPECT_EQ(s.documents, 5);
  EXPECT_EQ(s.files_json_as_text, 1);
  EXPECT_TRUE(has(format_summary(s), "must be named .jsonl"));
  EXPECT_TRUE(has(decoded(dir.file("out")), "json b1b2json c"));

  s = prepare_data(options_for(dir, {"in/sub/*", "in/*.txt"}));
  EXPECT_EQ(s.files_found, 3);
  EXPECT_EQ(s.files_jsonl, 2);
  EXPECT_EQ(s.documents, 4);
  EXPECT_EQ(decoded(dir.file("out")), "json b1b2json cplain a\n");
  EXPECT_TRUE(
      has(error_of([&] { prepare_data(options_for(dir, {"in/*.parquet"})); }), "matches no file"));
}

// ---- invalid UTF-8 ---------------------------------------------------------------------------

TEST(Utf8Repair, MaximalSubpartsBecomeOneReplacementEach) {
  std::string t =
      "a\xF0\x9F\x99"
      "b\xC0\xAF"
      "c\xED\xA0\x80"
      "d\xF4\x90";
  const Utf8Stats st = repair_utf8(t, Utf8Policy::replace);
  // F0 9F 99: one truncated sequence; C0, AF: two; ED A0 80: three (surrogate); F4 90: two.
  EXPECT_EQ(st.replacements, 8);
  EXPECT_EQ(st.invalid_bytes, 10);
  EXPECT_EQ(st.first_offset, 1);
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(t, "a" + r + "b" + r + r + "c" + r + r + r + "d" + r + r);
  std::string kept = "ok\xFFok";
  EXPECT_EQ(repair_utf8(kept, Utf8Policy::keep).first_offset, 2);
  EXPECT_EQ(kept, "ok\xFFok");
  std::string fine = "caf\xc3\xa9 \xf0\x9f\x99\x82";
  EXPECT_EQ(check_utf8(fine).invalid_bytes, 0);
}

// A plain file and a JSON Lines file with invalid bytes, plus enough text to train SentencePiece.
struct BadUtf8Files {
  TempDir dir;
  std::string jsonl, line2;
  BadUtf8Files() {
    write_file(dir.file("latin1.txt"), "caf\xe9 au lait\n");
    line2 = "{\"id\": 2, \"text\": \"bad \xfe\xff byte\"}\n";
    jsonl = jsonl_line("text", "fine\n") + line2;
    write_file(dir.file("rows.jsonl"), jsonl);
    std::string filler;
    for (int i = 0; i < 300; ++i) filler += "the quick brown fox " + std::to_string(i % 17) + "\n";
    write_file(dir.file("filler.txt"), filler);
  }
  int64_t line2_bad_offset() const { return int64_t(jsonl.find('\xfe')); }
};

TEST(PrepareInputs, InvalidUtf8IsKeptByTheByteTokenizerAndReported) {
  BadUtf8Files f;
  const PrepareSummary s = prepare_data(options_for(f.dir, {"latin1.txt", "rows.jsonl"}));
  EXPECT_EQ(s.files_used, 2);
  EXPECT_EQ(s.utf8_handling, "kept");
  EXPECT_EQ(s.utf8_files, 2);
  EXPECT_EQ(s.utf8_documents, 2);
  EXPECT_EQ(s.utf8_bytes, 3);
  EXPECT_EQ(s.utf8_replacements, 0);
  ASSERT_EQ(s.utf8_first.size(), 2u);
  EXPECT_EQ(s.utf8_first[0].file, f.dir.file("latin1.txt"));
  EXPECT_EQ(s.utf8_first[0].offset, 3);
  EXPECT_EQ(s.utf8_first[0].line, 0);
  EXPECT_EQ(s.utf8_first[1].file, f.dir.file("rows.jsonl"));
  EXPECT_EQ(s.utf8_first[1].line, 2);
  EXPECT_EQ(s.utf8_first[1].offset, f.line2_bad_offset());
  // The bytes reach the shard exactly, the JSON string's included.
  EXPECT_EQ(decoded(s.out_dir), "caf\xe9 au lait\nfine\nbad \xfe\xff byte");
  const std::string summary = format_summary(s);
  EXPECT_TRUE(has(summary, "invalid UTF-8: 3 bytes in 2 documents of 2 files, kept")) << summary;
  EXPECT_TRUE(has(summary, f.dir.file("latin1.txt") + ": first at byte offset 3")) << summary;
  EXPECT_TRUE(has(summary, f.dir.file("rows.jsonl") + ": line 2, first at byte offset " +
                               std::to_string(f.line2_bad_offset())))
      << summary;
  auto meta = nlohmann::json::parse(read_file(s.meta_path));
  EXPECT_EQ(meta["invalid_utf8"]["bytes"], 3);
  EXPECT_EQ(meta["invalid_utf8"]["first"][1]["line"], 2);
}

TEST(PrepareInputs, InvalidUtf8IsReplacedForSentencePieceAndCounted) {
  BadUtf8Files f;
  const PrepareSummary s = prepare_data(
      test::with_sentencepiece(options_for(f.dir, {"latin1.txt", "rows.jsonl", "filler.txt"})));
  EXPECT_EQ(s.utf8_handling, "replaced");
  EXPECT_EQ(s.utf8_files, 2);
  EXPECT_EQ(s.utf8_bytes, 3);
  EXPECT_EQ(s.utf8_replacements, 3);  // E9; FE; FF (each its own maximal subpart)
  EXPECT_EQ(s.utf8_first[1].line, 2);
  EXPECT_EQ(s.utf8_first[1].offset, f.line2_bad_offset());
  const std::string text = decoded(s.out_dir);
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_TRUE(has(text, "caf" + r + " au lait\n")) << text;
  EXPECT_TRUE(has(text, "bad " + r + r + " byte")) << text;
  EXPECT_EQ(check_utf8(text).invalid_bytes, 0);
  EXPECT_TRUE(has(format_summary(s), "replaced by U+FFFD (3 replacements)"));
}

// ---- meta.json validation --------------------------------------------------------------------

struct Prepared {
  TempDir dir;
  std::string out, meta_path, meta_text;
  Prepared() {
    std::string text;
    for (int i = 0; i < 40; ++i) text += jsonl_line("text", "doc " + std::to_string(i) + "\n");
    write_file(dir.file("c.jsonl"), text);
    PrepareOptions o = options_for(dir, {"c.jsonl"});
    o.val_fraction = 0.25;
    const PrepareSummary s = prepare_data(o);
    out = s.out_dir;
    meta_path = s.meta_path;
    meta_text = read_file(meta_path);
  }
  // The error of open_prepared after `edit` changed meta.json (restored afterwards).
  std::string error_after(const std::function<void(nlohmann::json&)>& edit) {
    auto m = nlohmann::json::parse(meta_text);
    edit(m);
    write_file(meta_path, m.dump());
    const std::string e = error_of([&] { open_prepared(out); });
    write_file(meta_path, meta_text);
    return e;
  }
};

TEST(PreparedData, OpensAndChecksMetaAgainstShardsAndTokenizer) {
  Prepared p;
  const PreparedData d = open_prepared(p.out);
  EXPECT_EQ(d.tokenizer->name(), "byte");
  EXPECT_EQ(d.train->size() + d.val->size(), 40 * 7 - 10);  // "doc N\n": 6 or 7 bytes
  EXPECT_GT(d.val_bytes_per_token(), 0);
  EXPECT_EQ(d.train_documents + d.val_documents, 40);

  std::string e =
      p.error_after([](auto& m) { m["train"]["tokens"] = int64_t(m["train"]["tokens"]) + 1; });
  EXPECT_TRUE(has(e, "meta.json': field \"train.tokens\" is ")) << e;
  EXPECT_TRUE(has(e, "train.bin' counts " + std::to_string(d.train->size()) + " tokens")) << e;
  e = p.error_after([](auto& m) { m["vocab_size"] = 300; });
  EXPECT_TRUE(has(e, "field \"vocab_size\" is 300, but the tokenizer tokenizer.json has 256 ids"))
      << e;
  e = p.error_after([](auto& m) { m["token_bytes"] = 4; });
  EXPECT_TRUE(has(e, "field \"token_bytes\" is 4")) << e;
  e = p.error_after([](auto& m) { m["val"].erase("tokens"); });
  EXPECT_TRUE(has(e, "field \"val.tokens\" is missing")) << e;
  e = p.error_after([](auto& m) { m["val"]["tokens"] = "many"; });
  EXPECT_TRUE(has(e, "field \"val.tokens\" is \"many\", expected an integer")) << e;
  e = p.error_after([](auto& m) { m["tokenizer"] = "sentencepiece"; });
  EXPECT_TRUE(has(e, "field \"tokenizer_file\" is \"tokenizer.json\", but a sentencepiece")) << e;
  e = p.error_after([](auto& m) { m["format"] = "something else"; });
  EXPECT_TRUE(has(e, "field \"format\" is \"something else\"")) << e;
  e = p.error_after([](auto& m) { m["train"]["file"] = "../train.bin"; });
  EXPECT_TRUE(has(e, "field \"train.file\" is \"../train.bin\"")) << e;
  write_file(p.meta_path, "{\"format\": ");
  EXPECT_TRUE(has(error_of([&] { open_prepared(p.out); }), "meta.json': not valid JSON"));
  write_file(p.meta_path, p.meta_text);
  // A shard from another preparation.
  write_shard(p.out + "/val.bin", {1, 2, 3}, 256);
  e = error_of([&] { open_prepared(p.out); });
  EXPECT_TRUE(has(e, "field \"val.tokens\"")) << e;
  EXPECT_TRUE(has(e, "val.bin' counts 3 tokens")) << e;
}

// ---- empty val -------------------------------------------------------------------------------

TEST(PreparedData, AnEmptyValIsRefusedWhereTrainingWouldUseIt) {
  TempDir dir;
  test::write_tiny_corpus(dir.path / "corpus");
  PrepareOptions o = options_for(dir, {"corpus"});
  o.val_fraction = 0;
  const PrepareSummary s = prepare_data(o);
  ASSERT_EQ(s.val_tokens, 0);
  auto val = Shard::open(s.val_path);
  std::string e = error_of([&] { require_val_window(*val, 24); });
  EXPECT_TRUE(has(e, s.val_path + "' holds 0 validation tokens")) << e;
  EXPECT_TRUE(has(e, "--val-fraction")) << e;

  // The trainer's data source: refused with eval_every > 0, fine without evaluation.
  auto cfg = test::tiny_text_run(dir.path.string(), "run", {"data.dir=" + o.out_dir});
  e = error_of([&] { train::make_data_source(cfg, dir.file("run")); });
  EXPECT_TRUE(has(e, "val.bin' holds 0 validation tokens")) << e;
  EXPECT_TRUE(has(e, "data.val_fraction")) << e;
  EXPECT_TRUE(has(e, "train.eval_every: 0")) << e;
  cfg.train.eval_every = 0;
  EXPECT_NO_THROW(train::make_data_source(cfg, dir.file("run")));
}

TEST(PreparedData, RunInputsGoThroughTheSameReader) {
  TempDir dir;
  std::string rows;
  for (int i = 0; i < 200; ++i)
    rows += jsonl_line("text", "row " + std::to_string(i) + " of text\n");
  write_file(dir.file("rows.jsonl"), rows);
  auto cfg = test::tiny_text_run(dir.path.string(), "run",
                                 {"data.inputs=[" + dir.file("rows.jsonl") + "]"});
  auto source = train::make_data_source(cfg, dir.file("run"));
  EXPECT_NE(source->describe().find("byte tokenizer"), std::string::npos);
  auto meta = nlohmann::json::parse(read_file((dir.path / "run" / "data" / "meta.json").string()));
  EXPECT_EQ(meta["documents"], 200);
  EXPECT_EQ(meta["files_by_format"]["jsonl"], 1);
  EXPECT_GT(source->bytes_per_token(), 0);
}

// ---- temporary files -------------------------------------------------------------------------

TEST(PrepareInputs, LeftoverTemporaryFilesAreRemoved) {
  TempDir dir;
  write_file(dir.file("a.txt"), "some text\n");
  const std::string out = dir.file("out");
  fs::create_directories(out);
  const std::string own = std::to_string(::getpid());
  // Ours and stale (a process id above any pid_max, this process, the old name) or not ours.
  for (const std::string& name :
       std::vector<std::string>{"train.bin.tmp.999999999", "val.bin.tmp." + own, "meta.json.tmp",
                                "tokenizer.model.tmp.12x", "notes.txt.tmp.5", "train.bin.tmpx"})
    write_file(out + "/" + name, "partial");
  ASSERT_EQ(::kill(1, 0) == 0 || errno == EPERM, true);
  write_file(out + "/tokenizer.json.tmp.1", "being written by a live process");
  const PrepareSummary s = prepare_data(options_for(dir, {"a.txt"}));
  ASSERT_EQ(s.temp_files_removed.size(), 3u);
  EXPECT_EQ(s.temp_files_removed[0], out + "/meta.json.tmp");
  EXPECT_EQ(s.temp_files_removed[1], out + "/train.bin.tmp.999999999");
  EXPECT_EQ(s.temp_files_removed[2], out + "/val.bin.tmp." + own);
  for (const char* kept :
       {"tokenizer.model.tmp.12x", "notes.txt.tmp.5", "train.bin.tmpx", "tokenizer.json.tmp.1"})
    EXPECT_TRUE(fs::exists(out + "/" + kept)) << kept;
  EXPECT_TRUE(has(format_summary(s), "removed 3 temporary files"));
  // What gdn itself writes goes through temp_path_for and leaves nothing behind.
  EXPECT_EQ(io::temp_path_for(out + "/x"), out + "/x.tmp." + own);
  size_t ours = 0;
  for (const auto& e : fs::directory_iterator(out))
    ours += has(e.path().filename().string(), ".tmp." + own) ? 1 : 0;
  EXPECT_EQ(ours, 0u);
}

}  // namespace
}  // namespace gdn::data
