/* test_cpu_pack.c: Q4_0, IQ4_NL, MXFP4, Q5_0 and Q8_0 packed by 16 rows
 * (core/cpu/cpu_pack.h) and their kernels, through the row tiling that uses
 * them (cpu_mm_rows), on every kernel set this CPU runs that has a packed
 * kernel (Q4_0: avx2, avxvnni, avx512, avx512vnni; MXFP4: avx2, avxvnni,
 * avx512vnni; IQ4_NL, Q5_0 and Q8_0: avx512vnni; the cases of a set the CPU
 * lacks say so and skip).
 *
 * Data: random Q4_0 / IQ4_NL / MXFP4 / Q5_0 / Q8_0 blocks (synth's: every code, random-sign
 * scales; MXFP4 also exponents 0, 1, 2 and 200 in every fifth block) and
 * random activations that are never zero, their scale changing per block;
 * row counts 1, 5, 16, 17, 40 (the padded last group), two matrices (an
 * expert tensor: the second one's offset), row lengths of 1, 3, 5, 48 and
 * 64 blocks; tiles of 1-8 tokens and 11 (two tiles); ranges of rows on and
 * off the 16-row grid, as threads take them.
 *
 * Tolerance: none.  A packed row's sum is formed in the portable kernel's
 * order (per block the exact integer dot product, then acc += (d_w d_x) s
 * in f32), so every output must equal the portable set's on the plain rows
 * bit for bit -- and test_cpu_kernels.c holds the portable set to the
 * exact product of the dequantized weights within f32 rounding.  A packed
 * copy with one level changed must be caught (the comparison can fail). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_kernels.h"
#include "cpu/cpu_matmul.h"
#include "cpu/cpu_pack.h"
#include "format/quant.h"
#include "model/synth.h"
#include "testlib.h"

static uint64_t rng = 0x243F6A8885A308D3ull;

static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* uniform in (-1, 1), never 0, the scale changing every 32 */
static void activations(float *x, uint64_t n)
{
    float scale = 1;
    for (uint64_t i = 0; i < n; i++) {
        if (i % 32 == 0)
            scale = ldexpf(1.f, (int)(next_u64() % 9) - 4);
        float u = (float)((next_u64() >> 40) + 0.5) / (float)(1u << 24);
        x[i] = (2.f * u - 1.f) * scale;
    }
}

enum { MATS = 2, MAX_TOK = 11 };

typedef struct {
    mtensor w;        /* MATS matrices of rows x n */
    uint8_t *bytes;
    uint8_t *packed;
    uint8_t *act;     /* MAX_TOK prepared rows */
    uint64_t ab;
    float *want, *got; /* (MAX_TOK, rows) */
} case_data;

static bool make_case(case_data *c, uint32_t type, uint64_t n, uint64_t rows)
{
    memset(c, 0, sizeof *c);
    uint64_t rb = n / 32 * quant_traits_of(type)->block_bytes;
    c->w = (mtensor){.name = "test.weight", .type = type, .n_dims = 3, .ne = {n, rows, MATS, 1}, .nb1 = rb,
                     .nb2 = rb * rows};
    c->bytes = malloc(rb * rows * MATS);
    c->packed = aligned_alloc(64, (cpu_pack_bytes(&c->w) + 63) / 64 * 64);
    c->ab = cpu_act_row_bytes(CPU_ACT_Q8_32, n);
    c->act = aligned_alloc(64, MAX_TOK * c->ab);
    c->want = malloc(MAX_TOK * rows * sizeof(float));
    c->got = malloc(MAX_TOK * rows * sizeof(float));
    float *x = malloc(n * sizeof(float));
    if (!c->bytes || !c->packed || !c->act || !c->want || !c->got || !x) {
        free(x);
        return false;
    }
    synth_tensor st = {.type = type, .n_dims = 2, .ne = {n, rows * MATS, 1, 1}, .kind = SYNTH_WEIGHT,
                       .rms = 1.0f / sqrtf((float)n)};
    synth_fill_blocks(&st, next_u64(), 1, 0, rows * MATS * n / 32, c->bytes);
    if (type == QT_MXFP4) /* the exponents whose scales are subnormal (0, 1), the first normal one, a large one */
        for (uint64_t b = 0; b < rows * MATS * n / 32; b += 5)
            ((block_mxfp4 *)c->bytes)[b].e = (uint8_t[]){0, 1, 2, 200}[b / 5 % 4];
    c->w.data = c->bytes;
    for (int t = 0; t < MAX_TOK; t++) {
        activations(x, n);
        cpu_act_prepare_q8_32(x, n, 0, n, c->act + t * c->ab);
    }
    free(x);
    cpu_pack_rows(&c->w, c->packed, 0, cpu_pack_groups(&c->w) * MATS);
    return true;
}

