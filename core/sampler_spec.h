/* sampler_spec.h: the speculative-sampling acceptance rule (Leviathan et
 * al. 2023, Chen et al. 2023), on the sampler's integer probabilities
 * (sampler_probs, units of 2^-31), so that every backend -- the CPU here,
 * a GPU in its own kernels -- takes the same decisions from the same bits.
 *
 * A draft d was drawn from the drafter's distribution Q; P is the main
 * model's distribution at the same position (the chat sampler's, penalties
 * over the window with the drafts before d included).
 *
 *  - accept d iff u * Q[d] < P[d] * 2^32 for the test's 32 random bits u:
 *    with probability min(1, P[d] / Q[d]) to within 2^-32 (P[d] = 0 never
 *    accepts; Q[d] = 0 < P[d] always does);
 *  - on a rejection the token comes from the residual R[i] = max(0, P[i] -
 *    Q[i]) (when R sums to 0, which exact arithmetic never gives after a
 *    rejection, from P): T = sum R, U = floor(T * u' / 2^32) for the
 *    draw's bits u', the token is the lowest id whose running R-sum (ids
 *    ascending) exceeds U;
 *  - a drafter that is not random (external drafts, forced ones) has Q
 *    one-hot on d (Q[d] = 2^31): accepted with probability P[d], the
 *    residual is P without d;
 *  - greedy is the same rule with P one-hot on the best token: a draft is
 *    kept iff it is that token, and the residual is that token.
 * After all k drafts are accepted the bonus token is an ordinary draw
 * (sampler_pick) at the last position.  The output then follows P at every
 * position, whatever Q is: the distribution of decoding without drafts. */
#ifndef GLM_SAMPLER_SPEC_H
#define GLM_SAMPLER_SPEC_H

#include <stdbool.h>
#include <stdint.h>

bool sampler_spec_accept(uint32_t p_d, uint32_t q_d, uint32_t u);
/* The residual draw over n tokens; Q NULL: one-hot on d. */
int32_t sampler_spec_residual(const uint32_t *P, const uint32_t *Q, int32_t d, uint32_t n, uint32_t u);

#endif
