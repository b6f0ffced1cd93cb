// Softmax attention layer. Init as fla: every projection N(0, initializer_range), biases 0.
#include "layers/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "src/ops/attention.h"
#include "src/ops/rope.h"

namespace gdn::nn {

namespace {

// Queries of T new tokens at positions p0 + i over L keys at positions first + j (the cached
// keys, then the new ones): a query sees key j when first + j <= p0 + i and, with a window w,
// first + j > p0 + i - w. Composed ops (scores T x L): generation steps are short.
Tensor cached_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t p0,
                        int64_t first, int64_t window) {
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), D = q.size(3);
  const int64_t L = k.size(1), HKV = k.size(2), G = H / HKV;
  // GQA: kv head h / G serves query head h; repeat each kv head G times -> [B, L, H, D].
  auto per_query_head = [&](const Tensor& t) {
    return ops::reshape(ops::expand(ops::unsqueeze(t, 3), {B, L, HKV, G, D}), {B, L, H, D});
  };
  const Tensor qh = ops::permute(q, {0, 2, 1, 3});                  // [B, H, T, D]
  const Tensor kh = ops::permute(per_query_head(k), {0, 2, 3, 1});  // [B, H, D, L]
  const Tensor vh = ops::permute(per_query_head(v), {0, 2, 1, 3});  // [B, H, L, D]
  std::vector<double> mask(size_t(T * L), 0.0);                     // 0 where seen, -inf elsewhere
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < L; ++j) {
      const int64_t qpos = p0 + i, kpos = first + j;
      const bool seen = kpos <= qpos && (window == 0 || kpos > qpos - window);
      if (!seen) mask[size_t(i * L + j)] = -std::numeric_limits<double>::infinity();
    }
  // S = scale q k^T + mask, P = softmax_keys(S), o = P v
  Tensor s = ops::mul(ops::matmul(qh, kh), 1.0 / std::sqrt(double(D)));
  s = ops::add(s, ops::from_vector(mask, {T, L}, q.dtype()));
  const Tensor o = ops::matmul(ops::softmax(s, -1), vh);  // [B, H, T, D]
  return ops::permute(o, {0, 2, 1, 3});
}

}  // namespace

Attention::Attention(const ModelConfig& cfg, const AttentionConfig& a, const InitContext& ctx)
    : hidden_size_(cfg.hidden_size),
      num_heads_(a.num_heads),
      num_kv_heads_(a.kv_heads()),
      head_dim_(a.num_heads > 0 ? a.head_dim(cfg.hidden_size) : 0),
      window_(a.window_size),
      rope_theta_(a.rope_theta),
      impl_(cfg.attention_impl) {
  GDN_CHECK(num_heads_ > 0 && hidden_size_ % num_heads_ == 0, "attention: hidden_size ",
            hidden_size_, " must be a multiple of attn.num_heads ", num_heads_);
  GDN_CHECK(num_heads_ % num_kv_heads_ == 0, "attention: attn.num_heads ", num_heads_,
            " must be a multiple of attn.num_kv_heads ", num_kv_heads_);
  GDN_CHECK(head_dim_ % 2 == 0, "attention: head_dim = hidden_size / num_heads = ", head_dim_,
            " must be even (rotary embeddings rotate pairs)");
  GDN_CHECK(window_ >= 0, "attention: attn.window_size must be >= 1 or None, got ", window_);
  const int64_t d = hidden_size_, kv = num_kv_heads_ * head_dim_;
  q_proj = register_module("q_proj", std::make_shared<Linear>(d, d, a.qkv_bias, ctx));
  k_proj = register_module("k_proj", std::make_shared<Linear>(d, kv, a.qkv_bias, ctx));
  v_proj = register_module("v_proj", std::make_shared<Linear>(d, kv, a.qkv_bias, ctx));
  o_proj = register_module("o_proj", std::make_shared<Linear>(d, d, false, ctx));
}

void Attention::project(const Tensor& x, int64_t offset, const CuSeqlens& cu, Tensor& q, Tensor& k,
                        Tensor& v) const {
  GDN_CHECK(x.dim() == 3 && x.size(2) == hidden_size_, "Attention: input ", shape_str(x.shape()),
            " must be [B, T, ", hidden_size_, "]");
  const int64_t B = x.size(0), T = x.size(1);
  const ops::RopeOptions rope{rope_theta_, offset, cu};
  q = ops::rope(ops::reshape(q_proj->forward(x), {B, T, num_heads_, head_dim_}), rope);
  k = ops::rope(ops::reshape(k_proj->forward(x), {B, T, num_kv_heads_, head_dim_}), rope);
  v = ops::reshape(v_proj->forward(x), {B, T, num_kv_heads_, head_dim_});
}

