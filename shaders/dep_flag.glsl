// dep_flag.glsl: a dependency between two dispatches recorded without a
// pipeline barrier between them (gpu/PERF.md run 17).  The producer's
// workgroups each add 1 to a counter when their results are written; the
// consumer's workgroups, launched while the producer still runs (after all
// of its workgroups were launched: dispatches start in order), issue what
// does not depend on it (their weight loads) and then wait until the
// counter reaches epoch * producer workgroups, the epoch being the submit's
// number (params[VKP_EPOCH]).  Such a wait costs less than a barrier
// (gpu/PERF.md runs 16-17).  The wait gives up after a bound (~10 ms) and counts the
// failure in word 0, which the host checks after the token (a device that
// does not run the two dispatches as assumed gets an error, not a hang).
// A pipeline barrier also invalidates the compute units' L1 caches; a
// counter does not.  So every buffer a producer writes is read through
// coherent bindings by every kernel that can run between two barriers (the
// inputs x / h, the expert ids and weights, the outputs accumulated into):
// an L1 line loaded before the write -- by any kernel on that compute unit,
// even one reading a neighbouring word -- would otherwise serve stale data
// (seen on the H200: an L2-warming read of the ids, beside the router).
// Binding PC_B_DEP: the counters (coherent).  Spec constants PC_S_SIGNAL
// and PC_S_WAIT turn the two ends on in a kernel.

#include "params.h"

layout(set = 0, binding = PC_B_DEP) coherent buffer DepBuf { uint c[]; } DEP;
layout(constant_id = PC_S_SIGNAL) const uint SIGNAL = 0u;
layout(constant_id = PC_S_WAIT) const uint WAIT = 0u;

const uint DEP_SPIN_LIMIT = 1u << 15;

// What a wait waits for: epoch * n for a producer of n workgroups every
// token; n = 0: the decode attention, whose grid follows the context length
// (the host keeps the running total of its workgroups in the params).  Needs
// the shader's params as P.
#define DEP_WANT(n) ((n) != 0u ? P.p[VKP_EPOCH] * (n) : P.p[VKP_ATTN_TOTAL])

// Producer: every invocation has written its results.
void dep_signal(uint word)
{
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationIndex == 0u)
        atomicAdd(DEP.c[word], 1u);
}

// Consumer: returns once counter `word` reaches `want` (epoch * the
// producers' workgroups).
void dep_wait(uint word, uint want)
{
    if (gl_LocalInvocationIndex == 0u) {
        uint spins = 0u;
        while (int(atomicAdd(DEP.c[word], 0u) - want) < 0 && spins < DEP_SPIN_LIMIT)
            spins++;
        if (spins >= DEP_SPIN_LIMIT)
            atomicAdd(DEP.c[0], 1u);
    }
    barrier();
    memoryBarrierBuffer();
}

// ---- LL: tagged activation words (gpu/PERF.md run 30) -------------------------------
// NCCL's low-latency protocol: an activation a consumer reads with no
// barrier or counter since its producer is stored as 8-byte words (value
// bits, tag), each by one 8-byte store, which is single-copy atomic: a word
// is read either old or new as a whole.  The producer just stores (no fence,
// no atomic); the consumer loads the words it needs and re-loads those whose
// tag is not the one expected, so the value reaches it after one L2 round
// trip instead of a fence, an atomic, a poll and a load (dep_signal /
// dep_wait).  The tag is params[VKP_EPOCH] * VK_LL_SITES + site, site a
// number per write of the decode graph (params.h), so a word of an earlier
// token or an earlier write of this one never matches.  A poll gives up
// after DEP_SPIN_LIMIT rounds and counts that in word 0 (as a wait does):
// the host then records the graph without LL and decodes the token again.
// The buffers of tagged words are read through `coherent volatile` views
// (no L1 line, no load hoisted out of the poll).  Spec constants PC_S_LL_IN
// and PC_S_LL_OUT turn tagged input and output on in a kernel; the counters'
// binding is bound whenever either is (word 0).  The kernels that can are built twice (Makefile LL_SHADERS):
// plain, and with -DLL (`<name>_ll`, the spec constants and the tagged views
// of the buffers), so that the plain kernels' code stays what it was before
// LL, with no volatile views of their buffers (gpu/PERF.md run 30).
#ifdef LL
layout(constant_id = PC_S_LL_IN) const uint LL_IN = 0u;
layout(constant_id = PC_S_LL_OUT) const uint LL_OUT = 0u;
#else
const uint LL_IN = 0u;
const uint LL_OUT = 0u;
#endif

// The tag of `site` this submit (needs the shader's params as P).
#define LL_TAG(site) (P.p[VKP_EPOCH] * VK_LL_SITES + (site))

// A poll gave up: the token is decoded again without LL.
void ll_give_up()
{
    atomicAdd(DEP.c[0], 1u);
}

// Polls the tagged words at index IDX of view BUF (a uvec4 view: two words,
// a uvec2 view: one) while STALE -- their tags against the wanted one --
// holds, up to the bound; leaves them in WORDS, sets FAILED on a give-up.
// One loop for both views (GLSL has no generics).
#define LL_POLL(BUF, IDX, WORDS, FAILED, STALE)                                       \
    {                                                                                 \
        WORDS = BUF.w[IDX];                                                           \
        for (uint ll_s = 0u; STALE; ll_s++) {                                         \
            if (ll_s >= DEP_SPIN_LIMIT) {                                             \
                FAILED = true;                                                        \
                break;                                                                \
            }                                                                         \
            WORDS = BUF.w[IDX];                                                       \
        }                                                                             \
    }
#define LL_POLL4(BUF, IDX, TAG, WORDS, FAILED) \
    LL_POLL(BUF, IDX, WORDS, FAILED, WORDS.y != (TAG) || WORDS.w != (TAG))
#define LL_POLL2(BUF, IDX, TAG, WORD, FAILED) LL_POLL(BUF, IDX, WORD, FAILED, WORD.y != (TAG))
