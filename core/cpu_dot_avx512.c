/* cpu_dot_avx512.c: the 512-bit kernels for x86-64 with AVX-512 F/BW/VL/DQ
 * (cpu_dot_x512.h; u8 x s8 products through vpmaddubsw + vpmaddwd). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CPU_X86_TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"
#define CPU_X86_FILL cpu_kernels_fill_avx512
#include "cpu_dot_x512.h"
#endif
