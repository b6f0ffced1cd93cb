// Next-token sampling for generation: temperature, top-k and top-p (nucleus), applied in that
// order as Hugging Face does. Computed in fp64 on the host (a [V] row is small next to the
// forward that produced it), and the one random draw is Philox(counter, key = seed), so a
// generation is reproducible from (seed, counter) alone whatever the device or dtype. And the
// generation loop of `gdn generate`, through the recurrent state.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "layers/model.h"
#include "src/core/tensor.h"
#include "src/data/tokenizer.h"

namespace gdn::train {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy argmax (top_k and top_p are then irrelevant)
  int64_t top_k = 0;         // keep the k most likely tokens; 0 keeps all
  double top_p = 1.0;        // keep the smallest set of most likely tokens with mass >= top_p
};

// Throws naming the value: temperature finite and >= 0, top_k >= 0, top_p in (0, 1].
void validate(const SamplingOptions& options);

// The distribution sample_token draws from: softmax(logits / T) restricted to the top-k, then to
// the nucleus, renormalised; zeros elsewhere. Greedy (T = 0) gives a one-hot at the argmax.
// Ties are broken towards the lower id everywhere (argmax, the k-th place, the nucleus edge).
// logits may hold -inf (banned tokens) but not NaN, and not only -inf.
std::vector<double> sampling_probs(const std::vector<double>& logits,
                                   const SamplingOptions& options);

// One token id from logits of shape [V] or [1, ..., 1, V], any float dtype, any device.
int64_t sample_token(const Tensor& logits, const SamplingOptions& options, uint64_t seed,
                     uint64_t counter);
int64_t sample_token(const std::vector<double>& logits, const SamplingOptions& options,
                     uint64_t seed, uint64_t counter);

struct GenerateOptions {
  int64_t max_tokens = 200;
  SamplingOptions sampling;
  uint64_t seed = 0;
  // At the tokenizer's eos, go on with a new document instead of stopping: every layer's state
  // (delta-rule state and conv cache) restarts fresh, and the eos is the new document's first
  // input, as a model trained on packed documents (data.pack: documents) saw each document.
  bool reset_on_eos = false;
};
struct GenerateStats {
  int64_t prompt_tokens = 0, generated = 0;
  double prompt_s = 0, generate_s = 0;  // wall time of the prompt and of the new tokens
  std::vector<int64_t> resets;          // with reset_on_eos: the index of each generated eos
  std::vector<int32_t> ids;             // every sampled token, eos included
};

// Continues `prompt` with up to max_tokens tokens (fewer when the tokenizer's eos comes, unless
// reset_on_eos), one step of the recurrent state each; the eos itself is never written. Writes the
// prompt, then the new text to `out` as soon as it is whole UTF-8 (or 4 tokens could not make it
// so), as raw bytes: a generated NUL is written like any byte. The output ends with a newline (one
// is added when the text lacks it).
GenerateStats generate_text(const nn::CausalLM& model, const data::Tokenizer& tok,
                            const std::string& prompt, const GenerateOptions& options,
                            const std::function<void(std::string_view)>& out);

}  // namespace gdn::train
