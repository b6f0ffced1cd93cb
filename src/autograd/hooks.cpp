// The gradient-ready hook registry: leaf TensorImpl -> hooks, behind a mutex (hooks are added
// and removed from the trainer's thread, run from the backward's).
#include "src/autograd/hooks.h"

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gdn::autograd {

namespace {

struct Registry {
  std::mutex mu;
  uint64_t next_id = 1;
  std::unordered_map<const TensorImpl*, std::vector<std::pair<uint64_t, GradReadyHook>>> hooks;
  std::unordered_map<uint64_t, const TensorImpl*> owner;
  std::atomic<size_t> count{0};
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: handles may outlive static teardown
  return *r;
}

}  // namespace

uint64_t add_grad_ready_hook(const Tensor& leaf, GradReadyHook hook) {
  GDN_CHECK(leaf.defined() && leaf.is_leaf(), "add_grad_ready_hook: needs a leaf tensor");
  GDN_CHECK(bool(hook), "add_grad_ready_hook: empty hook");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const uint64_t id = r.next_id++;
  const TensorImpl* key = leaf.impl_ptr().get();
  r.hooks[key].emplace_back(id, std::move(hook));
  r.owner[id] = key;
  r.count++;
  return id;
}

void remove_grad_ready_hook(uint64_t id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.owner.find(id);
  if (it == r.owner.end()) return;
  auto& list = r.hooks[it->second];
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i].first == id) {
      list.erase(list.begin() + long(i));
      break;
    }
  if (list.empty()) r.hooks.erase(it->second);
  r.owner.erase(it);
  r.count--;
}

namespace detail {

bool any_grad_ready_hooks() {
  return registry().count.load() > 0;
}

void run_grad_ready_hooks(const TensorImpl* leaf) {
  std::vector<GradReadyHook> todo;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.hooks.find(leaf);
    if (it == r.hooks.end()) return;
    for (auto& [id, h] : it->second) todo.push_back(h);
  }
  for (auto& h : todo) h();  // outside the lock: a hook may add or remove hooks
}

}  // namespace detail

}  // namespace gdn::autograd
