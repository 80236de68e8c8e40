/* sampler.h: token sampling, defined so that every backend picks the very
 * same token.
 *
 * Promises: greedy, temperature, top-k, top-p, min-p, repetition / presence
 * / frequency penalties over a window of recent tokens; a seedable RNG
 * (same seed, same logits -> same tokens); no allocation per token (buffers
 * sized once at sampler_new).
 *
 * One token is a pure function of the logits and a sampler_request (the
 * settings, the penalty window's tokens and one 32-bit uniform drawn from
 * the sampler's RNG).  The CPU code here is the reference; the Vulkan
 * engine computes the same function on the GPU (shaders/sample_*.comp) and
 * returns only the token.  The definition uses integer weights, so sums do
 * not depend on their order and a parallel reduction gives the same bits:
 *
 *  1. penalties: each window token t seen c times: l[t] = pen(canon(l[t])),
 *     pen(x) = (x > 0 ? x * inv_rp : x * rp) - (float)c * freq - pres, in
 *     float, in that order (inv_rp = 1.0f / rp);
 *  2. canon(x): NaN -> -inf, |x| < FLT_MIN (zeros, subnormals) -> +0; the
 *     order of the tokens: higher canon(logit) first, lower id on ties;
 *  3. greedy (temp <= 0 or NaN, or 1/temp not finite), or the best logit M
 *     not finite: the first token;
 *  4. weights: m(i) = q31(e(l[i] - M)), r(i) = q31(e((l[i] - M) * inv_t)),
 *     e = sk_fast_exp, q31(w) = (uint32_t)(w * 2^31), inv_t = 1.0f / temp;
 *  5. C: the first top_k tokens when 0 < top_k < n_vocab, else all;
 *  6. top-p (top_p < 1): P = floor(top_p * 2^32), Z = sum of m over C,
 *     T = max(1, floor(Z * P / 2^32)); n_p: the shortest prefix of C whose
 *     m-sum reaches T;
 *  7. min-p (min_p > 0): n_m: the tokens with l >= M + logf(min_p) (at
 *     least 1);
 *  8. kept: the first min(|C|, n_p, n_m) tokens;
 *  9. the draw: S = sum of r over the kept tokens, U = floor(S * u / 2^32)
 *     for the request's uniform u; the token: the first kept token, in id
 *     order, whose running r-sum (in id order) exceeds U.  (Any fixed order
 *     draws from the same distribution; the ids' needs no sorting, so the
 *     GPU draws over a whole flat vocabulary in one pass.)
 * (Weights below 2^-31 of the best token's count as 0: such tokens are never
 * drawn.  The best token always weighs 2^31, so S > 0, as long as inv_t is a
 * finite number >= 0: a request carrying any other inv_t -- one not made by
 * sampler_prepare -- is greedy, on every backend: sampler_request_draws.)
 * On a 154880 vocabulary a draw takes ~0.2 ms with the GLM defaults on
 * LM-like logits, ~1.2 ms on flat ones where top-p cuts first, ~0.64 ms on
 * the synthetic files' (sd 1, where min-p binds first; 0.80 while the draw
 * took the order), ~0.1 ms greedy, on one AVX-512 core (tests/tools/
 * bench_text; the previous sampler, which the GPU could not reproduce, took
 * ~0.07 ms).  The kept tokens' weights are
 * computed once (gathered, vectorised) and serve the draw again at
 * temperature 1. */
#ifndef GLM_SAMPLER_H
#define GLM_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

typedef struct {
    float temp;            /* 0: greedy (lowest id on ties) */
    int top_k;             /* 0: off */
    float top_p;           /* 1: off */
    float min_p;           /* 0: off */
    float repeat_penalty;  /* 1: off */
    float presence_penalty;
    float frequency_penalty;
    int penalty_window;    /* recent tokens the penalties look at (at most SAMPLER_MAX_WINDOW) */
    uint64_t seed;
} sampler_params;

#define SAMPLER_MAX_WINDOW 4096

/* The draw's order (step 9), by name: conversation files record it with
 * each answer's seed, since the same seed draws another token under another
 * order.  "id" since the draw walks the kept tokens by id; answers recorded
 * before that name none and were drawn in the order ("order"). */
#define SAMPLER_DRAW "id"
#define SAMPLER_DRAW_BEFORE "order"

void sampler_params_default(sampler_params *p);

/* ---- the settings people and files give ---------------------------------------------- */

typedef enum {
    SAMPLER_TEMP,
    SAMPLER_TOP_K,
    SAMPLER_TOP_P,
    SAMPLER_MIN_P,
    SAMPLER_REPEAT_PENALTY,
    SAMPLER_PRESENCE_PENALTY,
    SAMPLER_FREQUENCY_PENALTY,
} sampler_setting;

/* Below this a temperature is greedy in all but name (a logit 0.087 below
 * the best one already weighs e^-87, which counts as 0), and 1/temp
 * overflows a float long before 0: such values are refused, not guessed at. */
#define SAMPLER_TEMP_MIN 0.001