static void free_case(case_data *c)
{
    free(c->bytes);
    free(c->packed);
    free(c->act);
    free(c->want);
    free(c->got);
}

static cpu_mm job_of(const case_data *c, uint32_t e, uint32_t n_tok, float *y, const uint8_t *packed, bool acc)
{
    return (cpu_mm){.w = &c->w, .e = e, .n_tok = n_tok, .x = c->act, .xs = c->ab, .y = y, .ys = c->w.ne[1],
                    .accumulate = acc, .packed = packed};
}

/* Rows [r0, r1) of matrix e for n_tok tokens, packed under k vs plain
 * under the portable set: the number of outputs that differ. */
static uint64_t mismatches(const cpu_kernels *k, const case_data *c, uint32_t e, uint32_t n_tok, uint64_t r0,
                           uint64_t r1, bool acc)
{
    const uint64_t rows = c->w.ne[1];
    for (uint64_t i = 0; i < n_tok * rows; i++) /* the same start for both, never zero */
        c->want[i] = c->got[i] = 0.25f + (float)(i % 7);
    cpu_mm plain = job_of(c, e, n_tok, c->want, NULL, acc), packed = job_of(c, e, n_tok, c->got, c->packed, acc);
    cpu_mm_rows(cpu_kernels_get(CPU_ISA_PORTABLE), &plain, r0, r1);
    cpu_mm_rows(k, &packed, r0, r1);
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n_tok * rows; i++)
        bad += memcmp(&c->want[i], &c->got[i], sizeof(float)) != 0;
    return bad;
}

static void packed_of(cpu_isa isa, uint32_t type)
{
    const char *tn = quant_traits_of(type)->name;
    const cpu_kernels *k = cpu_kernels_get(isa);
    if (!k) {
        printf("# %s: this CPU does not run these kernels; skipped\n", cpu_isa_name(isa));
        return;
    }
    CHECK(k->type[type].packed != NULL, "%s has no packed %s kernel", k->name, tn);
    if (!k->type[type].packed)
        return;
    static const uint64_t lengths[] = {32, 96, 160, 1536, 2048};
    static const uint64_t row_counts[] = {1, 5, 16, 17, 40};
    int cases = 0;
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
        for (size_t ri = 0; ri < sizeof row_counts / sizeof row_counts[0]; ri++) {
            const uint64_t n = lengths[li], rows = row_counts[ri];
            case_data c;
            if (!make_case(&c, type, n, rows)) {
                CHECK(0, "out of memory");
                free_case(&c);
                return;
            }
            for (uint32_t e = 0; e < MATS; e++)
                for (uint32_t nt = 1; nt <= MAX_TOK; nt += nt < 8 ? 1 : 3)
                    for (int acc = 0; acc < 2; acc++) {
                        /* all rows; then a split off the grid (3 | rest) and one on it (16 | rest) */
                        uint64_t bad = mismatches(k, &c, e, nt, 0, rows, acc);
                        if (rows > 3)
                            bad += mismatches(k, &c, e, nt, 3, rows, acc) + mismatches(k, &c, e, nt, 0, 3, acc);
                        if (rows > 16)
                            bad += mismatches(k, &c, e, nt, 16, rows, acc) + mismatches(k, &c, e, nt, 1, 16, acc);
                        CHECK(bad == 0, "%s %s n=%llu rows=%llu matrix %u, %u tokens%s: %llu outputs differ from portable",
                              k->name, tn, (unsigned long long)n, (unsigned long long)rows, e, nt,
                              acc ? " (accumulating)" : "", (unsigned long long)bad);
                        cases++;
                    }
            free_case(&c);
        }
    printf("#   %s %s: %d cases equal the portable set's bits\n", k->name, tn, cases);
}

