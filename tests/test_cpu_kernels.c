/* test_cpu_kernels.c: the fast CPU backend's kernels (core/cpu/cpu_kernels.h)
 * against the reference, for every weight type, on every kernel set this
 * CPU runs (portable always; on x86-64 avx2, avxvnni, avx512, avx512vnni as
 * the CPU has them -- the cases of a set the CPU lacks say so and skip).
 *
 * Data: random weight blocks (every code value, random-sign scales, as
 * core/model/synth.c writes them) and random activations that are never zero,
 * with magnitudes varying by block; row lengths odd (3, 5 blocks) and
 * GLM-4.7-Flash's own (192 nope, 512 kv_lora, 768 q_lora, 1536 expert ffn,
 * 2048 hidden, 5120 heads x v_head, 10240 dense ffn).
 *
 * Tolerances, and why:
 *  - kernel vs the exact product of the same integers: the weights exactly
 *    dequantized times the activations exactly as quantized (q * d), summed
 *    in double.  The integer dot products are exact; what is left is f32
 *    rounding of the per-block scaling and of the running sums: one
 *    rounding of at most 2^-24 per block along chains of at most n/32
 *    terms, random in sign, so about sqrt(n/32) * 2^-24 <= 1.1e-6 of
 *    sum |w_i x^_i| for n <= 10240; the bound is 1e-5 of that sum.  One
 *    element decoded wrong moves the result by about 1/n of the sum
 *    (>= 1e-4), i.e. by more than the bound.
 *  - kernel vs the reference's f32 activations (quant_dot_row): the
 *    activation quantization error, element by element at most half a step
 *    (d/2) plus, for q8_32, the f16 rounding of d (|q| <= 127 steps of a
 *    relative 2^-11), and for Q4_1 / Q5_1 the f16 rounding of q8_1's s
 *    times the block's min: |got - ref| <= sum_i |w_i| e_i + sum_b |m_b|
 *    |s_b - d_b sum_b| + 1e-5 sum |w_i x_i| -- llama.cpp's q8_0 / q8_1 /
 *    q8_K precision, no worse.  (The exact check above counts that s.)
 *  - one token's result is bit-identical whatever tile it shares (nt 1-4).
 *  - the vectorized preparers write the portable ones' bytes exactly. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_iq4.h"
#include "cpu/cpu_kernels.h"
#include "format/quant.h"
#include "model/synth.h"
#include "testlib.h"

/* ======================================================================
 * Random data
 * ====================================================================== */

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* uniform in (-1, 1), never 0 */
static float unit(void)
{
    float u = (float)((next_u64() >> 40) + 0.5) / (float)(1u << 24);
    return 2.f * u - 1.f;
}

/* n activations, never zero, the scale changing every 32 so blocks differ */
static void activations(float *x, uint64_t n)
{
    float scale = 1;
    for (uint64_t i = 0; i < n; i++) {
        if (i % 32 == 0)
            scale = ldexpf(1.f, (int)(next_u64() % 9) - 4);
        x[i] = unit() * scale;
    }
}

/* rows x n weights of `type`, random codes and scales (synth's blocks) */
static uint8_t *weights(uint32_t type, uint64_t n, uint64_t rows, uint64_t *row_bytes)
{
    const quant_traits *t = quant_traits_of(type);
    if (!quant_row_bytes(type, n, row_bytes))
        return NULL;
    uint8_t *w = malloc(*row_bytes * rows);
    synth_tensor st = {.type = type, .n_dims = 2, .ne = {n, rows, 1, 1}, .kind = SYNTH_WEIGHT,
                       .rms = 1.0f / sqrtf((float)n)};
    if (w)
        synth_fill_blocks(&st, next_u64(), 1, 0, rows * n / t->block_elems, w);
    return w;
}

