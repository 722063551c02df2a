#ifndef FOLIO_SCHEDULER_REQUEST_QUEUE_H_
#define FOLIO_SCHEDULER_REQUEST_QUEUE_H_

#include <algorithm>
#include <cstddef>
#include <deque>

#include "scheduler/request.h"

namespace folio {

// Requests kept in scheduling order: most important first. Under FCFS that
// is arrival order; under the priority policy (priority, arrival). A
// recompute-preempted request re-enters at its own place, which is ahead of
// everything that arrived after it.
class RequestQueue {
 public:
  explicit RequestQueue(bool by_priority) : by_priority_(by_priority) {}

  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  Request* front() const { return items_.front(); }
  Request* back() const { return items_.back(); }
  Request* operator[](size_t i) const { return items_[i]; }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

  // O(1) for the common case of a newest arrival; O(n) otherwise.
  void Insert(Request* request) {
    auto pos = items_.end();
    while (pos != items_.begin() && Before(request, *(pos - 1))) --pos;
    items_.insert(pos, request);
  }
  void PopFront() { items_.pop_front(); }
  void PopBack() { items_.pop_back(); }
  bool Remove(const Request* request) {
    auto it = std::find(items_.begin(), items_.end(), request);
    if (it == items_.end()) return false;
    items_.erase(it);
    return true;
  }

  // True when a should be scheduled before b (and preempted after it).
  bool Before(const Request* a, const Request* b) const {
    if (by_priority_ && a->spec.priority != b->spec.priority) {
      return a->spec.priority < b->spec.priority;
    }
    return a->arrival < b->arrival;
  }

 private:
  const bool by_priority_;
  std::deque<Request*> items_;
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_REQUEST_QUEUE_H_