static void test_packed_avx2(void) { packed_of(CPU_ISA_AVX2, QT_Q4_0); }
static void test_packed_avxvnni(void) { packed_of(CPU_ISA_AVXVNNI, QT_Q4_0); }
static void test_packed_avx512(void) { packed_of(CPU_ISA_AVX512, QT_Q4_0); }
static void test_packed_avx512vnni(void) { packed_of(CPU_ISA_AVX512VNNI, QT_Q4_0); }
static void test_packed_q8_0_avx512vnni(void) { packed_of(CPU_ISA_AVX512VNNI, QT_Q8_0); }
static void test_packed_iq4_nl_avx512vnni(void) { packed_of(CPU_ISA_AVX512VNNI, QT_IQ4_NL); }
static void test_packed_q5_0_avx512vnni(void) { packed_of(CPU_ISA_AVX512VNNI, QT_Q5_0); }
static void test_packed_mxfp4_avx512vnni(void) { packed_of(CPU_ISA_AVX512VNNI, QT_MXFP4); }
static void test_packed_mxfp4_avx2(void) { packed_of(CPU_ISA_AVX2, QT_MXFP4); }
static void test_packed_mxfp4_avxvnni(void) { packed_of(CPU_ISA_AVXVNNI, QT_MXFP4); }

/* The comparison above can fail: the levels of row 5 of the second group
 * changed in block 1 of the packed copy (all 32: one alone may meet a
 * token's activation rounded to 0) move exactly that row's outputs, for
 * every token. */
static void broken_packing_is_caught(uint32_t type)
{
    const cpu_kernels *k = cpu_kernels_best(&(err_t){0});
    if (!k || !k->type[type].packed) {
        printf("# no packed %s kernel on this CPU; skipped\n", quant_traits_of(type)->name);
        return;
    }
    case_data c;
    if (!make_case(&c, type, 96, 40)) {
        CHECK(0, "out of memory");
        free_case(&c);
        return;
    }
    CHECK(mismatches(k, &c, 1, 8, 0, 40, false) == 0, "the intact copy differs");
    uint8_t *g = c.packed + cpu_pack_matrix_bytes(&c.w) + cpu_pack_group_bytes(&c.w); /* matrix 1, group 1 */
    uint8_t *blk1 = g + cpu_pack_block_bytes(type);                                   /* block 1 */
    const int chunks = type == QT_Q8_0 ? 8 : 4; /* Q8_0: a byte a level; else both nibbles of a byte */
    const int at = type == QT_Q5_0 ? 96 : 32;   /* Q5_0: the nibbles after the qh words */
    for (int ch = 0; ch < chunks; ch++)
        for (int j = 0; j < 4; j++)
            blk1[at + 64 * ch + 4 * 5 + j] ^= type == QT_Q8_0 ? 0x04 : 0x11;
    if (type == QT_Q5_0) /* and row 5's fifth bits: a wrong qh word must be caught too */
        blk1[32 + 4 * 5 + 2] ^= 0xFF;
    CHECK(mismatches(k, &c, 1, 8, 0, 40, false) == 8, "a changed level moved %llu outputs, not row 21's 8",
          (unsigned long long)mismatches(k, &c, 1, 8, 0, 40, false));
    free_case(&c);
}
static void test_broken_packing_is_caught(void) { broken_packing_is_caught(QT_Q4_0); }
static void test_broken_q8_0_packing_is_caught(void) { broken_packing_is_caught(QT_Q8_0); }
static void test_broken_iq4_nl_packing_is_caught(void) { broken_packing_is_caught(QT_IQ4_NL); }
static void test_broken_q5_0_packing_is_caught(void) { broken_packing_is_caught(QT_Q5_0); }
static void test_broken_mxfp4_packing_is_caught(void) { broken_packing_is_caught(QT_MXFP4); }

