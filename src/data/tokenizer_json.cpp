// tokenizer.json reader: the pipeline of the `tokenizers` library (added tokens, normalizer,
// pre-tokenizer, BPE, decoder) assembled from the file, and the Tokenizer interface over it.
#include "src/data/tokenizer_json.h"

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "src/data/tokenizer_json_added.h"
#include "src/data/tokenizer_json_bpe.h"
#include "src/data/tokenizer_json_decode.h"
#include "src/data/tokenizer_json_fields.h"
#include "src/data/tokenizer_json_normalize.h"
#include "src/data/tokenizer_json_pretokenize.h"

namespace gdn::data {

using tokjson::Json;
using AddedToken = JsonTokenizer::AddedToken;

namespace {

bool same_token(const AddedToken& a, const AddedToken& b) {
  return a.content == b.content && a.single_word == b.single_word && a.lstrip == b.lstrip &&
         a.rstrip == b.rstrip && a.normalized == b.normalized && a.special == b.special;
}

void check_post_processor(const Json& j, const std::string& path) {
  if (j.is_null()) return;
  std::string type = tokjson::type_field(j, "post_processor", path);
  if (type == "Sequence") {
    const Json& list = tokjson::required_field(j, "processors", path + ": post_processor Sequence");
    GDN_CHECK(list.is_array(), path, ": post_processor Sequence: \"processors\" must be an array");
    for (const Json& p : list) check_post_processor(p, path);
    return;
  }
  // These only add special tokens (or trim offsets): nothing changes with add_special_tokens off.
  GDN_CHECK(type == "TemplateProcessing" || type == "ByteLevel" || type == "RobertaProcessing" ||
                type == "BertProcessing",
            path, ": unsupported post_processor type \"", type,
            "\" (supported: TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing, "
            "Sequence)");
}

void check_padding(const Json& j, const std::string& path) {
  if (j.is_null()) return;
  // BatchLongest pads a single encoding to its own length: no change. Fixed lengths or
  // multiples would append pad ids to every encoding, which this reader does not do.
  auto strategy = j.find("strategy");
  auto multiple = j.find("pad_to_multiple_of");
  bool longest = strategy != j.end() && strategy->is_string() && *strategy == "BatchLongest";
  bool no_multiple = multiple == j.end() || multiple->is_null();
  GDN_CHECK(longest && no_multiple, path, ": unsupported padding ", j.dump(),
            " (only BatchLongest without pad_to_multiple_of, which leaves one encoding as is)");
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  GDN_CHECK(f, "cannot open tokenizer file ", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  GDN_CHECK(!f.bad(), "cannot read tokenizer file ", path);
  return ss.str();
}

}  // namespace

struct JsonTokenizer::Impl {
  std::string path, bytes;
  std::unique_ptr<tokjson::Normalizer> normalizer;
  std::unique_ptr<tokjson::PreTokenizer> pre_tokenizer;
  std::unique_ptr<tokjson::Bpe> model;
  std::unique_ptr<tokjson::Decoder> decoder;
  std::vector<AddedToken> added;  // one per id, by id
  std::unordered_map<std::string, int32_t> added_by_content;
  std::unordered_map<int32_t, std::string> added_content;  // id -> content
  // id -> normalized form, for tokens whose form differs (the library's normalized_cache): what
  // the decoder and id_to_token see instead of the content.
  std::unordered_map<int32_t, std::string> added_decode;
  std::unique_ptr<tokjson::AddedMatcher> raw_matcher, normalized_matcher;
  int64_t vocab_size = 0;

