// Weight-decay parameter groups by name, following the fla / Hugging Face convention:
// no weight decay on
//   - norm weights:   names containing "norm" (attn_norm, mlp_norm, o_norm, model.norm, ...)
//   - biases:         names ending in ".bias" (or named "bias")
//   - the GDN decay parameters "A_log" and "dt_bias" (fla marks them _no_weight_decay)
//   - embeddings, only when decay_embeddings is false: names containing "embed"
//     ("model.embeddings.weight", "embed_tokens").
// Everything else decays (projections, convolutions, lm_head). decay_embeddings defaults to
// true because that is what the Hugging Face Trainer does (it exempts only biases and norm
// layers) and what nanoGPT does (it decays every >= 2-d tensor, embeddings included); fla's
// flame trainer (built on torchtitan) hands all parameters to a single optimizer group.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "optim/optimizer.h"

namespace gdn::optim {

using NamedParams = std::vector<std::pair<std::string, Tensor>>;

// Whether the parameter with this name gets weight decay under the rules above.
bool decays(const std::string& name, bool decay_embeddings = true);

// Two groups, always in this order (either may be empty): [0] the decayed parameters with
// `weight_decay`, [1] the others with 0. Parameters that do not require grad are left out
// (frozen), and a tensor listed twice (tied weights) is kept once, under its first name.
std::vector<ParamGroup> build_param_groups(const NamedParams& named, double weight_decay,
                                           bool decay_embeddings = true);

}  // namespace gdn::optim
