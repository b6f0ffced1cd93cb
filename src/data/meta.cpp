// meta.json: the writer (prepare_data's record of a preparation) and the checked reader.
#include "src/data/meta.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "src/core/error.h"
#include "src/io/content_hash.h"

namespace gdn::data {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The fields of one meta.json, each checked for presence and type; errors name the file and
// the field ("train.tokens").
class Fields {
 public:
  Fields(const json& root, std::string path) : root_(root), path_(std::move(path)) {}
  const json& get(const std::string& name) const {
    const json* j = &root_;
    size_t start = 0;
    for (;;) {
      const size_t dot = name.find('.', start);
      const std::string key = name.substr(start, dot - start);
      GDN_CHECK(j->is_object() && j->contains(key), "'", path_, "': field \"", name,
                "\" is missing (prepare the data again with gdn prepare-data)");
      j = &(*j)[key];
      if (dot == std::string::npos) return *j;
      start = dot + 1;
    }
  }
  int64_t integer(const std::string& name, int64_t min) const {
    const json& j = get(name);
    GDN_CHECK(j.is_number_integer(), "'", path_, "': field \"", name, "\" is ", j.dump(),
              ", expected an integer");
    const int64_t v = j.get<int64_t>();
    GDN_CHECK(v >= min, "'", path_, "': field \"", name, "\" is ", v, ", expected at least ", min);
    return v;
  }
  std::string string(const std::string& name) const {
    const json& j = get(name);
    GDN_CHECK(j.is_string(), "'", path_, "': field \"", name, "\" is ", j.dump(),
              ", expected a string");
    return j.get<std::string>();
  }
  // A top-level boolean; false when absent (older meta.json files).
  bool flag(const std::string& name) const {
    return root_.contains(name) && root_[name].is_boolean() && root_[name].get<bool>();
  }
  // Fails with "field NAME is <have>, but <why>" unless ok.
  template <typename T, typename... Why>
  void expect(bool ok, const std::string& name, const T& have, const Why&... why) const {
    GDN_CHECK(ok, "'", path_, "': field \"", name, "\" is ", have, ", but ", why...);
  }

 private:
  const json& root_;
  std::string path_;
};

constexpr const char* kRedo =
    ": meta.json and the shards come from different preparations (or were edited); prepare the "
    "data again with gdn prepare-data";

}  // namespace

std::string meta_json_text(const PrepareSummary& s, const PrepareOptions& o, const Tokenizer& tok) {
  json utf8_first = json::array();
  for (const auto& r : s.utf8_first) {
    json e = {
        {"file", r.file}, {"offset", r.offset}, {"documents", r.documents}, {"bytes", r.bytes}};
    if (r.line > 0) e["line"] = r.line;
    utf8_first.push_back(e);
  }
  json meta = {
      {"format", kMetaFormat},
      {"shard_version", kShardVersion},
      {"tokenizer", s.tokenizer},
      {"tokenizer_file", fs::path(s.tokenizer_path).filename().string()},
      {"vocab_size", s.vocab_size},
      {"bos_id", tok.bos_id()},
      {"eos_id", tok.eos_id()},
      {"eos_appended", o.append_eos && tok.eos_id() >= 0},
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
      {"text_field", o.text_field},
      {"source_files", s.files_used},
      {"files_found", s.files_found},
      {"files_by_format", {{"jsonl", s.files_jsonl}, {"text", s.files_text}}},
      {"files_skipped",
       {{"binary", s.files_skipped_binary},
        {"empty", s.files_skipped_empty},
        {"max_bytes", s.files_skipped_max_bytes}}},
      {"files_truncated", s.files_truncated},
      {"documents", s.documents},
      {"documents_skipped", {{"empty", s.documents_skipped_empty}, {"bad_lines", s.lines_skipped}}},
      {"invalid_utf8",
       {{"handling", s.utf8_handling},
        {"files", s.utf8_files},
        {"documents", s.utf8_documents},
        {"bytes", s.utf8_bytes},
        {"replacements", s.utf8_replacements},
        {"first", utf8_first}}},
      {"bytes", s.bytes},
      {"max_bytes", o.max_bytes},
      {"inputs", o.inputs.empty() ? std::vector<std::string>{"(default corpus)"} : o.inputs},
  };
  if (!s.train_mask_path.empty()) {  // fine-tuning pairs: the loss mask beside each shard
    meta["pair_documents"] = s.pair_documents;
    meta["prompt_field"] = o.prompt_field;
    meta["completion_field"] = o.completion_field;
    meta["train"]["loss_mask"] = fs::path(s.train_mask_path).filename().string();
    meta["train"]["scored_tokens"] = s.train_scored;
    meta["val"]["loss_mask"] = fs::path(s.val_mask_path).filename().string();
    meta["val"]["scored_tokens"] = s.val_scored;
  }
  if (names_a_file(o.tokenizer)) {
    meta["tokenizer_source"] = o.tokenizer;  // the path it was given as
    meta["tokenizer_hash"] = s.tokenizer_hash;
  }
  if (o.tokenizer == "sentencepiece")
    meta["sentencepiece"] = {{"model_type", o.sp_model_type},
                             {"requested_vocab_size", o.vocab_size ? o.vocab_size : 8192},
                             {"byte_fallback", o.sp_byte_fallback},
                             {"sample_bytes", s.sp_sample_bytes},
                             {"seed", o.seed}};
  return meta.dump(2) + "\n";
}