/* The set finds a tensor's copy by its data, holds its bytes (padding
 * included), and makes none where the set has no packed kernel for the
 * type (F32; Q8_0 without VNNI). */
static void test_packs_set(void)
{
    err_t err = {0};
    cpu_pool *pool = cpu_pool_new(2, &err);
    cpu_packs *ps = cpu_packs_new(&err);
    case_data a, b;
    case_data q8;
    bool ok = pool && ps && make_case(&a, QT_Q4_0, 160, 17) && make_case(&b, QT_Q4_0, 96, 40) &&
              make_case(&q8, QT_Q8_0, 64, 20);
    CHECK(ok, "set-up: %.200s", err.msg);
    if (ok) {
        const cpu_kernels *k = cpu_kernels_best(&err), *portable = cpu_kernels_get(CPU_ISA_PORTABLE);
        CHECK(cpu_packs_add(ps, pool, portable, &a.w, &err) == 0 && cpu_packs_find(ps, &a.w) == NULL,
              "the portable set got a packed copy");
        mtensor f32 = a.w;
        f32.type = QT_F32;
        CHECK(cpu_packs_add(ps, pool, k, &f32, &err) == 0 && cpu_packs_bytes(ps) == 0, "an F32 tensor was packed");
        if (k->type[QT_Q4_0].packed) {
            CHECK(cpu_packs_add(ps, pool, k, &b.w, &err) == 0 && cpu_packs_add(ps, pool, k, &a.w, &err) == 0 &&
                      cpu_packs_add(ps, pool, k, &a.w, &err) == 0,
                  "add: %.200s", err.msg);
            const uint8_t *pa = cpu_packs_find(ps, &a.w), *pb = cpu_packs_find(ps, &b.w);
            CHECK(pa && memcmp(pa, a.packed, cpu_pack_bytes(&a.w)) == 0, "a's copy (made on the pool) differs");
            CHECK(pb && memcmp(pb, b.packed, cpu_pack_bytes(&b.w)) == 0, "b's copy differs");
            CHECK(cpu_packs_bytes(ps) == cpu_pack_bytes(&a.w) + cpu_pack_bytes(&b.w) &&
                      cpu_pack_bytes(&a.w) == 2 * 2 * 5 * 288,
                  "%llu bytes held", (unsigned long long)cpu_packs_bytes(ps));
        }
        const uint64_t before = cpu_packs_bytes(ps);
        CHECK(cpu_packs_add(ps, pool, k, &q8.w, &err) == 0, "add Q8_0: %.200s", err.msg);
        const uint8_t *p8 = cpu_packs_find(ps, &q8.w);
        if (k->type[QT_Q8_0].packed)
            CHECK(p8 && memcmp(p8, q8.packed, cpu_pack_bytes(&q8.w)) == 0 &&
                      cpu_packs_bytes(ps) == before + 2 * 2 * 2 * 544,
                  "the Q8_0 copy differs or is missing (%llu bytes held)", (unsigned long long)cpu_packs_bytes(ps));
        else
            CHECK(!p8 && cpu_packs_bytes(ps) == before, "%s has no packed Q8_0 kernel but made a copy", k->name);
    }
    if (ok) {
        free_case(&a);
        free_case(&b);
        free_case(&q8);
    }
    cpu_packs_free(ps);
    cpu_pool_free(pool);
}

int main(void)
{
    RUN(test_packed_avx2);
    RUN(test_packed_avxvnni);
    RUN(test_packed_avx512);
    RUN(test_packed_avx512vnni);
    RUN(test_packed_q8_0_avx512vnni);
    RUN(test_packed_iq4_nl_avx512vnni);
    RUN(test_packed_q5_0_avx512vnni);
    RUN(test_packed_mxfp4_avx512vnni);
    RUN(test_packed_mxfp4_avx2);
    RUN(test_packed_mxfp4_avxvnni);
    RUN(test_broken_packing_is_caught);
    RUN(test_broken_q8_0_packing_is_caught);
    RUN(test_broken_iq4_nl_packing_is_caught);
    RUN(test_broken_q5_0_packing_is_caught);
    RUN(test_broken_mxfp4_packing_is_caught);
    RUN(test_packs_set);
    TESTS_DONE();
}
