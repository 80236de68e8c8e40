/* cpu_dot_avxvnni.c: the 256-bit kernels with AVX-VNNI (the VEX-encoded
 * vpdpbusd of CPUs without AVX-512, e.g. Alder Lake): cpu_dot_x86.h with
 * CPU_X86_VNNI. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CPU_X86_TARGET "avx2,fma,f16c,avxvnni"
#define CPU_X86_VNNI 1
#define CPU_X86_FILL cpu_kernels_fill_avxvnni
#include "cpu_dot_x86.h"
#endif