PreparedData open_prepared(const std::string& dir) {
  PreparedData p;
  p.dir = dir;
  p.meta_path = (fs::path(dir) / "meta.json").string();
  std::ifstream in(p.meta_path);
  GDN_CHECK(in, "cannot open '", p.meta_path, "' (gdn prepare-data --out ", dir, " writes it)");
  json root;
  try {
    root = json::parse(in);
  } catch (const json::parse_error& e) {
    GDN_FAIL("'", p.meta_path, "': not valid JSON: ", e.what());
  }
  GDN_CHECK(root.is_object(), "'", p.meta_path, "': expected a JSON object, got ",
            root.type_name());
  const Fields f(root, p.meta_path);

  const std::string format = f.string("format");
  f.expect(format == kMetaFormat, "format", "\"" + format + "\"", "expected \"", kMetaFormat, "\"");
  const int64_t version = f.integer("shard_version", 0);
  f.expect(version == kShardVersion, "shard_version", version, "this gdn reads version ",
           kShardVersion);

  // The tokenizer: the one named, in the file named, of the vocabulary and special ids given.
  const std::string tok_name = f.string("tokenizer");
  const std::string tok_file = f.string("tokenizer_file");
  const std::string expected_file =
      tok_name == "sentencepiece" ? "tokenizer.model" : "tokenizer.json";
  f.expect(tok_name == "byte" || tok_name == "sentencepiece" || tok_name == kHuggingFaceTokenizer,
           "tokenizer", "\"" + tok_name + "\"", "expected \"byte\", \"sentencepiece\" or \"",
           kHuggingFaceTokenizer, "\"");
  f.expect(tok_file == expected_file, "tokenizer_file", "\"" + tok_file + "\"", "a ", tok_name,
           " tokenizer is stored as ", expected_file);
  GDN_CHECK(fs::exists(fs::path(dir) / tok_file), "'", p.meta_path, "': field \"tokenizer_file\" ",
            "names ", tok_file, ", which is not in ", dir, kRedo);
  p.tokenizer = load_tokenizer(dir);
  f.expect(p.tokenizer->name() == tok_name, "tokenizer", "\"" + tok_name + "\"", dir, " holds a ",
           p.tokenizer->name(), " tokenizer", kRedo);
  if (root.contains("tokenizer_hash")) {
    const std::string hash = f.string("tokenizer_hash");
    const std::string now = io::content_hash({(fs::path(dir) / tok_file).string()});
    f.expect(hash == now, "tokenizer_hash", "\"" + hash + "\"", "the file ", tok_file,
             " hashes to ", now, kRedo);
  }
  const int64_t vocab = f.integer("vocab_size", 1);
  f.expect(vocab == p.tokenizer->vocab_size(), "vocab_size", vocab, "the tokenizer ", tok_file,
           " has ", p.tokenizer->vocab_size(), " ids", kRedo);
  const int64_t bos = f.integer("bos_id", -1), eos = f.integer("eos_id", -1);
  f.expect(bos == p.tokenizer->bos_id(), "bos_id", bos, "the tokenizer's is ",
           p.tokenizer->bos_id(), kRedo);
  f.expect(eos == p.tokenizer->eos_id(), "eos_id", eos, "the tokenizer's is ",
           p.tokenizer->eos_id(), kRedo);
  const int64_t width = f.integer("token_bytes", 1);
  p.eos_appended = eos >= 0 && f.flag("eos_appended");

  // Each shard: its file, its header's token count, vocabulary and width.
  for (const char* split : {"train", "val"}) {
    const std::string name = split;
    const std::string file = f.string(name + ".file");
    f.expect(
        !file.empty() && fs::path(file).filename().string() == file && file != "." && file != "..",
        name + ".file", "\"" + file + "\"", "expected a file name in ", dir);
    const int64_t tokens = f.integer(name + ".tokens", 0);
    const int64_t docs = f.integer(name + ".documents", 0);
    const int64_t bytes = f.integer(name + ".bytes", 0);
    const std::string path = (fs::path(dir) / file).string();
    // A loss mask (fine-tuning pairs) opens with its shard, which checks the two agree.
    const bool masked = root.at(name).contains("loss_mask");
    const std::string mask = masked ? f.string(name + ".loss_mask") : "";
    if (masked)
      f.expect(mask == loss_mask_path(file), name + ".loss_mask", "\"" + mask + "\"",
               "the loss mask of ", file, " is ", loss_mask_path(file));
    GDN_CHECK(!masked || fs::exists(fs::path(dir) / mask), "'", p.meta_path, "': field \"", name,
              ".loss_mask\" names ", mask, ", which is not in ", dir, kRedo);
    auto shard =
        masked ? Shard::open_masked(path, (fs::path(dir) / mask).string()) : Shard::open(path);
    f.expect(shard->size() == tokens, name + ".tokens", tokens, "the header of '", shard->path(),
             "' counts ", shard->size(), " tokens (byte offset 16; the file is ",
             kShardHeaderBytes + shard->size() * int64_t(shard->token_bytes()), " bytes)", kRedo);
    f.expect(shard->vocab_size() == vocab, "vocab_size", vocab, "the header of '", shard->path(),
             "' says ", shard->vocab_size(), " (byte offset 24)", kRedo);
    f.expect(int64_t(shard->token_bytes()) == width, "token_bytes", width, "the header of '",
             shard->path(), "' says ", shard->token_bytes(), " (byte offset 12)", kRedo);
    if (name == "train") {
      p.train = shard, p.train_documents = docs;
    } else {
      p.val = shard, p.val_documents = docs, p.val_bytes = bytes;
    }
  }
  return p;
}

void require_val_window(const Shard& val, int64_t seq_len, const std::string& hint) {
  GDN_CHECK(val.size() >= seq_len + 1, "'", val.path(), "' holds ", val.size(),
            " validation tokens, but one validation window of seq_len ", seq_len, " needs ",
            seq_len + 1, ": prepare the data again with a larger validation share (gdn ",
            "prepare-data --val-fraction, data.val_fraction) or from more text", hint);
}

}  // namespace gdn::data
