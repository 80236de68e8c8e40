/* spec_host.h: engine.h's draft and verify entries for a backend whose
 * logits are in host memory (the CPU backends "ref" and "cpu") (spec_host_).
 *
 * The backend brings its forward pass (spec_host_fwd: the NextN rows and
 * the main model's logits of every position); this module does the rest
 * in one place, so that every host backend takes the same decisions from
 * the same logits:
 *  - draft: the rows, then d_1..d_k, each drawn from its NextN logits by the
 *    sampler's own draw with req->rq[i] (q_i = sampler_probs of the same
 *    request, kept for the verify), each chained row made from the previous
 *    row's output (llama.cpp's MTP draft loop);
 *  - verify: the k + 1 positions' logits in one call, the drafts tested in
 *    order against p_i by sampler_spec.h's rule, the residual or the bonus
 *    token drawn as sampler_spec.h says.
 *
 * Promises: spec_host_new sizes everything for the vocabulary (no
 * allocation per call) and starts up to ENGINE_MAX_DRAFT + 1 threads for a
 * verify's rows (the same decisions as on one thread); one engine thread
 * uses a spec_host at a time.
 */
#ifndef GLM_SPEC_HOST_H
#define GLM_SPEC_HOST_H

#include <stdint.h>

#include "engine.h"
#include "base/error.h"

/* A backend's forward pass, as spec_host calls it (fwd: the backend's
 * state).  Both passes return 0, or -1 with err set; *at gets where the
 * logits are: `buf`, which they may fill, or host memory of the backend's
 * own that stays as it is until its next pass (the Vulkan backend's rows
 * the GPU wrote: no copy).  spec_host may change them in place (the
 * penalties). */
typedef struct {
    /* NextN rows pos..pos+n-1 of tokens[0..n) (h NULL: made from the kept
     * hidden states, else [n][n_embd] given rows); with buf, the last row's
     * [n_vocab] logits (buf NULL: none wanted, *at NULL). */
    int (*nextn_rows)(void *fwd, const int32_t *tokens, uint32_t n, uint32_t pos, const float *h, float *buf,
                      float **at, err_t *err);
    /* The last row's normed output (n_embd) of the latest nextn_rows. */
    const float *(*nextn_out)(void *fwd);
    /* The main model over tokens[0..n) at pos..pos+n-1, every position's
     * logits as [n][n_vocab] -- bit for bit what n single-token evals of the
     * same tokens give (engine.h's Promises for verify). */
    int (*eval_all)(void *fwd, const int32_t *tokens, uint32_t n, uint32_t pos, float *buf, float **at, err_t *err);
} spec_host_fwd;

typedef struct spec_host spec_host;

spec_host *spec_host_new(uint32_t n_vocab, err_t *err);
void spec_host_free(spec_host *h);

/* engine_backend.draft over fwd (engine.h's Promises). */
int spec_host_draft(spec_host *h, const spec_host_fwd *f, void *fwd, const int32_t *tokens, uint32_t n, uint32_t pos,
                    const engine_draft_req *req, err_t *err);
/* engine_backend.verify over fwd (engine.h's Promises). */
int spec_host_verify(spec_host *h, const spec_host_fwd *f, void *fwd, const int32_t *tokens, uint32_t pos,
                     const engine_verify_req *req, err_t *err);
/* Seconds spent in draft and verify calls besides fwd's passes (the
 * draws, the acceptance tests, the copies), over h's life: for
 * engine_stats.spec_host_seconds. */
double spec_host_seconds(const spec_host *h);

#endif
