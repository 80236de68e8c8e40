/* test_vk_spv.c: the per-weight-type copies of the kernels (gpu/vk_spv.h,
 * the Makefile's TYPED_SHADERS) -- no device needed:
 *  - every shader that has copies has one for each type the Vulkan core
 *    computes with (vk_qlayout_of; the integer-dot builds, <name>_id, for
 *    the types with integer units, vk_idot_type), at most half its generic
 *    module's size
 *    (the point of them: a driver parses less), each fixing the same
 *    specialization constants;
 *  - vk_spv_for picks the copy only where every weight-type constant holds
 *    that type, and the generic module otherwise (two types in one kernel,
 *    a spec too short to say, a type with no copy).
 * That a copy computes what the generic module does is t_vk_typed_spv.sh's
 * (the same logits, bit for bit, with --tune typed_spv=0 and 1). */
#include "testlib.h"
#include "vk_kernels.h"
#include "spv_table.h"

static void test_copies_cover_every_type(void)
{
    int shaders = 0;
    for (int s = 0; s < SPV_COUNT; s++) {
        const vk_spv *g = &spv_table[s];
        if (!g->by_type)
            continue;
        shaders++;
        CHECK(g->type_specs != 0, "%s: copies that fix no constant", g->name);
        /* the integer-dot builds (<name>_id): the types vk_k_idot hands
         * them, and no other */
        size_t nl = strlen(g->name);
        bool idot = nl > 3 && strcmp(g->name + nl - 3, "_id") == 0;
        for (uint32_t t = 0; t < 64; t++) {
            vk_qlayout ql;
            if (!vk_qlayout_of(t, &ql))
                continue;
            const vk_spv *c = t < g->n_by_type ? g->by_type[t] : NULL;
            if (idot && !vk_idot_type(t)) {
                CHECK(c == NULL, "%s: a copy for type %u, which has no integer units", g->name, t);
                continue;
            }
            CHECK(c != NULL, "%s: no copy for type %u", g->name, t);
            if (!c)
                continue;
            CHECK(c->size * 2 <= g->size, "%s.t%u: %zu bytes, generic %zu", g->name, t, c->size, g->size);
            CHECK(c->by_type == NULL && c->code != g->code, "%s.t%u is not a module of its own", g->name, t);
        }
    }
    /* the decode graph's kernels and the prompt's mat-mat at least */
    CHECK(shaders >= 8, "%d shaders have typed copies", shaders);
    CHECK(spv_table[SPV_MV_XS].by_type && spv_table[SPV_MM].by_type && spv_table[SPV_MV_GLU_XS].by_type,
          "mv_xs, mm and mv_glu_xs have no typed copies");
}

static void test_choice(void)
{
    const vk_spv *mm = &spv_table[SPV_MM];   /* two weight types: slots 1 and 2 */
    const vk_spv *xs = &spv_table[SPV_MV_XS]; /* one: slot 1 */
    CHECK(mm->type_specs == 0x6u, "mm fixes 0x%x, expected slots 1 and 2", mm->type_specs);
    CHECK(xs->type_specs == 0x2u, "mv_xs fixes 0x%x, expected slot 1", xs->type_specs);
    uint32_t spec[8] = {256, QT_Q4_K, QT_Q4_K, 64, 64, 0, 0, 0};
    CHECK(vk_spv_for(mm, spec, 8) == mm->by_type[QT_Q4_K], "mm Q4_K/Q4_K: not its copy");
    spec[2] = QT_Q6_K;
    CHECK(vk_spv_for(mm, spec, 8) == mm, "mm Q4_K/Q6_K: not the generic module");
    CHECK(vk_spv_for(xs, spec, 8) == xs->by_type[QT_Q4_K], "mv_xs Q4_K: not its copy");
    CHECK(vk_spv_for(mm, spec, 2) == mm, "mm with a spec of 2: not the generic module");
    CHECK(vk_spv_for(xs, spec, 1) == xs, "mv_xs with a spec of 1: not the generic module");
    spec[1] = 63;
    CHECK(vk_spv_for(xs, spec, 8) == xs, "mv_xs type 63: not the generic module");
    const vk_spv *plain = &spv_table[SPV_RMSNORM];
    CHECK(vk_spv_for(plain, spec, 8) == plain, "rmsnorm: a kernel without copies changed module");
}

int main(void)
{
    RUN(test_copies_cover_every_type);
    RUN(test_choice);
    TESTS_DONE();
}
