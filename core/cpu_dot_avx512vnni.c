/* cpu_dot_avx512vnni.c: the 512-bit kernels with AVX-512 VNNI (vpdpbusd,
 * vpdpwssd): cpu_dot_x512.h with CPU_X86_VNNI. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CPU_X86_TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#define CPU_X86_VNNI 1
#define CPU_X86_FILL cpu_kernels_fill_avx512vnni
#include "cpu_dot_x512.h"
#endif
