// Which vector instructions this CPU runs, asked once: the kernels compile
// AVX-512 and AVX2 + FMA paths beside a portable one and pick at run time.
#pragma once

namespace folio::kernels::cpu {

#if defined(__x86_64__) && defined(__GNUC__)
inline bool HaveAvx2Fma() {
  static const bool have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return have;
}
inline bool HaveAvx512() {
  static const bool have = HaveAvx2Fma() && __builtin_cpu_supports("avx512f");
  return have;
}
#else
inline bool HaveAvx2Fma() { return false; }
inline bool HaveAvx512() { return false; }
#endif

}  // namespace folio::kernels::cpu
