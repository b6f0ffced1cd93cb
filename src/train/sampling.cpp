// Sampling: sort the candidates once by (logit desc, id asc); top-k and top-p are then prefixes
// of that order, and the draw walks the kept prefix's cumulative mass.
#include "src/train/sampling.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels/philox.h"
#include "src/core/error.h"
#include "src/ops/ops.h"

namespace gdn::train {

namespace {

void check_logits(const std::vector<double>& z) {
  GDN_CHECK(!z.empty(), "sampling: empty logits");
  bool any_finite = false;
  for (size_t i = 0; i < z.size(); ++i) {
    GDN_CHECK(!std::isnan(z[i]), "sampling: logit ", i, " is NaN");
    GDN_CHECK(z[i] != std::numeric_limits<double>::infinity(), "sampling: logit ", i, " is +inf");
    any_finite = any_finite || std::isfinite(z[i]);
  }
  GDN_CHECK(any_finite, "sampling: every logit is -inf");
}

// Lowest id among the maxima.
int64_t argmax(const std::vector<double>& z) {
  int64_t best = 0;
  for (int64_t i = 1; i < int64_t(z.size()); ++i)
    if (z[size_t(i)] > z[size_t(best)]) best = i;
  return best;
}

// The kept token ids, most likely first, and their unnormalised probabilities.
struct Candidates {
  std::vector<int64_t> ids;
  std::vector<double> weights;
  double total = 0;
};

Candidates candidates(const std::vector<double>& z, const SamplingOptions& o) {
  const int64_t V = int64_t(z.size());
  const double zmax = z[size_t(argmax(z))];
  Candidates c;
  // Tokens at -inf have probability 0: never candidates, so top-k cannot pick them.
  for (int64_t i = 0; i < V; ++i)
    if (std::isfinite(z[size_t(i)])) c.ids.push_back(i);
  const auto more_likely = [&](int64_t a, int64_t b) {
    return z[size_t(a)] > z[size_t(b)] || (z[size_t(a)] == z[size_t(b)] && a < b);
  };
  const bool by_rank = o.top_k > 0 || o.top_p < 1.0;
  if (o.top_k > 0 && o.top_k < int64_t(c.ids.size())) {
    std::partial_sort(c.ids.begin(), c.ids.begin() + o.top_k, c.ids.end(), more_likely);
    c.ids.resize(size_t(o.top_k));
  } else if (by_rank) {
    std::sort(c.ids.begin(), c.ids.end(), more_likely);
  }
  // exp((z - zmax) / T) <= 1: no overflow at any temperature.
  c.weights.resize(c.ids.size());
  for (size_t j = 0; j < c.ids.size(); ++j) {
    c.weights[j] = std::exp((z[size_t(c.ids[j])] - zmax) / o.temperature);
    c.total += c.weights[j];
  }
  if (o.top_p < 1.0) {
    // Smallest prefix whose mass reaches top_p of the (top-k) mass; at least one token.
    const double target = o.top_p * c.total;
    double mass = 0;
    size_t keep = 0;
    while (keep < c.ids.size()) {
      mass += c.weights[keep++];
      if (mass >= target) break;
    }
    c.ids.resize(keep);
    c.weights.resize(keep);
    c.total = mass;
  }
  return c;
}

}  // namespace

void validate(const SamplingOptions& o) {
  GDN_CHECK(std::isfinite(o.temperature) && o.temperature >= 0,
            "sampling: temperature must be finite and >= 0 (0 = greedy), got ", o.temperature);
  GDN_CHECK(o.top_k >= 0, "sampling: top_k must be >= 0 (0 = all tokens), got ", o.top_k);
  GDN_CHECK(o.top_p > 0 && o.top_p <= 1, "sampling: top_p must be in (0, 1] (1 = off), got ",
            o.top_p);
}

std::vector<double> sampling_probs(const std::vector<double>& logits, const SamplingOptions& o) {
  validate(o);
  check_logits(logits);
  std::vector<double> p(logits.size(), 0.0);
  if (o.temperature == 0) {
    p[size_t(argmax(logits))] = 1.0;
    return p;
  }
  const Candidates c = candidates(logits, o);
  for (size_t j = 0; j < c.ids.size(); ++j) p[size_t(c.ids[j])] = c.weights[j] / c.total;
  return p;
}

int64_t sample_token(const std::vector<double>& logits, const SamplingOptions& o, uint64_t seed,
                     uint64_t counter) {
  validate(o);
  check_logits(logits);
  if (o.temperature == 0) return argmax(logits);
  const Candidates c = candidates(logits, o);
  const double u = kern::philox_uniform(counter, seed) * c.total;
  double mass = 0;
  for (size_t j = 0; j < c.ids.size(); ++j) {
    mass += c.weights[j];
    if (u < mass) return c.ids[j];
  }
  return c.ids.back();  // u within rounding of the total
}

int64_t sample_token(const Tensor& logits, const SamplingOptions& o, uint64_t seed,
                     uint64_t counter) {
  GDN_CHECK(logits.defined(), "sample_token: undefined logits");
  GDN_CHECK(is_floating(logits.dtype()), "sample_token: logits must be a float tensor, got ",
            logits.str());
  GDN_CHECK(logits.dim() >= 1 && logits.numel() == logits.size(-1),
            "sample_token: logits must be [V] or [1, ..., 1, V] (one row), got ",
            shape_str(logits.shape()));
  return sample_token(logits.to_vector(), o, seed, counter);
}

GenerateStats generate_text(const nn::CausalLM& model, const data::Tokenizer& tok,
                            const std::string& prompt, const GenerateOptions& options,
                            const std::function<void(std::string_view)>& out) {
  validate(options.sampling);
  GDN_CHECK(options.max_tokens >= 0, "generate: max_tokens must be >= 0, got ", options.max_tokens);
  GDN_CHECK(tok.vocab_size() <= model.cfg.vocab_size, "the tokenizer has ", tok.vocab_size(),
            " ids but the model's vocab_size is ", model.cfg.vocab_size);
  autograd::NoGradGuard no_grad;
  const Device dev = model.lm_head_weight().device();
  GenerateStats stats;
  std::vector<int32_t> ids = tok.encode(prompt);
  if (ids.empty()) ids.push_back(int32_t(tok.bos_id() >= 0 ? tok.bos_id() : 0));
  stats.prompt_tokens = int64_t(ids.size());
  char last = prompt.empty() ? '\n' : prompt.back();
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    out(std::string_view(text.data(), text.size()));
    last = text.back();
  };
  emit(prompt);
  std::vector<nn::LayerState> states(model.model->layers.size());
  auto to_tensor = [&](const std::vector<int32_t>& v) {
    std::vector<double> d(v.begin(), v.end());
    return ops::from_vector(d, {1, int64_t(v.size())}, DType::int64, dev);
  };
  const auto t0 = std::chrono::steady_clock::now();
  Tensor logits = model.step(to_tensor(ids), states);  // the prompt at once
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<int32_t> pending;  // tokens not yet written (a UTF-8 character may span several)
  for (; stats.generated < options.max_tokens; ++stats.generated) {
    // Only ids the tokenizer has: rows past its vocabulary pad the embedding and mean no text.
    std::vector<double> z = logits.to_vector();
    z.resize(size_t(tok.vocab_size()));
    const int64_t next = sample_token(z, options.sampling, options.seed, uint64_t(stats.generated));
    stats.ids.push_back(int32_t(next));
    if (next == tok.eos_id()) {
      if (!options.reset_on_eos) break;
      // A new document: fresh states (null = fresh), then the eos as its first input.
      stats.resets.push_back(stats.generated);
      states = std::vector<nn::LayerState>(model.model->layers.size());
      if (stats.generated + 1 < options.max_tokens)
        logits = model.step(to_tensor({int32_t(next)}), states);
      continue;
    }
    pending.push_back(int32_t(next));
    const std::string text = tok.decode(pending);
    // Four tokens cover any character; past that the bytes are not UTF-8 and go out as they are.
    // A decoder that replaces a cut character (tokenizer.json's) ends the text in U+FFFD instead.
    const bool cut = text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0;
    if ((data::is_valid_utf8(text, nullptr) && !cut) || pending.size() >= 4) {
      emit(text);
      pending.clear();
    }
    if (stats.generated + 1 < options.max_tokens)
      logits = model.step(to_tensor({int32_t(next)}), states);
  }
  if (!pending.empty()) emit(tok.decode(pending));
  if (last != '\n') emit("\n");
  const auto t2 = std::chrono::steady_clock::now();
  stats.prompt_s = std::chrono::duration<double>(t1 - t0).count();
  stats.generate_s = std::chrono::duration<double>(t2 - t1).count();
  return stats;
}

}  // namespace gdn::train
