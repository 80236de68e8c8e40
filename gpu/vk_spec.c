/* vk_spec.c: NextN drafting on the Vulkan backend -- engine.h's draft and
 * verify entries, decided on the host by spec_host.h from logits read back.
 *
 * Where the parts run:
 *  - the kept hidden states h_p: on the device, one row per cache position
 *    (vk_bufs.hid), written by the decode and prompt graphs beside their
 *    head (vk_forward.c keep_hidden, vk_prefill.c head);
 *  - a NextN row: one submit of the NextN program (vk_forward.c nextn) at
 *    the row's position, its h from the kept row before it or, for a
 *    chained draft row, the previous row's output the host writes back
 *    (nx_hin); its output (nx_out) and, for the last row, its logits are
 *    read back, and spec_host draws the draft from them;
 *  - the verify: the single-token decode graph replayed once per position,
 *    each position's logits read back -- the very programs eval runs, so
 *    every row is bit for bit what k + 1 single-token evals give (the
 *    exactness engine.h asks for), and spec_host decides from them.
 * So a step costs k + 1 decodes, k NextN rows and their host round trips:
 * exact, not yet faster (engine_backend.draft_pays false, vk_engine.c).
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
    return 0;
}

void vk_spec_free(vk_engine *e)
{
    for (int given = 0; given < 2; given++)
        vk_family_free(e, &e->rec.nextn[given]);
    spec_host_free(e->spec);
    e->spec = NULL;
}

/* ---- the forward pass as spec_host.h calls it ------------------------------------------- */

/* NextN rows pos..pos+n-1, one submit each (h NULL: from the kept rows). */
int vk_spec_nextn_rows(void *fwd, const int32_t *tokens, uint32_t n, uint32_t pos, const float *h, float *logits,
                          err_t *err)
{
    vk_engine *e = fwd;
    const uint32_t H = e->m->cfg.n_embd, V = e->m->cfg.n_vocab;
    if ((uint64_t)pos + n > e->p.n_ctx)
        return err_set(err, "NextN rows %u..%u are past the %u-token context", pos, pos + n - 1, e->p.n_ctx);
    for (uint32_t i = 0; i < n; i++) {
        if ((uint32_t)tokens[i] >= V)
            return err_set(err, "token id %d is outside the vocabulary (%u)", tokens[i], V);
        vk_write_params(e, &tokens[i], 1, pos + i);
        if (h)
            memcpy(e->b.nx_hin.map, h + (size_t)i * H, (size_t)H * sizeof *h);
        if (vk_submit_wait(&e->c, e->rec.nextn[h != NULL].plain.cb, err))
            return -1;
    }
    if (logits && n) {
        if (vk_submit_wait(&e->c, e->rec.copy_logits, err))
            return -1;
        memcpy(logits, e->b.host_logits.map, (size_t)V * sizeof *logits);
    }
    return 0;
}

const float *vk_spec_nextn_out(void *fwd)
{
    return (const float *)((vk_engine *)fwd)->b.nx_out.map;
}

/* Every position's logits: the decode graph once per token, as eval runs it. */
static int fwd_eval_all(void *fwd, const int32_t *tokens, uint32_t n, uint32_t pos, float *logits, err_t *err)
{
    vk_engine *e = fwd;
    const uint32_t V = e->m->cfg.n_vocab;
    if ((uint64_t)pos + n > e->p.n_ctx)
        return err_set(err, "positions %u..%u are past the %u-token context", pos, pos + n - 1, e->p.n_ctx);
    for (uint32_t i = 0; i < n; i++)
        if (vk_decode_logits(e, tokens[i], pos + i, logits + (size_t)i * V, err))
            return -1;
    return 0;
}

static const spec_host_fwd vk_fwd = {vk_spec_nextn_rows, vk_spec_nextn_out, fwd_eval_all};

/* ---- engine_backend.draft / verify ------------------------------------------------------ */

static int usable(const vk_engine *e, err_t *err)
{
    if (e->c.lost)
        return err_set(err, "the Vulkan device was lost earlier; restart glmchat or use --backend cpu");
    if (!e->spec)
        return err_set(err, "this engine keeps no NextN state");
    return 0;
}

int vk_spec_draft(void *impl, const int32_t *tokens, uint32_t n, uint32_t pos, const engine_draft_req *req,
                  err_t *err)
{
    vk_engine *e = impl;
    if (usable(e, err))
        return -1;
    return spec_host_draft(e->spec, &vk_fwd, e, tokens, n, pos, req, err);
}

int vk_spec_verify(void *impl, const int32_t *tokens, uint32_t pos, const engine_verify_req *req, err_t *err)
{
    vk_engine *e = impl;
    if (usable(e, err))
        return -1;
    return spec_host_verify(e->spec, &vk_fwd, e, tokens, pos, req, err);
}