/* The activation row exactly as prepared: q * d (or the floats). */
static void prepared_values(cpu_act_kind k, const void *row, uint64_t n, double *out)
{
    if (k == CPU_ACT_F32) {
        for (uint64_t i = 0; i < n; i++)
            out[i] = ((const float *)row)[i];
        return;
    }
    uint32_t blk = cpu_act_block(k);
    for (uint64_t i = 0; i < n; i++)
        out[i] = (double)cpu_act_q(row)[i] * cpu_act_d(row, n)[i / blk];
}

/* The quantization error bound of element i of x prepared as k. */
static double act_error_bound(cpu_act_kind k, const void *row, uint64_t n, uint64_t i)
{
    if (k == CPU_ACT_F32)
        return 0;
    double d = cpu_act_d(row, n)[i / cpu_act_block(k)];
    return d / 2 * (1 + 1e-6) + (k == CPU_ACT_Q8_32 ? 127 * d * ldexp(1, -11) : 0);
}

/* ======================================================================
 * The preparers
 * ====================================================================== */

static const cpu_kernels *sets[CPU_ISA_COUNT];

/* Every element within its bound of the input; the sums the kernels use
 * are the sums of the stored q. */
static void test_prepare_precision(void)
{
    const cpu_kernels *p = sets[CPU_ISA_PORTABLE];
    static const cpu_act_kind kinds[] = {CPU_ACT_Q8_32, CPU_ACT_Q8_K};
    for (size_t ki = 0; ki < 2; ki++) {
        cpu_act_kind k = kinds[ki];
        uint64_t n = 2048;
        float x[2048];
        activations(x, n);
        _Alignas(64) uint8_t row[4096];
        p->prepare[k](x, n, 0, n, row);
        double worst = 0;
        for (uint64_t i = 0; i < n; i++) {
            double deq = (double)cpu_act_q(row)[i] * cpu_act_d(row, n)[i / cpu_act_block(k)];
            double e = fabs(deq - x[i]) / act_error_bound(k, row, n, i);
            worst = e > worst ? e : worst;
        }
        CHECK(worst <= 1.0, "kind %d: an element is %.3f of its bound away", (int)k, worst);
        for (uint64_t b = 0; k == CPU_ACT_Q8_32 && b < n / 32; b++) {
            int sum = 0;
            for (int j = 0; j < 32; j++)
                sum += cpu_act_q(row)[32 * b + j];
            double ds = (double)cpu_act_d(row, n)[b] * sum, sv = cpu_act_s(row, n)[b];
            CHECK(cpu_act_sum(row, n)[b] == sum, "q8_32 block %llu: sum", (unsigned long long)b);
            /* q8_1's s: d before its f16 rounding times the sum, rounded to f16 */
            CHECK(fabs(sv - ds) <= ldexp(fabs(ds), -10), "q8_32 block %llu: s %g, d * sum %g", (unsigned long long)b,
                  sv, ds);
        }
        for (uint64_t g = 0; k == CPU_ACT_Q8_K && g < n / 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++)
                sum += cpu_act_q(row)[16 * g + j];
            CHECK(cpu_act_bsum(row, n)[g] == sum, "q8_K group %llu: bsum", (unsigned long long)g);
        }
    }
}

/* The vector preparers write the portable bytes (a zero block included). */
static void test_prepare_same_bytes(void)
{
    const cpu_kernels *p = sets[CPU_ISA_PORTABLE];
    for (int s = 1; s < CPU_ISA_COUNT; s++) {
        if (!sets[s])
            continue;
        for (int k = CPU_ACT_Q8_32; k <= CPU_ACT_Q8_K; k++) {
            uint64_t n = 1536;
            float x[1536];
            activations(x, n);
            memset(x + 256, 0, 256 * sizeof(float));
            _Alignas(64) uint8_t a[4096], b[4096];
            memset(a, 0xAA, sizeof a);
            memset(b, 0xAA, sizeof b);
            p->prepare[k](x, n, 0, n, a);
            /* in two pieces, as threads do */
            sets[s]->prepare[k](x, n, 0, 512, b);
            sets[s]->prepare[k](x, n, 512, n, b);
            uint64_t used = k == CPU_ACT_Q8_32 ? n + 12 * (n / 32) : n + 4 * (n / 256) + 2 * (n / 16);
            CHECK(memcmp(a, b, used) == 0, "%s: kind %d differs from portable", sets[s]->name, k);
        }
    }
}