/* The one check of a sampler setting's value, wherever it comes from (the
 * command line, /set, the settings file, a conversation file), made before
 * the value becomes a float: 0 when usable, else -1 and one line in err
 * naming the value `name` (the option, key or field it came from).
 * Refused: NaN and infinities; nonzero values closer to 0 than FLT_MIN (a
 * float would hold them subnormal, which a GPU may flush); values outside
 * the setting's range (temp 0 for greedy or SAMPLER_TEMP_MIN..100; top-k
 * an integer 0..1000000; top-p and min-p 0..1; repeat-penalty 0.1..10;
 * presence- and frequency-penalty -2..2).  The seed takes any 64-bit
 * value, so it has nothing to check here. */
int sampler_check(sampler_setting which, const char *name, double v, err_t *err);
/* sampler_check of every setting of p, named as the settings keys are. */
int sampler_params_check(const sampler_params *p, err_t *err);

/* One token's sampling, everything the definition above needs besides the
 * logits (made by sampler_prepare; the arrays belong to the sampler and
 * stay valid until its next call). */
typedef struct {
    uint32_t greedy;       /* temp <= 0 */
    float inv_temp;
    uint32_t top_k;        /* 0: off (also any value >= the vocabulary) */
    uint32_t top_p_on;
    uint32_t top_p_q32;    /* floor(top_p * 2^32) */
    uint32_t min_p_on;
    float log_min_p;       /* logf(min_p) */
    uint32_t penalties_on;
    float rp, inv_rp, freq, pres;
    uint32_t n_pen;        /* distinct tokens of the window */
    const int32_t *pen_ids;
    const uint32_t *pen_counts;
    uint32_t uniform;      /* the draw's 32 random bits */
} sampler_request;

typedef struct sampler sampler;

sampler *sampler_new(const sampler_params *p, uint32_t n_vocab);
void sampler_free(sampler *s);
void sampler_set_params(sampler *s, const sampler_params *p); /* reseeds when seed changed */
/* Records a token in the penalty window (prompt and generated tokens). */
void sampler_accept(sampler *s, int32_t id);
void sampler_reset(sampler *s);

/* Vector code for the passes over the whole vocabulary: 0 portable C,
 * 1 AVX2, 2 AVX-512 (x86-64).  sampler_new picks the best the CPU runs;
 * every level gives the same tokens, so this is for tests and benchmarks.
 * Returns the level now in use (never above what the CPU supports); with
 * s NULL, only what that level would be. */
int sampler_set_simd(sampler *s, int level);

/* Whether a request draws (false: greedy): not greedy and an inverse
 * temperature that is a finite number >= 0.  Every backend decides by this,
 * so a request with any inv_temp picks a token in range. */
bool sampler_request_draws(const sampler_request *rq);

/* The request for the next token: the settings, the window, and (unless
 * greedy) the next uniform from the RNG.  Greedy also when 1/temp is not a
 * finite float (a temperature below ~3e-39, or NaN). */
void sampler_prepare(sampler *s, sampler_request *rq);
/* The token the definition picks for these logits (n_vocab floats,
 * penalised in place); *prob (optional) gets its share of the kept tokens'
 * weight (r / S: for display, not part of the definition).  Uses s only
 * for scratch. */
int32_t sampler_pick(sampler *s, const sampler_request *rq, float *logits, float *prob);
/* sampler_prepare + sampler_pick. */
int32_t sampler_sample(sampler *s, float *logits);

/* ---- speculative decoding (the acceptance rule: sampler_spec.h) ---------- */

/* Requests alive at once in a speculative step: the token after the last
 * one and after each of up to SAMPLER_SPEC_SLOTS - 1 drafts. */
#define SAMPLER_SPEC_SLOTS 5
/* Probability 1 in the units of sampler_probs. */
#define SAMPLER_PROB_ONE (1u << 31)

/* The distribution sampler_pick draws from, as integers in units of 2^-31:
 * P[i] = floor(r(i) * 2^31 / S) for the kept tokens (r, S of step 9), 0 for
 * the others; greedy (or a best logit that is not finite): SAMPLER_PROB_ONE
 * for the token picked.  sampler_pick's draw gives token i with
 * probability r(i) / S to within 2^-32, so P is that to within 2^-31.
 * logits (n_vocab) are penalised in place as by sampler_pick. */
void sampler_probs(sampler *s, const sampler_request *rq, float *logits, uint32_t *P);
/* sampler_probs, and the token sampler_pick would pick for the same
 * request and logits, from one pass (a draft and its q_i). */
int32_t sampler_probs_pick(sampler *s, const sampler_request *rq, float *logits, uint32_t *P);
/* The drafter's request (its q): the settings without the penalties; the
 * uniform from the RNG unless greedy. */
void sampler_prepare_draft(sampler *s, sampler_request *rq);
/* The request for the token after the window plus extra[0..n_extra) --
 * drafts not accepted yet (n_extra < SAMPLER_SPEC_SLOTS) -- with its
 * penalty list in slot `slot` (< SAMPLER_SPEC_SLOTS), valid until the next
 * call for that slot; the window itself is left as it was.  The uniform
 * from the RNG unless greedy. */
void sampler_prepare_ahead(sampler *s, const int32_t *extra, uint32_t n_extra, uint32_t slot, sampler_request *rq);
/* 32 bits from the RNG (the acceptance tests). */
uint32_t sampler_uniform(sampler *s);

#endif
