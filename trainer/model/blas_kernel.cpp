// OpenBLAS's kernel for this CPU. A DYNAMIC_ARCH OpenBLAS picks its kernels by CPU model when it
// loads; releases before 0.3.25 (Debian bookworm ships 0.3.21) fall back to Prescott's SSE3
// kernels for an Intel model they do not know (OpenBLAS issue 4267, fixed by PR 4268), which
// made the trainer 3-4x slower on an AVX-512 Xeon (model 207). The choice is read only at load,
// from OPENBLAS_CORETYPE, so correcting it means starting the program again with that set.
#include <cblas.h>
#include <strings.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "model/gpt_model.hpp"

namespace gpt {

std::string blas_kernel() { return openblas_get_corename(); }

const char* blas_kernel_for(const char* chosen, const CpuFeatures& cpu) {
  if (chosen == nullptr || strcasecmp(chosen, "Prescott") != 0) return nullptr;
  if (cpu.avx512f && cpu.avx512bw && cpu.avx512dq && cpu.avx512vl) return "SkylakeX";
  if (cpu.avx2 && cpu.fma) return "Haswell";
  if (cpu.avx) return "Sandybridge";
  return nullptr;  // Prescott is right for a CPU without AVX
}

void use_best_blas_kernel(char** argv) {
#if defined(__x86_64__)  // OpenBLAS's Prescott fallback and these features are x86's
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user's, or already chosen here
  __builtin_cpu_init();
  const CpuFeatures cpu{
      __builtin_cpu_supports("avx") != 0,      __builtin_cpu_supports("avx2") != 0,
      __builtin_cpu_supports("fma") != 0,      __builtin_cpu_supports("avx512f") != 0,
      __builtin_cpu_supports("avx512bw") != 0, __builtin_cpu_supports("avx512dq") != 0,
      __builtin_cpu_supports("avx512vl") != 0};
  const char* kernel = blas_kernel_for(openblas_get_corename(), cpu);
  if (kernel == nullptr) return;
  ::setenv("OPENBLAS_CORETYPE", kernel, 1);
  ::execv("/proc/self/exe", argv);
  // Still here: run on, slower, and say why.
  std::fprintf(stderr,
               "strata: OpenBLAS chose Prescott on a CPU that runs %s; restarting with "
               "OPENBLAS_CORETYPE=%s failed (%s)\n",
               kernel, kernel, std::strerror(errno));
  ::unsetenv("OPENBLAS_CORETYPE");
#else
  (void)argv;
#endif
}

}  // namespace gpt