/* ======================================================================
 * The kernels
 * ====================================================================== */

static const uint32_t types[] = {QT_Q4_0, QT_Q4_1, QT_Q5_0,   QT_Q5_1,   QT_Q8_0, QT_Q2_K, QT_Q3_K, QT_Q4_K, QT_Q5_K,
                                 QT_Q6_K, QT_F32,  QT_F16,    QT_BF16,   QT_IQ4_NL, QT_IQ4_XS, QT_MXFP4, QT_IQ2_XXS, QT_IQ3_XXS, QT_IQ2_XS,
                                 QT_IQ3_S, QT_IQ2_S, QT_IQ1_S, QT_IQ1_M};
static const uint64_t lengths[] = {96, 160, 192, 512, 768, 1536, 2048, 5120, 10240, 768 + 256 * 2, 17};

typedef struct {
    double worst_exact, worst_ref; /* error / bound, the largest seen */
    int cases;
} kernel_result;

/* One (set, type, n): 5 rows, 8 tokens, tiles of 1-8; the rows each alone
 * and all in one call (what a kernel sets up once a call for its rows must
 * not change a row's bits). */
static void check_type(const cpu_kernels *k, uint32_t type, uint64_t n, kernel_result *r)
{
    const quant_traits *t = quant_traits_of(type);
    uint64_t rb;
    enum { ROWS = 5, NT = CPU_TILE_TOK };
    float by_row[ROWS][NT];
    uint8_t *w = weights(type, n, ROWS, &rb);
    cpu_act_kind ak = cpu_kernels_act(k, type);
    uint64_t ab = cpu_act_row_bytes(ak, n);
    float *x = malloc(NT * n * sizeof(float)), *wf = malloc(n * sizeof(float));
    double *xq = malloc(n * sizeof(double));
    uint8_t *act = aligned_alloc(64, NT * ab);
    if (!w || !x || !wf || !xq || !act) {
        CHECK(0, "out of memory");
        goto out;
    }
    const void *xp[NT];
    for (int i = 0; i < NT; i++) {
        activations(x + i * n, n);
        k->prepare[ak](x + i * n, n, 0, n, act + i * ab);
        xp[i] = act + i * ab;
    }
    for (int row = 0; row < ROWS; row++) {
        const uint8_t *wr = w + row * rb;
        quant_dequant_row(type, wr, wf, n);
        float all[NT], one[NT];
        cpu_kernels_dot(k, type, wr, xp, NT, n, all);
        memcpy(by_row[row], all, sizeof all);
        for (int nt = 1; nt <= NT; nt++) { /* token i in a tile of nt starting at i */
            for (int i = 0; i + nt <= NT; i++) {
                float part[NT];
                cpu_kernels_dot(k, type, wr, xp + i, nt, n, part);
                CHECK(memcmp(&part[0], &all[i], sizeof(float)) == 0, "%s %s n=%llu: token %d alone %.9g, in a tile %.9g",
                      k->name, t->name, (unsigned long long)n, i, part[0], all[i]);
                if (i == 0)
                    one[nt - 1] = part[nt - 1];
            }
        }
        for (int i = 0; i < NT; i++) {
            CHECK(memcmp(&one[i], &all[i], sizeof(float)) == 0, "%s %s: token %d depends on the tile", k->name, t->name, i);
            prepared_values(ak, xp[i], n, xq);
            double exact = 0, mag = 0, qerr = 0, magx = 0;
            for (uint64_t j = 0; j < n; j++) {
                exact += (double)wf[j] * xq[j];
                mag += fabs((double)wf[j] * xq[j]);
                magx += fabs((double)wf[j] * x[i * n + j]);
                qerr += fabs((double)wf[j]) * act_error_bound(ak, xp[i], n, j);
            }
            /* Q4_1 / Q5_1: the min times q8_1's s (llama.cpp's f16 rounding of
             * d * sum(q)) instead of times d * sum(q) */
            for (uint64_t b = 0; ak == CPU_ACT_Q8_32 && (type == QT_Q4_1 || type == QT_Q5_1) && b < n / 32; b++) {
                uint16_t mh;
                memcpy(&mh, wr + b * t->block_bytes + 2, 2);
                double m = quant_f16_to_f32(mh);
                double ds = (double)cpu_act_d(xp[i], n)[b] * cpu_act_sum(xp[i], n)[b];
                exact += m * (cpu_act_s(xp[i], n)[b] - ds);
                qerr += fabs(m * (cpu_act_s(xp[i], n)[b] - ds));
            }
            double e1 = fabs(all[i] - exact) / (1e-5 * mag + 1e-30);
            float ref = quant_dot_row(type, wr, x + i * n, n);
            double e2 = fabs((double)all[i] - ref) / (qerr + 1e-5 * magx + 1e-30);
            r->worst_exact = e1 > r->worst_exact ? e1 : r->worst_exact;
            r->worst_ref = e2 > r->worst_ref ? e2 : r->worst_ref;
            CHECK(e1 <= 1, "%s %s n=%llu row %d token %d: %.9g, exact %.9g (%.2f of the bound)", k->name, t->name,
                  (unsigned long long)n, row, i, all[i], exact, e1);
            CHECK(e2 <= 1, "%s %s n=%llu row %d token %d: %.9g, f32 reference %.9g (%.2f of the bound)", k->name,
                  t->name, (unsigned long long)n, row, i, all[i], ref, e2);
        }
        r->cases++;
    }
    float in_one[NT][ROWS], *yp[NT];
    for (int i = 0; i < NT; i++)
        yp[i] = in_one[i];
    cpu_kernels_rows(k, type, w, rb, ROWS, xp, NT, n, yp, false);
    for (int row = 0; row < ROWS; row++)
        for (int i = 0; i < NT; i++)
            CHECK(memcmp(&in_one[i][row], &by_row[row][i], sizeof(float)) == 0,
                  "%s %s n=%llu row %d token %d: %.9g in one call over %d rows, %.9g alone", k->name, t->name,
                  (unsigned long long)n, row, i, in_one[i][row], ROWS, by_row[row][i]);
out:
    free(w);
    free(x);
    free(wf);
    free(xq);
    free(act);
}

