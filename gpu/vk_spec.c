/* vk_spec.c: NextN drafting on the Vulkan backend -- its programs and one
 * row's submit here; engine.h's draft and verify entries in vk_engine.c
 * ("drafting"), decided on the host by spec_host.h from logits read back.
 *
 * Where the parts run:
 *  - the kept hidden states h_p: on the device, one row per cache position
 *    (vk_bufs.hid), written by the decode and prompt graphs beside their
 *    head (vk_forward.c keep_hidden, vk_prefill.c head);
 *  - a NextN row: one submit of the NextN program (vk_forward.c nextn) at
 *    the row's position, its h from the kept row before it or, for a
 *    chained draft row, the previous row's output the host writes back
 *    (nx_hin); its output (nx_out) and, for the last row, its logits are
 *    read back, and spec_host draws the draft from them.  The rows of a
 *    call before its last (the tokens the last verify kept) leave only
 *    their cache rows for the rows after them: those run the block up to
 *    its cache row (VK_PROGRAM_NEXTN_KV: ~6 dispatches instead of a layer
 *    and the head; gpu/PERF.md run 55);
 *  - the verify: one submit of the verify program of k + 1 columns
 *    (vk_forward.c's VK_PROGRAM_VERIFY): each column the decode graph's
 *    own calls on its own token slot, the columns' calls of a step run
 *    together, so every row is bit for bit what k + 1 single-token evals
 *    give (the exactness engine.h asks for) at about one token's steps;
 *    the rows land in host memory and spec_host decides from them.  Where
 *    experts live in host memory (the decode graph in parts around the
 *    CPU's turns) the decode graph runs once per position instead.
 *
 * KV after a rejection: the main cache and the kept h rows hold
 * pos..pos+k; rows past what engine.c keeps are rewritten before anything
 * reads them (a row attends only to rows before it, made again in order
 * from engine.nx_past), as on the CPU backends.  The NextN cache's chained
 * rows are scratch in the same way. */
#include <string.h>

#include "engine/spec_host.h"
#include "vk.h"
#include "vk_engine.h"

int vk_spec_build(vk_engine *e, err_t *err)
{
    if (!(e->spec = spec_host_new(e->m->cfg.n_vocab, err)))
        return -1;
    for (int given = 0; given < 2; given++)
        if (vk_family_build(e, &e->rec.nextn[given], given ? VK_PROGRAM_NEXTN_GIVEN : VK_PROGRAM_NEXTN, 0,
                            VK_FAMILY_PLAIN, err)) {
            err_prefix(err, "recording the NextN block");
            return -1;
        }
    if (vk_family_build(e, &e->rec.nextn_kv, VK_PROGRAM_NEXTN_KV, 0, VK_FAMILY_PLAIN, err) ||
        (vk_nextn_kv_batch_fits(e) &&
         vk_family_build(e, &e->rec.nextn_kv_batch, VK_PROGRAM_NEXTN_KV_BATCH, 0, VK_FAMILY_PLAIN, err))) {
        err_prefix(err, "recording the NextN block's cache rows");
        return -1;
    }
    return vk_spec_record_verify(e, err);
}

int vk_spec_record_verify(vk_engine *e, err_t *err)
{
    for (uint32_t n = 2; n <= VK_VCOLS && n <= e->b.n_batch && !e->hx.n_layers; n++)
        if (vk_family_build(e, &e->rec.verify[n], VK_PROGRAM_VERIFY, n, VK_FAMILY_PLAIN, err)) {
            err_prefix(err, "recording the verify");
            return -1;
        }
    return 0;
}

void vk_spec_unrecord_verify(vk_engine *e)
{
    for (uint32_t n = 2; n <= VK_VCOLS; n++)
        vk_family_free(e, &e->rec.verify[n]);
}

void vk_spec_free(vk_engine *e)
{
    for (int given = 0; given < 2; given++)
        vk_family_free(e, &e->rec.nextn[given]);
    vk_family_free(e, &e->rec.nextn_kv);
    vk_family_free(e, &e->rec.nextn_kv_batch);
    vk_spec_unrecord_verify(e);
    spec_host_free(e->spec);
    e->spec = NULL;
}

/* ---- one NextN row ------------------------------------------------------------------------ */

int vk_spec_nextn_submit(vk_engine *e, const float *h, bool kv_only, err_t *err)
{
    if (h)
        memcpy(e->b.nx_hin.map, h, (size_t)e->m->cfg.n_embd * sizeof *h);
    if (kv_only && !h && e->tune.nx_kv)
        return vk_submit_wait(&e->c, e->rec.nextn_kv.plain.cb, err);
    return vk_submit_wait(&e->c, e->rec.nextn[h != NULL].plain.cb, err);
}

const float *vk_spec_nextn_out(const vk_engine *e)
{
    return (const float *)e->b.nx_out.map;
}