  void load_added_tokens(const Json& list);
  void pretokenize_and_encode(std::string_view text, uint32_t head0,
                              std::vector<int32_t>& out) const;
};

// The library's AddedVocabulary::add_tokens on the file's list, in order.
void JsonTokenizer::Impl::load_added_tokens(const Json& list) {
  std::string where = path + ": added_tokens";
  GDN_CHECK(list.is_array(), where, " must be an array");
  std::unordered_map<int32_t, AddedToken> by_id;
  auto next_id = static_cast<int64_t>(model->vocab_entries());
  for (const Json& j : list) {
    AddedToken t;
    t.content = tokjson::string_field(j, "content", where);
    t.single_word = tokjson::bool_field(j, "single_word", where, false);
    t.lstrip = tokjson::bool_field(j, "lstrip", where, false);
    t.rstrip = tokjson::bool_field(j, "rstrip", where, false);
    t.normalized = tokjson::bool_field(j, "normalized", where, true);
    t.special = tokjson::bool_field(j, "special", where, false);
    GDN_CHECK(tokjson::valid_utf8(t.content), where, ": content is not valid UTF-8");
    if (t.content.empty()) continue;
    auto known = added_by_content.find(t.content);
    if (known != added_by_content.end() && same_token(by_id[known->second], t)) continue;
    int32_t id;
    if (known != added_by_content.end()) {
      id = known->second;
    } else if (auto in_model = model->token_to_id(t.content)) {
      id = *in_model;
    } else {
      GDN_CHECK(next_id < (int64_t{1} << 31), where, ": too many tokens");
      id = static_cast<int32_t>(next_id++);
    }
    if (t.normalized && normalizer) {
      std::string normed;
      uint32_t head0 = 0;
      normalizer->normalize(t.content, normed, head0);
      if (normed != t.content) added_decode[id] = normed;
    }
    added_by_content[t.content] = id;
    t.id = id;
    by_id[id] = t;
  }
  std::vector<tokjson::AddedPattern> raw, normalized;
  for (const auto& [id, t] : by_id) {
    added.push_back(t);
    added_content[id] = t.content;
    if (t.normalized) {
      auto it = added_decode.find(id);
      const std::string& text = it != added_decode.end() ? it->second : t.content;
      GDN_CHECK(!text.empty(), where, ": token \"", t.content, "\" normalizes to nothing");
      normalized.push_back({text, id, t.single_word, t.lstrip, t.rstrip});
    } else {
      raw.push_back({t.content, id, t.single_word, t.lstrip, t.rstrip});
    }
  }
  std::sort(added.begin(), added.end(),
            [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  try {
    if (!raw.empty()) raw_matcher = std::make_unique<tokjson::AddedMatcher>(std::move(raw));
    if (!normalized.empty()) {
      normalized_matcher = std::make_unique<tokjson::AddedMatcher>(std::move(normalized));
    }
  } catch (const Error& e) {
    GDN_FAIL(where, ": ", e.what());
  }
}

JsonTokenizer::JsonTokenizer(const std::string& path) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = path;
  m.bytes = read_file(path);
  Json j;
  try {
    j = Json::parse(m.bytes);
  } catch (const nlohmann::json::exception& e) {
    GDN_FAIL(path, ": not valid JSON: ", e.what());
  }
  GDN_CHECK(j.is_object(), path, ": a tokenizer.json must be a JSON object");
  auto version = j.find("version");
  if (version != j.end()) {
    GDN_CHECK(version->is_string() && *version == "1.0", path, ": unknown tokenizer version ",
              version->dump());
  }
  auto model = j.find("model");
  GDN_CHECK(model != j.end() && model->is_object(), path, ": no \"model\" section");
  auto type = model->find("type");
  std::string model_type =
      type != model->end() && type->is_string() ? type->get<std::string>() : std::string();
  if (model_type.empty() && model->contains("merges")) model_type = "BPE";
  GDN_CHECK(model_type == "BPE", path, ": unsupported model type \"", model_type,
            "\" (only BPE is supported)");
  auto trunc = j.find("truncation");
  GDN_CHECK(trunc == j.end() || trunc->is_null(), path,
            ": a truncation section is not supported (the library would cut every encoding): ",
            trunc->dump());
  if (auto pad = j.find("padding"); pad != j.end()) check_padding(*pad, path);
  if (auto pp = j.find("post_processor"); pp != j.end()) check_post_processor(*pp, path);
  if (auto n = j.find("normalizer"); n != j.end() && !n->is_null()) {
    m.normalizer = tokjson::parse_normalizer(*n, path);
  }
  if (auto p = j.find("pre_tokenizer"); p != j.end() && !p->is_null()) {
    m.pre_tokenizer = tokjson::parse_pre_tokenizer(*p, path);
  }
  m.model = std::make_unique<tokjson::Bpe>(*model, path);
  if (auto d = j.find("decoder"); d != j.end() && !d->is_null()) {
    m.decoder = tokjson::parse_decoder(*d, path);
  }
  if (auto a = j.find("added_tokens"); a != j.end() && !a->is_null()) m.load_added_tokens(*a);
  m.vocab_size = m.model->max_id() + 1;
  for (const AddedToken& t : m.added) m.vocab_size = std::max<int64_t>(m.vocab_size, t.id + 1);
}

JsonTokenizer::~JsonTokenizer() = default;

int64_t JsonTokenizer::vocab_size() const {
  return impl_->vocab_size;
}
const std::vector<AddedToken>& JsonTokenizer::added_tokens() const {
  return impl_->added;
}
const std::string& JsonTokenizer::file_bytes() const {
  return impl_->bytes;
}
const std::string& JsonTokenizer::path() const {
  return impl_->path;
}

std::optional<int32_t> JsonTokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->added_by_content.find(std::string(token));
  if (it != impl_->added_by_content.end()) return it->second;
  return impl_->model->token_to_id(token);
}

std::string JsonTokenizer::id_to_token(int32_t id) const {
  auto it = impl_->added_decode.find(id);
  if (it != impl_->added_decode.end()) return it->second;
  auto content = impl_->added_content.find(id);
  if (content != impl_->added_content.end()) return content->second;
  const std::string* s = impl_->model->id_to_token(id);
  return s ? *s : std::string();
}

namespace {
// Per-thread buffers of the pre-tokenizer.
struct PreTokenizeState {
  tokjson::PreTokens pre;
  tokjson::PreTokenizeScratch scratch;
};
}  // namespace

void JsonTokenizer::Impl::pretokenize_and_encode(std::string_view text, uint32_t head0,
                                                 std::vector<int32_t>& out) const {
  if (!pre_tokenizer) {
    model->tokenize(text, out);
    return;
  }
  thread_local PreTokenizeState st;
  st.pre.text.assign(text.data(), text.size());
  st.pre.spans.assign(1, {0, static_cast<uint32_t>(text.size()), head0});
  pre_tokenizer->apply(st.pre, st.scratch);
  std::string_view all(st.pre.text);
  for (const tokjson::Span& s : st.pre.spans) model->tokenize(all.substr(s.off, s.len), out);
}

void JsonTokenizer::encode_append(std::string_view text, std::vector<int32_t>& out) const {
  const Impl& m = *impl_;
  size_t bad = 0;
  GDN_CHECK(tokjson::valid_utf8(text, &bad), m.path, ": cannot encode text that is not UTF-8 (",
            "bad byte at offset ", bad, ")");
  GDN_CHECK(text.size() < (size_t{1} << 32), m.path, ": text too long to encode at once (",
            text.size(), " bytes)");
  // Per-thread buffers (pretokenize_and_encode has its own).
  thread_local std::vector<tokjson::Segment> raw, normalized;
  thread_local std::string norm;
  raw.clear();
  if (m.raw_matcher) {
    m.raw_matcher->split(text, raw);
  } else {
    raw.push_back({0, static_cast<uint32_t>(text.size()), -1});
  }
  for (const tokjson::Segment& s : raw) {
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    if (s.end == s.start) continue;
    std::string_view piece = text.substr(s.start, s.end - s.start);
    // Bytes standing for the input's first character (Metaspace prepend_scheme "first").
    uint32_t head0 =
        s.start == 0 ? static_cast<uint32_t>(tokjson::utf8_len(static_cast<uint8_t>(text[0]))) : 0;
    if (m.normalizer) {
      m.normalizer->normalize(piece, norm, head0);
      piece = norm;
    }
    if (piece.empty()) continue;
    if (!m.normalized_matcher) {
      m.pretokenize_and_encode(piece, head0, out);
      continue;
    }
    normalized.clear();
    m.normalized_matcher->split(piece, normalized);
    for (const tokjson::Segment& n : normalized) {
      if (n.id >= 0) {
        out.push_back(n.id);
      } else if (n.end > n.start) {
        uint32_t h = head0 > n.start ? head0 - n.start : 0;
        m.pretokenize_and_encode(piece.substr(n.start, n.end - n.start), h, out);
      }
    }
  }
}

std::string JsonTokenizer::decode(const std::vector<int32_t>& ids) const {
  const Impl& m = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    GDN_CHECK(id >= 0 && id < m.vocab_size, m.path, ": cannot decode id ", id, " (vocabulary size ",
              m.vocab_size, ")");
    auto dec = m.added_decode.find(id);
    if (dec != m.added_decode.end()) {
      tokens.push_back(dec->second);
      continue;
    }
    auto content = m.added_content.find(id);
    if (content != m.added_content.end()) {
      tokens.push_back(content->second);
      continue;
    }
    if (const std::string* s = m.model->id_to_token(id)) tokens.push_back(*s);
  }
  std::string text;
  if (m.decoder) {
    m.decoder->decode_chain(tokens);
    for (const std::string& t : tokens) text += t;
  } else {
    for (size_t k = 0; k < tokens.size(); ++k) text += (k ? " " : "") + tokens[k];
  }
  return text;
}

std::string JsonTokenizer::save(const std::string& dir) const {
  namespace fs = std::filesystem;
  GDN_CHECK(fs::is_directory(dir), "cannot save tokenizer.json: ", dir, " is not a directory");
  std::string final_path = (fs::path(dir) / "tokenizer.json").string();
  std::string tmp = final_path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    GDN_CHECK(f, "cannot write ", tmp);
    f.write(impl_->bytes.data(), static_cast<std::streamsize>(impl_->bytes.size()));
    f.flush();
    GDN_CHECK(f.good(), "cannot write ", tmp);
  }
  std::error_code ec;
  fs::rename(tmp, final_path, ec);
  if (ec) {
    fs::remove(tmp);
    GDN_FAIL("cannot rename ", tmp, " to ", final_path, ": ", ec.message());
  }
  return final_path;
}

void JsonTokenizer::encode_batch(const std::vector<std::string_view>& docs,
                                 std::vector<std::vector<int32_t>>& out, int threads) const {
  out.assign(docs.size(), {});
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<size_t>(static_cast<size_t>(threads), docs.size()));
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  auto work = [&]() {
    try {
      for (size_t i; !failed && (i = next.fetch_add(1)) < docs.size();) {
        encode_append(docs[i], out[i]);
      }
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  };
  if (threads <= 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(work);
    for (auto& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);
}

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path) {
  return std::make_unique<JsonTokenizer>(path);
}

}  // namespace gdn::data