static void kernels_of(cpu_isa isa)
{
    const cpu_kernels *k = sets[isa];
    if (!k) {
        printf("# %s: this CPU does not run these kernels; skipped\n", cpu_isa_name(isa));
        return;
    }
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const quant_traits *t = quant_traits_of(types[ti]);
        kernel_result r = {0};
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
            if (lengths[li] % t->block_elems == 0 && lengths[li] % cpu_act_block(cpu_kernels_act(k, types[ti])) == 0)
                check_type(k, types[ti], lengths[li], &r);
        printf("#   %s %-6s %3d rows: worst %.3f of the exact bound, %.3f of the q8 bound\n", k->name, t->name, r.cases,
               r.worst_exact, r.worst_ref);
    }
}

static void test_kernels_portable(void) { kernels_of(CPU_ISA_PORTABLE); }
static void test_kernels_avx2(void) { kernels_of(CPU_ISA_AVX2); }
static void test_kernels_avxvnni(void) { kernels_of(CPU_ISA_AVXVNNI); }
static void test_kernels_avx512(void) { kernels_of(CPU_ISA_AVX512); }
static void test_kernels_avx512vnni(void) { kernels_of(CPU_ISA_AVX512VNNI); }

/* The dequantizing fallback (what a type without a kernel of its own runs)
 * on every type quant.c both decodes and quantizes (the data: random
 * floats through the type's quantizer): within f32 rounding of
 * quant_dot_row. */
