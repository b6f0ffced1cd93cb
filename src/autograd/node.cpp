// Nodes, grad mode, scopes and recording.
#include "src/autograd/node.h"

#include <atomic>
#include <unordered_set>

namespace gdn::autograd {

namespace {
thread_local bool t_grad_enabled = true;
thread_local std::string t_scope;
std::atomic<uint64_t> g_sequence{0};
}  // namespace

Node::~Node() {
  release();
  // Destroy long chains iteratively: a recursive destructor would overflow the stack on the
  // graphs of long sequential programs.
  std::vector<std::shared_ptr<Node>> stack;
  for (auto& e : inputs)
    if (e.node) stack.push_back(std::move(e.node));
  inputs.clear();
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    if (n.use_count() == 1) {
      for (auto& e : n->inputs)
        if (e.node) stack.push_back(std::move(e.node));
      n->inputs.clear();
    }
  }
}

int64_t Node::saved_bytes() const {
  std::unordered_set<const Storage*> seen;
  int64_t total = 0;
  for (const Tensor& t : saved) {
    if (!t.defined()) continue;
    const Storage* s = t.storage().get();
    if (seen.insert(s).second) total += int64_t(s->bytes());
  }
  return total;
}

void Node::release() {
  for (Tensor& t : saved)
    if (t.defined()) t.storage()->unmark_saved();
  saved.clear();
  backward = nullptr;
}

bool grad_enabled() {
  return t_grad_enabled;
}
NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) {
  t_grad_enabled = false;
}
NoGradGuard::~NoGradGuard() {
  t_grad_enabled = previous_;
}
EnableGradGuard::EnableGradGuard() : previous_(t_grad_enabled) {
  t_grad_enabled = true;
}
EnableGradGuard::~EnableGradGuard() {
  t_grad_enabled = previous_;
}

const std::string& current_scope() {
  return t_scope;
}
ScopeGuard::ScopeGuard(const std::string& name) : previous_length_(t_scope.size()) {
  if (!t_scope.empty() && !name.empty()) t_scope += '.';
  t_scope += name;
}
ScopeGuard::~ScopeGuard() {
  t_scope.resize(previous_length_);
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!t_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void record(const char* op, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
            std::vector<Tensor> saved, BackwardFn backward) {
  if (!needs_grad(inputs)) return;
  auto node = std::make_shared<Node>();
  node->op = op;
  node->scope = t_scope;
  node->sequence = g_sequence++;
  node->inputs.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    Edge e;
    if (t.defined() && t.requires_grad()) {
      if (t.grad_fn()) {
        e.node = t.grad_fn();
        e.output_nr = t.impl().output_nr;
      } else {
        e.leaf = t.impl_ptr();
      }
    }
    node->inputs.push_back(std::move(e));
  }
  for (Tensor& t : saved)
    if (t.defined()) t.storage()->mark_saved();
  node->saved = std::move(saved);
  node->backward = std::move(backward);
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = outputs[i];
    node->output_shapes.push_back(out.shape());
    node->output_dtypes.push_back(out.dtype());
    // Outputs get their own impl so that an output aliasing an input (a view) keeps the input's
    // history intact.
    auto impl = std::make_shared<TensorImpl>(out.impl());
    impl->requires_grad = true;
    impl->grad.reset();
    impl->grad_fn = node;
    impl->output_nr = int(i);
    out = Tensor(impl);
  }
}

std::vector<std::shared_ptr<Node>> collect_graph(const std::vector<Tensor>& roots) {
  std::vector<std::shared_ptr<Node>> out, stack;
  std::unordered_set<Node*> seen;
  for (const Tensor& r : roots)
    if (r.defined() && r.grad_fn() && seen.insert(r.grad_fn().get()).second)
      stack.push_back(r.grad_fn());
  while (!stack.empty()) {
    auto n = stack.back();
    stack.pop_back();
    out.push_back(n);
    for (const Edge& e : n->inputs)
      if (e.node && seen.insert(e.node.get()).second) stack.push_back(e.node);
  }
  return out;
}

}  // namespace gdn::autograd
