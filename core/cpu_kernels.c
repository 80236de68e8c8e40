/* cpu_kernels.c: which kernel sets this CPU runs, and the tables, built once.
 *
 * Detection reads cpuid through the compiler's builtins (which also check
 * that the OS saves the wide registers); F16C and AVX-VNNI (the VEX form,
 * on CPUs such as Alder Lake that have no AVX-512) are read from cpuid
 * directly, as clang 14's builtin does not know them. */
#include "cpu_kernels.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CPU_X86 1
#include <cpuid.h>
#endif

static const char *const isa_names[CPU_ISA_COUNT] = {"portable", "avx2", "avxvnni", "avx512", "avx512vnni"};

const char *cpu_isa_name(cpu_isa isa)
{
    return isa < CPU_ISA_COUNT ? isa_names[isa] : "?";
}

static bool available[CPU_ISA_COUNT];
static cpu_kernels sets[CPU_ISA_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

#ifdef CPU_X86
static bool has_avxvnni(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d))
        return false;
    return (a >> 4) & 1;
}

static bool has_f16c(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return false;
    return (c >> 29) & 1;
}
#endif

static void detect(void)
{
    available[CPU_ISA_PORTABLE] = true;
#ifdef CPU_X86
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    available[CPU_ISA_AVX2] = avx2;
    available[CPU_ISA_AVXVNNI] = avx2 && has_avxvnni();
    available[CPU_ISA_AVX512] = avx512;
    available[CPU_ISA_AVX512VNNI] = avx512 && __builtin_cpu_supports("avx512vnni");
#endif
}

static void build(cpu_kernels *k, cpu_isa isa)
{
    memset(k, 0, sizeof *k);
    cpu_kernels_fill_portable(k);
#ifdef CPU_X86
    if (isa != CPU_ISA_PORTABLE)
        cpu_kernels_fill_avx2(k);
    if (isa == CPU_ISA_AVXVNNI)
        cpu_kernels_fill_avxvnni(k);
    if (isa == CPU_ISA_AVX512 || isa == CPU_ISA_AVX512VNNI)
        cpu_kernels_fill_avx512(k);
    if (isa == CPU_ISA_AVX512VNNI)
        cpu_kernels_fill_avx512vnni(k);
#endif
    k->name = isa_names[isa];
    k->isa = isa;
}

static void init(void)
{
    detect();
    for (int i = 0; i < CPU_ISA_COUNT; i++)
        if (available[i])
            build(&sets[i], (cpu_isa)i);
}

const cpu_kernels *cpu_kernels_get(cpu_isa isa)
{
    pthread_once(&once, init);
    return isa < CPU_ISA_COUNT && available[isa] ? &sets[isa] : NULL;
}

const cpu_kernels *cpu_kernels_best(err_t *err)
{
    pthread_once(&once, init);
    const char *want = getenv("GLMCHAT_CPU_KERNELS");
    if (want && *want) {
        for (int i = 0; i < CPU_ISA_COUNT; i++) {
            if (strcmp(want, isa_names[i]) != 0)
                continue;
            if (!available[i]) {
                err_set(err, "GLMCHAT_CPU_KERNELS=%s: this CPU does not run the %s kernels", want, want);
                return NULL;
            }
            return &sets[i];
        }
        err_set(err, "GLMCHAT_CPU_KERNELS: '%s' is not one of portable, avx2, avxvnni, avx512, avx512vnni", want);
        return NULL;
    }
    /* AVX-512 VNNI, then AVX-512, AVX-VNNI, AVX2 */
    static const cpu_isa order[] = {CPU_ISA_AVX512VNNI, CPU_ISA_AVX512, CPU_ISA_AVXVNNI, CPU_ISA_AVX2};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (available[order[i]])
            return &sets[order[i]];
    return &sets[CPU_ISA_PORTABLE];
}