static void test_fallback_every_decodable_type(void)
{
    const cpu_kernels *k = sets[CPU_ISA_PORTABLE];
    int n_types = 0;
    for (uint32_t type = 0; type < QT_COUNT; type++) {
        const quant_traits *t = quant_traits_of(type);
        if (!t || !t->can_dequant || !t->can_quantize)
            continue;
        uint64_t n = t->block_elems == 1 ? 1000 : 7 * t->block_elems, rb = 0;
        uint8_t *w = quant_row_bytes(type, n, &rb) ? malloc(rb) : NULL;
        float *src = malloc(n * sizeof(float));
        if (w && src) {
            activations(src, n);
            quant_quantize_row(type, src, w, n);
        }
        free(src);
        float *x = malloc(n * sizeof(float)), *wf = malloc(n * sizeof(float));
        if (!w || !x || !wf) {
            CHECK(0, "out of memory");
        } else {
            activations(x, n);
            quant_dequant_row(type, w, wf, n);
            double mag = 0;
            for (uint64_t j = 0; j < n; j++)
                mag += fabs((double)wf[j] * x[j]);
            const void *xp[1] = {x};
            float got;
            float *yp[1] = {&got};
            k->rows_fallback(type, w, 0, 1, xp, 1, n, yp, false);
            float ref = quant_dot_row(type, w, x, n);
            CHECK(fabs((double)got - ref) <= 1e-5 * mag, "%s: fallback %.9g, reference %.9g", t->name, got, ref);
            n_types++;
        }
        free(w);
        free(x);
        free(wf);
    }
    CHECK(n_types >= 11, "only %d decodable types", n_types);
}

/* ---- IQ4_XS, from ggml's layout (cpu_iq4.h) ---- */

/* Element j of an IQ4_XS row, decoded as ggml's dequantize_row_iq4_xs. */
static double iq4_xs_value(const cpu_iq4_xs_block *w, uint64_t j)
{
    const cpu_iq4_xs_block *b = &w[j / 256];
    int ib = (int)(j % 256 / 32), e = (int)(j % 32);
    uint8_t q = b->qs[16 * ib + e % 16];
    int idx = e < 16 ? q & 0xf : q >> 4;
    float dl = quant_f16_to_f32(b->d) * (float)(cpu_iq4_xs_scale(b, ib) - 32);
    return (double)(dl * cpu_iq4_levels[idx]);
}

/* Random IQ4_XS blocks (every index, every scale), the kernel of every set
 * against the exact product with the activations as quantized (the bound of
 * the other kinds); and the decoder above against quant.c's where quant.c
 * knows the type. */
