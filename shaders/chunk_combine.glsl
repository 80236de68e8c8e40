// chunk_combine.glsl: the softmax over a head's chunk partials that attn_vb
// and attn_vb_xs start with (attn_combine, for a prefill batch's few
// chunks, weighs them in one thread).  Chunk c of the head is the partial
// at X.x[pb + c * cs]: m, l in its first two words (params.h).  Chunk c's
// weight e^(m_c - M) goes to cw[c]; the result is 1 / sum_c e^(m_c - M) l_c.
// One chunk per thread, two workgroup reductions (max, then sum) through
// the includer's shared float red[] (a word per subgroup).  The includer
// declares X (the partials), CCAP and WGS.  Call from uniform control flow.

shared float cw[CCAP];

float chunk_weights(uint pb, uint cs, uint n_chunks)
{
    uint tid = gl_LocalInvocationIndex;
    float mx = -1.0 / 0.0;
    for (uint c = tid; c < n_chunks; c += WGS)
        mx = max(mx, X.x[pb + c * cs]);
    mx = subgroupMax(mx);
    if (subgroupElect())
        red[gl_SubgroupID] = mx;
    barrier();
    float M = -1.0 / 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
        M = max(M, red[i]);
    float ls = 0.0;
    for (uint c = tid; c < n_chunks; c += WGS) {
        float e = exp(X.x[pb + c * cs] - M);
        cw[c] = e;
        ls += e * X.x[pb + c * cs + 1u];
    }
    ls = subgroupAdd(ls);
    barrier();
    if (subgroupElect())
        red[gl_SubgroupID] = ls;
    barrier();
    float L = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
        L += red[i];
    return 1.0 / L;
}
