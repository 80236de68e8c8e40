/* cpu_dot_avx2.c: the 256-bit kernels for x86-64 with AVX2, FMA and F16C
 * (cpu_dot_x86.h; u8 x s8 products through vpmaddubsw + vpmaddwd). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CPU_X86_TARGET "avx2,fma,f16c"
#define CPU_X86_FILL cpu_kernels_fill_avx2
#include "cpu_dot_x86.h"
#endif
