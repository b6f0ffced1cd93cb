// Autograd: an eager tape of closures. Each differentiable op records a Node holding its saved
// tensors and a backward closure; Edges point at the nodes (or leaf tensors) of its inputs.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "src/core/tensor.h"

namespace gdn::autograd {

struct Node;

struct Edge {
  std::shared_ptr<Node> node;        // producer of this input, or
  std::shared_ptr<TensorImpl> leaf;  // a leaf that requires grad (accumulates .grad)
  int output_nr = 0;
  bool valid() const { return node || leaf; }
};

// grads of the outputs (undefined where an output got no gradient) and the saved tensors ->
// grads of the inputs (undefined where not needed).
using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs,
                                                     const std::vector<Tensor>& saved)>;

struct Node {
  std::string op;     // op kind, e.g. "matmul"
  std::string scope;  // module path active when it was recorded, e.g. "model.layers.0.attn"
  std::vector<Edge> inputs;
  std::vector<Shape> output_shapes;
  std::vector<DType> output_dtypes;
  std::vector<Tensor> saved;
  BackwardFn backward;
  uint64_t sequence = 0;  // creation order; later nodes run first among ready ones

  ~Node();
  // Bytes of the distinct storages this node keeps alive for backward.
  int64_t saved_bytes() const;
  // Drops the saved tensors and the closure (after backward ran).
  void release();
};

// Grad mode (thread-local): when off, ops record nothing.
bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};
class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();

 private:
  bool previous_;
};

// Module scope (thread-local) stamped on nodes, for per-layer memory reports.
const std::string& current_scope();
class ScopeGuard {
 public:
  explicit ScopeGuard(const std::string& name);  // appends ".name" to the current scope
  ~ScopeGuard();
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  size_t previous_length_;
};

// Whether any of these tensors requires grad (and grad mode is on).
bool needs_grad(const std::vector<Tensor>& inputs);

// Records `op` producing `outputs` from `inputs`: if needs_grad(inputs), creates the node, marks
// the saved tensors, and makes the outputs require grad with this node as grad_fn.
void record(const char* op, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
            std::vector<Tensor> saved, BackwardFn backward);
inline void record(const char* op, const std::vector<Tensor>& inputs, Tensor& output,
                   std::vector<Tensor> saved, BackwardFn backward) {
  std::vector<Tensor> outs{output};
  record(op, inputs, outs, std::move(saved), std::move(backward));
  output = outs[0];
}

// Runs the backward pass from `roots` seeded with `grads`.
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                  bool retain_graph);

// Every node reachable from `roots` (each once), for memory reports.
std::vector<std::shared_ptr<Node>> collect_graph(const std::vector<Tensor>& roots);

}  // namespace gdn::autograd
