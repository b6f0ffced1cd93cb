// The backward engine: dependency counting over the graph reachable from the roots, then nodes
// in reverse creation order as they become ready, accumulating gradients per (node, output).
// Saved tensors are released as soon as a node has run, so backward frees memory as it goes.
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>

#include "kernels/trace_events.h"
#include "src/autograd/hooks.h"
#include "src/autograd/node.h"
#include "src/ops/ops.h"

namespace gdn::autograd {

namespace {

// t is the whole of a buffer nothing else holds: it may be written in place or adopted.
// `holders`: the references to t's tensor the caller knows of. One more is someone else's (add's
// backward hands one gradient tensor to both inputs; a caller may keep the gradient it passed).
bool sole_owner(const Tensor& t, long holders) {
  return t.impl_ptr().use_count() == holders && t.is_contiguous() && t.offset() == 0 &&
         t.storage().use_count() == 1 && t.storage()->bytes() == t.nbytes();
}

// slot += g. In place when slot owns its buffer alone (a gradient produced for this slot): the
// sum then reuses a buffer in cache instead of writing a fresh one; the same bits either way.
void accumulate(Tensor& slot, const Tensor& g) {
  if (!slot.defined()) {
    slot = g;
  } else if (sole_owner(slot, 1) && slot.shape() == g.shape() && slot.dtype() == g.dtype()) {
    ops::add_(slot, g);
  } else {
    slot = ops::add(slot, g);
  }
}

void accumulate_leaf(TensorImpl& leaf, const Tensor& g) {
  GDN_CHECK(g.shape() == leaf.shape, "gradient of shape ", shape_str(g.shape()),
            " for a leaf of shape ", shape_str(leaf.shape));
  Tensor grad = g.dtype() == leaf.dtype ? g : ops::cast(g, leaf.dtype);
  if (!leaf.grad) {
    // Adopt the buffer when nothing else uses it (held by the caller's g and this copy, or a
    // fresh cast); otherwise copy into a fresh grad buffer.
    const bool adoptable =
        sole_owner(grad, grad.same(g) ? 2 : 1) && grad.storage()->category() == MemCategory::temp;
    if (adoptable) {
      grad.storage()->set_category(MemCategory::grad);
      leaf.grad = std::make_shared<TensorImpl>(grad.impl());
    } else {
      MemoryCategoryScope cat(MemCategory::grad);
      leaf.grad = ops::contiguous_copy(grad).impl_ptr();
    }
    leaf.grad->requires_grad = false;
    leaf.grad->grad_fn.reset();
  } else {
    Tensor existing(leaf.grad);
    ops::add_(existing, grad);
  }
}

}  // namespace

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                  bool retain_graph) {
  GDN_CHECK(roots.size() == grads.size(), "backward: ", roots.size(), " roots but ", grads.size(),
            " gradients");
  NoGradGuard no_grad;
  auto nodes = collect_graph(roots);
  std::unordered_map<Node*, int> deps;
  for (auto& n : nodes)
    for (const Edge& e : n->inputs)
      if (e.node) deps[e.node.get()]++;
  std::unordered_map<Node*, std::vector<Tensor>> pending;
  for (auto& n : nodes) pending[n.get()].resize(n->output_shapes.size());
  // Gradient-ready hooks (hooks.h): the uses of each leaf still to deliver in this pass.
  std::unordered_map<const TensorImpl*, int> leaf_uses;
  const bool hooks = detail::any_grad_ready_hooks();
  if (hooks)
    for (auto& n : nodes)
      for (const Edge& e : n->inputs)
        if (e.leaf) leaf_uses[e.leaf.get()]++;
  if (hooks)
    for (const Tensor& r : roots)
      if (r.defined() && !r.grad_fn()) leaf_uses[r.impl_ptr().get()]++;
  auto leaf_done = [&](const TensorImpl* leaf) {
    if (hooks && --leaf_uses[leaf] <= 0) detail::run_grad_ready_hooks(leaf);
  };

  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    GDN_CHECK(r.requires_grad(), "backward() on a tensor that does not require grad");
    GDN_CHECK(grads[i].shape() == r.shape(), "backward: gradient of shape ",
              shape_str(grads[i].shape()), " for a root of shape ", shape_str(r.shape()));
    if (r.grad_fn())
      accumulate(pending[r.grad_fn().get()][r.impl().output_nr], grads[i]);
    else {
      accumulate_leaf(r.impl(), grads[i]);
      leaf_done(r.impl_ptr().get());
    }
  }

  auto later_first = [](const Node* a, const Node* b) { return a->sequence < b->sequence; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
  for (auto& n : nodes)
    if (deps[n.get()] == 0) ready.push(n.get());

  // Trace: consecutive nodes of one module under one span of its path, each node a span.
  std::unique_ptr<trace::Span> module_span;
  std::string module_scope;
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    GDN_CHECK(node->backward, "backward through the graph of '", node->op,
              "' a second time: its saved tensors were freed (use retain_graph)");
    if (trace::capturing() && (!module_span || node->scope != module_scope)) {
      module_span.reset();
      module_scope = node->scope;
      module_span = std::make_unique<trace::Span>("module", module_scope + " (backward)");
    }
    trace::Span node_span("backward", node->op);
    std::vector<Tensor> outs = node->backward(pending[node], node->saved);
    pending.erase(node);
    GDN_CHECK(outs.size() == node->inputs.size(), "backward of '", node->op, "' returned ",
              outs.size(), " gradients for ", node->inputs.size(), " inputs");
    for (size_t i = 0; i < outs.size(); ++i) {
      const Edge& e = node->inputs[i];
      if (e.node) {
        if (outs[i].defined()) {
          const Shape& want = e.node->output_shapes[e.output_nr];
          GDN_CHECK(outs[i].shape() == want, "backward of '", node->op, "': gradient ", i,
                    " has shape ", shape_str(outs[i].shape()), ", input has ", shape_str(want));
          DType want_dtype = e.node->output_dtypes[e.output_nr];
          Tensor g = outs[i].dtype() == want_dtype ? outs[i] : ops::cast(outs[i], want_dtype);
          accumulate(pending[e.node.get()][e.output_nr], g);
        }
        if (--deps[e.node.get()] == 0) ready.push(e.node.get());
      } else if (e.leaf) {
        if (outs[i].defined()) accumulate_leaf(*e.leaf, outs[i]);
        leaf_done(e.leaf.get());
      }
    }
    if (!retain_graph) node->release();
  }
}

}  // namespace gdn::autograd
