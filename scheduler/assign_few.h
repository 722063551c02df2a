#ifndef FOLIO_SCHEDULER_ASSIGN_FEW_H_
#define FOLIO_SCHEDULER_ASSIGN_FEW_H_

namespace folio {

// `v.assign(first, last)`, cheaper for the one element a decode step
// carries: InlinedVector::assign costs ~40 instructions more than push_back.
template <typename Vec, typename It>
void AssignFew(Vec& v, It first, It last) {
  if (last - first == 1) {
    v.clear();
    v.push_back(*first);
  } else {
    v.assign(first, last);
  }
}

}  // namespace folio

#endif  // FOLIO_SCHEDULER_ASSIGN_FEW_H_
