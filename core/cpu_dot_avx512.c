/* cpu_dot_avx512.c: placeholder until the 512-bit kernels: the AVX2 set. */
#include "cpu_kernels.h"
void cpu_kernels_fill_avx512(cpu_kernels *k) { (void)k; }
void cpu_kernels_fill_avx512vnni(cpu_kernels *k) { (void)k; }