Tensor Attention::output(const Tensor& o) const {
  return o_proj->forward(ops::reshape(o, {o.size(0), o.size(1), hidden_size_}));
}

Tensor Attention::forward(const Tensor& x, const CuSeqlens& cu_seqlens) const {
  ModuleScope scope(*this);
  Tensor q, k, v;
  project(x, 0, cu_seqlens, q, k, v);
  ops::AttentionOptions opt;
  opt.window = window_;
  opt.impl = impl_;
  opt.cu_seqlens = cu_seqlens;
  return output(ops::attention(q, k, v, opt));
}

Tensor Attention::forward_with_state(const Tensor& x, LayerState& state) const {
  if (!state) state = std::make_unique<AttentionState>();
  auto* s = dynamic_cast<AttentionState*>(state.get());
  GDN_CHECK(s, "Attention '", name(), "': the generation state belongs to another mixer");
  ModuleScope scope(*this);
  Tensor q, k, v;
  project(x, s->position, {}, q, k, v);
  const int64_t T = x.size(1), p0 = s->position;
  Tensor o;
  if (!s->k.defined()) {
    // Nothing cached: the first chunk (or window 1) is plain causal attention over itself.
    ops::AttentionOptions opt;
    opt.window = window_;
    opt.impl = impl_;
    o = ops::attention(q, k, v, opt);
  } else {
    GDN_CHECK(s->k.size(0) == x.size(0), "Attention '", name(), "': the KV cache has batch ",
              s->k.size(0), ", the input ", shape_str(x.shape()));
    const int64_t past = s->k.size(1);
    k = ops::concat({s->k, k}, 1);
    v = ops::concat({s->v, v}, 1);
    o = cached_attention(q, k, v, p0, p0 - past, window_);
  }
  // Keep what later tokens can see: all of it, or the last window - 1 tokens.
  const int64_t len = k.size(1), keep = window_ > 0 ? std::min(len, window_ - 1) : len;
  if (keep > 0) {
    s->k = ops::contiguous(ops::slice(k, 1, len - keep, len)).detach();
    s->v = ops::contiguous(ops::slice(v, 1, len - keep, len)).detach();
  } else {
    s->k = s->v = Tensor();
  }
  s->position = p0 + T;
  return output(o);
}

std::vector<int64_t> attention_layers(const ModelConfig& cfg) {
  std::vector<int64_t> layers;
  for (const AttentionConfig& a : cfg.attn)
    layers.insert(layers.end(), a.layers.begin(), a.layers.end());
  return layers;
}

std::shared_ptr<TokenMixer> make_attention(const ModelConfig& cfg, int64_t layer,
                                           const InitContext& ctx) {
  const AttentionConfig* a = cfg.attention_of(layer);
  GDN_CHECK(a, "attention: layer ", layer, " is in no attn entry of the model config");
  return std::make_shared<Attention>(cfg, *a, ctx);
}

int64_t attention_num_parameters(const ModelConfig& cfg, int64_t layer) {
  const AttentionConfig* a = cfg.attention_of(layer);
  GDN_CHECK(a, "attention: layer ", layer, " is in no attn entry of the model config");
  const int64_t d = cfg.hidden_size, kv = a->kv_heads() * a->head_dim(d);
  int64_t n = d * d + 2 * kv * d + d * d;  // q k v o weights
  if (a->qkv_bias) n += d + 2 * kv;
  return n;
}

// Projections: 2 FLOPs per weight per token forward, twice that backward (x3). Attention as
// flash-attention counts it: per head and visible (query, key) pair, S = q k and P v cost
// 2 * 2 * D forward, and the backward 2.5x that. Visible keys per query, averaged over the
// sequence: T / 2 for full causal (flash-attention's halving); with a window w < T, each query
// sees min(t + 1, w) keys, on average w - w^2 / (2T) (-> w for T >> w; = T / 2 at w = T).
double attention_train_flops_per_token(const ModelConfig& cfg, int64_t layer, int64_t seq_len) {
  const AttentionConfig* a = cfg.attention_of(layer);
  GDN_CHECK(a, "attention: layer ", layer, " is in no attn entry of the model config");
  const double d = double(cfg.hidden_size), hd = double(a->head_dim(cfg.hidden_size));
  const double kv = double(a->kv_heads()) * hd;
  const double linear = d * d + 2 * kv * d + d * d;
  const double T = double(seq_len);
  const double w = a->window_size > 0 ? std::min(T, double(a->window_size)) : T;
  const double keys_per_query = w - w * w / (2.0 * T);
  const double forward = double(a->num_heads) * 4.0 * keys_per_query * hd;
  return 6.0 * linear + forward * (1.0 + 2.5);
}

}  // namespace gdn::nn