static void test_iq4_xs_every_set(void)
{
    enum { NT = CPU_TILE_TOK };
    static const uint64_t ns[] = {256, 768, 2048, 1536};
    for (size_t li = 0; li < sizeof ns / sizeof ns[0]; li++) {
        uint64_t n = ns[li], nb = n / 256;
        cpu_iq4_xs_block *w = malloc(nb * sizeof *w);
        float *x = malloc(NT * n * sizeof(float)), *wf = malloc(n * sizeof(float));
        uint64_t ab = cpu_act_row_bytes(CPU_ACT_Q8_K, n);
        uint8_t *act = aligned_alloc(64, NT * ab);
        if (!w || !x || !wf || !act) {
            CHECK(0, "out of memory");
            return;
        }
        for (uint64_t b = 0; b < nb; b++) {
            w[b].d = quant_f32_to_f16(unit() * 0.01f);
            w[b].scales_h = (uint16_t)next_u64();
            for (int i = 0; i < 4; i++)
                w[b].scales_l[i] = (uint8_t)next_u64();
            for (int i = 0; i < 128; i++)
                w[b].qs[i] = (uint8_t)next_u64();
        }
        const void *xp[NT];
        for (int i = 0; i < NT; i++) {
            activations(x + i * n, n);
            cpu_act_prepare_q8_K(x + i * n, n, 0, n, act + i * ab);
            xp[i] = act + i * ab;
        }
        if (quant_traits_of(QT_IQ4_XS)->can_dequant) {
            quant_dequant_row(QT_IQ4_XS, w, wf, n);
            for (uint64_t j = 0; j < n; j++)
                CHECK(wf[j] == (float)iq4_xs_value(w, j), "n=%llu element %llu: quant.c %g, ggml's layout %g",
                      (unsigned long long)n, (unsigned long long)j, wf[j], iq4_xs_value(w, j));
        }
        for (int s = 0; s < CPU_ISA_COUNT; s++) {
            if (!sets[s])
                continue;
            CHECK(cpu_kernels_act(sets[s], QT_IQ4_XS) == CPU_ACT_Q8_K, "%s: IQ4_XS has no q8_K kernel", sets[s]->name);
            float got[NT];
            cpu_kernels_dot(sets[s], QT_IQ4_XS, w, xp, NT, n, got);
            for (int i = 0; i < NT; i++) {
                double exact = 0, mag = 0;
                for (uint64_t j = 0; j < n; j++) {
                    double xq = (double)cpu_act_q(xp[i])[j] * cpu_act_d(xp[i], n)[j / 256];
                    exact += iq4_xs_value(w, j) * xq;
                    mag += fabs(iq4_xs_value(w, j) * xq);
                }
                CHECK(fabs(got[i] - exact) <= 1e-5 * mag, "%s IQ4_XS n=%llu token %d: %.9g, exact %.9g", sets[s]->name,
                      (unsigned long long)n, i, got[i], exact);
            }
        }
        free(w);
        free(x);
        free(wf);
        free(act);
    }
}

/* GLMCHAT_CPU_KERNELS picks a set; an unknown name or a set the CPU lacks
 * is an error naming it. */
static void test_env_choice(void)
{
    err_t err;
    setenv("GLMCHAT_CPU_KERNELS", "portable", 1);
    const cpu_kernels *k = cpu_kernels_best(&err);
    CHECK(k && k->isa == CPU_ISA_PORTABLE, "portable not chosen");
    setenv("GLMCHAT_CPU_KERNELS", "sse9", 1);
    CHECK(!cpu_kernels_best(&err) && strstr(err.msg, "'sse9' is not one of"), "unknown name: %.200s", err.msg);
    for (int i = 0; i < CPU_ISA_COUNT; i++)
        if (!sets[i]) {
            setenv("GLMCHAT_CPU_KERNELS", cpu_isa_name(i), 1);
            CHECK(!cpu_kernels_best(&err) && strstr(err.msg, "does not run"), "%s: %.200s", cpu_isa_name(i), err.msg);
        }
    unsetenv("GLMCHAT_CPU_KERNELS");
    k = cpu_kernels_best(&err);
    CHECK(k != NULL, "no default set");
    printf("# this CPU runs:");
    for (int i = 0; i < CPU_ISA_COUNT; i++)
        if (sets[i])
            printf(" %s", cpu_isa_name(i));
    printf("; best: %s\n", k ? k->name : "?");
}

int main(void)
{
    for (int i = 0; i < CPU_ISA_COUNT; i++)
        sets[i] = cpu_kernels_get((cpu_isa)i);
    RUN(test_env_choice);
    RUN(test_prepare_precision);
    RUN(test_prepare_same_bytes);
    RUN(test_fallback_every_decodable_type);
    RUN(test_kernels_portable);
    RUN(test_kernels_avx2);
    RUN(test_kernels_avxvnni);
    RUN(test_kernels_avx512);
    RUN(test_kernels_avx512vnni);
    RUN(test_iq4_xs_every_set);
    TESTS_DONE();
}
