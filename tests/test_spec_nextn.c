/* test_spec_nextn.c: the CPU reference's NextN (MTP) block against an
 * independent float64 formulation, on tiny random models made with a NextN
 * block (synth, as `glmchat mkmodel --nextn 1`), and the block's promises
 * (ref_forward.h): hidden states kept, rows independent of the batch,
 * chained rows, no state without the flag or the block.
 *
 * The oracle below recomputes the block in double from the dequantized
 * weights and differs from the reference in form, not only in precision:
 * MLA attention without the absorption (keys k_nope = attn_k_b^T latent and
 * values attn_v_b · latent per head and position, as the model was
 * trained), plain loops, no caches.  Its input h rows are the reference's
 * kept hidden states (checked separately: output · h must give the main
 * model's logits).
 *
 * Tolerances: f32 activations against double with exactly dequantized
 * weights: rel-L2 <= 1e-4 of the logits (the repository's bound for f32
 * against the float64 reference; ~1e-6 is typical) and the same argmax on
 * every row; the hidden-state check likewise. */
#include <math.h>
#include <unistd.h>

#include "model.h"
#include "quant.h"
#include "ref_forward.h"
#include "rope.h"
#include "synth.h"
#include "testlib.h"

/* M(err) through a call, so that the compiler does not check its 1 KiB
 * against the test message's room (the message is cut, as intended). */
__attribute__((noinline)) static const char *msg_of(const err_t *e) { return e->msg; }
#define M(e) msg_of(&(e))

static char tmpdir[256];

/* ---- models ---------------------------------------------------------------------- */

/* A tiny-glm-shaped model with one NextN block; `variant` changes the file
 * type / preset so the block is also seen quantized and DeepSeek-V2-like. */
static int make_model(const char *name, const char *preset, uint32_t ftype, uint64_t seed, uint32_t nextn,
                      model *m)
{
    synth_config c;
    err_t err;
    if (synth_preset(preset, &c, &err) < 0) {
        CHECK(0, "%s", M(err));
        return -1;
    }
    c.nextn = nextn;
    c.ftype = ftype;
    c.seed = seed;
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", tmpdir, name);
    synth_options opt = {.n_threads = 1};
    synth_stats st;
    if (synth_write(&c, path, &opt, &st, &err) < 0 || model_load(m, path, &err) < 0) {
        CHECK(0, "%s: %s", name, M(err));
        return -1;
    }
    unlink(path); /* the mapping stays valid */
    return 0;
}

static void random_tokens(int32_t *t, uint32_t n, uint32_t V, uint64_t seed)
{
    for (uint32_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        t[i] = (int32_t)((seed >> 33) % V);
    }
}

/* ---- the float64 oracle ------------------------------------------------------------ */

/* Row r of matrix e of w, dequantized, as doubles. */
static void row64(const mtensor *w, uint32_t e, uint64_t r, double *out)
{
    float *tmp = malloc(w->ne[0] * sizeof *tmp);
    quant_dequant_row(w->type, (const char *)mtensor_matrix(w, e) + r * w->nb1, tmp, w->ne[0]);
    for (uint64_t i = 0; i < w->ne[0]; i++)
        out[i] = tmp[i];
    free(tmp);
}

/* y[ne[1]] = W(e) x[ne[0]] */
static void matvec64(const mtensor *w, uint32_t e, const double *x, double *y)
{
    double *r = malloc(w->ne[0] * sizeof *r);
    for (uint64_t o = 0; o < w->ne[1]; o++) {
        row64(w, e, o, r);
        double acc = 0;
        for (uint64_t i = 0; i < w->ne[0]; i++)
            acc += r[i] * x[i];
        y[o] = acc;
    }
    free(r);
}

static void vec64(const mtensor *w, double *out)
{
    row64(w, 0, 0, out);
}

static void rmsnorm64(double *out, const double *x, const mtensor *w, uint64_t n, double eps)
{
    double *g = malloc(n * sizeof *g), ss = 0;
    vec64(w, g);
    for (uint64_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    double scale = 1.0 / sqrt(ss / (double)n + eps);
    for (uint64_t i = 0; i < n; i++)
        out[i] = x[i] * scale * g[i];
    free(g);
}

static void rope64(double *v, const model_config *c, uint32_t pos)
{
    float cs[256];
    rope_cos_sin(c, (float)pos, cs);
    for (uint32_t i = 0; i < c->qk_rope; i += 2) {
        double x0 = v[i], x1 = v[i + 1];
        v[i] = x0 * cs[i] - x1 * cs[i + 1];
        v[i + 1] = x0 * cs[i + 1] + x1 * cs[i];
    }
}

static double silu64(double x)
{
    return x / (1.0 + exp(-x));
}

/* SwiGLU FFN of (gate, up, down) matrices e: out = down(silu(gate x) * up x). */
static void swiglu64(const mtensor *g, const mtensor *u, const mtensor *d, uint32_t e, const double *x, double *out)
{
    uint64_t ff = g->ne[1];
    double *a = malloc(ff * sizeof *a), *b = malloc(ff * sizeof *b);
    matvec64(g, e, x, a);
    matvec64(u, e, x, b);
    for (uint64_t i = 0; i < ff; i++)
        a[i] = silu64(a[i]) * b[i];
    matvec64(d, e, a, out);
    free(a);
    free(b);
}

/* The routed experts and the shared one, added to x. */
static void moe64(const model *m, const model_layer *L, const double *xn, double *x)
{
    const model_config *c = &m->cfg;
    uint32_t E = c->n_expert, K = c->n_expert_used;
    uint64_t H = c->n_embd;
    double *prob = malloc(E * sizeof *prob), *bias = calloc(E, sizeof *bias), *eo = malloc(H * sizeof *eo);
    matvec64(&L->gate_inp, 0, xn, prob);
    if (c->gating == MODEL_GATING_SIGMOID) {
        for (uint32_t e = 0; e < E; e++)
            prob[e] = 1.0 / (1.0 + exp(-prob[e]));
    } else {
        double mx = -INFINITY, sum = 0;
        for (uint32_t e = 0; e < E; e++)
            mx = prob[e] > mx ? prob[e] : mx;
        for (uint32_t e = 0; e < E; e++)
            sum += (prob[e] = exp(prob[e] - mx));
        for (uint32_t e = 0; e < E; e++)
            prob[e] /= sum;
    }
    if (L->exp_probs_b.data)
        vec64(&L->exp_probs_b, bias);
    int32_t sel[64];
    double w[64], wsum = 0;
    for (uint32_t k = 0; k < K; k++) {
        int32_t best = -1;
        for (uint32_t e = 0; e < E; e++) {
            bool taken = false;
            for (uint32_t j = 0; j < k; j++)
                taken |= sel[j] == (int32_t)e;
            if (!taken && (best < 0 || prob[e] + bias[e] > prob[best] + bias[best]))
                best = (int32_t)e;
        }
        sel[k] = best;
        w[k] = prob[best];
        wsum += w[k];
    }
    for (uint32_t k = 0; k < K; k++) {
        if (c->expert_weights_norm)
            w[k] /= wsum;
        if (c->expert_weights_scale != 0.0f && c->expert_weights_scale != 1.0f)
            w[k] *= c->expert_weights_scale;
        swiglu64(&L->gate_exps, &L->up_exps, &L->down_exps, (uint32_t)sel[k], xn, eo);
        for (uint64_t i = 0; i < H; i++)
            x[i] += w[k] * eo[i];
    }
    if (c->n_expert_shared > 0) {
        swiglu64(&L->gate_shexp, &L->up_shexp, &L->down_shexp, 0, xn, eo);
        for (uint64_t i = 0; i < H; i++)
            x[i] += eo[i];
    }
    free(prob);
    free(bias);
    free(eo);
}

/* The NextN block over rows 0..n-1, pair p = (hin[p], tokens[p]) at
 * position pos0 + p, attention over all rows so far; logits of each row
 * into logits[p] and the normed output of each into out[p].  Caches in the
 * unabsorbed form: k_nope, k_rope and v per head and row. */
static void nextn64(const model *m, const int32_t *tokens, const double *hin, uint32_t n, uint32_t pos0,
                    double *logits, double *out)
{
    const model_config *c = &m->cfg;
    const model_layer *L = &m->layers[c->n_layer];
    uint64_t H = c->n_embd, NH = c->n_head, nope = c->qk_nope, rp = c->qk_rope, lora = c->kv_lora_rank;
    uint64_t hd = nope + rp, vh = c->v_head;
    double *kn = malloc(n * NH * nope * sizeof *kn), *kr = malloc(n * rp * sizeof *kr);
    double *vv = malloc(n * NH * vh * sizeof *vv);
    double *cat = malloc(2 * H * sizeof *cat), *e = malloc(H * sizeof *e), *x = malloc(H * sizeof *x);
    double *xn = malloc(H * sizeof *xn), *qa = malloc((c->q_lora_rank + 1) * sizeof *qa);
    double *q = malloc(NH * hd * sizeof *q), *kva = malloc((lora + rp) * sizeof *kva);
    double *heads = malloc(NH * vh * sizeof *heads), *att = malloc(H * sizeof *att);
    double *kb = malloc(nope * sizeof *kb), *vb = malloc(lora * sizeof *vb), *score = malloc(n * sizeof *score);
    const mtensor *te = L->nextn_embed_tokens.data ? &L->nextn_embed_tokens : &m->tok_embd;
    for (uint32_t p = 0; p < n; p++) {
        /* input: eh_proj [enorm(e) | hnorm(h)] */
        row64(te, 0, (uint64_t)tokens[p], e);
        rmsnorm64(cat, e, &L->nextn_enorm, H, c->rms_eps);
        rmsnorm64(cat + H, hin + p * H, &L->nextn_hnorm, H, c->rms_eps);
        matvec64(&L->nextn_eh_proj, 0, cat, x);
        /* attention */
        rmsnorm64(xn, x, &L->attn_norm, H, c->rms_eps);
        if (c->q_lora_rank) {
            matvec64(&L->q_a, 0, xn, qa);
            rmsnorm64(qa, qa, &L->q_a_norm, c->q_lora_rank, c->rms_eps);
            matvec64(&L->q_b, 0, qa, q);
        } else {
            matvec64(&L->q, 0, xn, q);
        }
        matvec64(&L->kv_a_mqa, 0, xn, kva);
        rmsnorm64(kva, kva, &L->kv_a_norm, lora, c->rms_eps);
        rope64(kva + lora, c, pos0 + p);
        memcpy(kr + p * rp, kva + lora, rp * sizeof *kr);
        for (uint64_t h = 0; h < NH; h++) {
            rope64(q + h * hd + nope, c, pos0 + p);
            /* k_nope[h] = attn_k_b[h]^T latent; v[h] = attn_v_b[h] latent */
            double *k = kn + (p * NH + h) * nope;
            memset(k, 0, nope * sizeof *k);
            for (uint64_t r = 0; r < lora; r++) {
                row64(&L->k_b, (uint32_t)h, r, kb);
                for (uint64_t i = 0; i < nope; i++)
                    k[i] += kb[i] * kva[r];
            }
            for (uint64_t o = 0; o < vh; o++) {
                row64(&L->v_b, (uint32_t)h, o, vb);
                double acc = 0;
                for (uint64_t r = 0; r < lora; r++)
                    acc += vb[r] * kva[r];
                vv[(p * NH + h) * vh + o] = acc;
            }
        }
        for (uint64_t h = 0; h < NH; h++) {
            const double *qh = q + h * hd;
            double mx = -INFINITY, sum = 0;
            for (uint32_t j = 0; j <= p; j++) {
                double sc = 0;
                for (uint64_t i = 0; i < nope; i++)
                    sc += qh[i] * kn[(j * NH + h) * nope + i];
                for (uint64_t i = 0; i < rp; i++)
                    sc += qh[nope + i] * kr[j * rp + i];
                score[j] = sc * c->kq_scale;
                mx = score[j] > mx ? score[j] : mx;
            }
            for (uint32_t j = 0; j <= p; j++)
                sum += (score[j] = exp(score[j] - mx));
            for (uint64_t o = 0; o < vh; o++) {
                double acc = 0;
                for (uint32_t j = 0; j <= p; j++)
                    acc += score[j] / sum * vv[(j * NH + h) * vh + o];
                heads[h * vh + o] = acc;
            }
        }
        matvec64(&L->attn_out, 0, heads, att);
        for (uint64_t i = 0; i < H; i++)
            x[i] += att[i];
        /* FFN */
        rmsnorm64(xn, x, &L->ffn_norm, H, c->rms_eps);
        if (L->is_moe) {
            moe64(m, L, xn, x);
        } else {
            swiglu64(&L->ffn_gate, &L->ffn_up, &L->ffn_down, 0, xn, att);
            for (uint64_t i = 0; i < H; i++)
                x[i] += att[i];
        }
        /* head */
        rmsnorm64(out + p * H, x, L->nextn_shared_head_norm.data ? &L->nextn_shared_head_norm : &m->output_norm, H,
                  c->rms_eps);
        matvec64(L->nextn_shared_head_head.data ? &L->nextn_shared_head_head : &m->output, 0, out + p * H,
                 logits + (uint64_t)p * c->n_vocab);
    }
    void *bufs[] = {kn, kr, vv, cat, e, x, xn, qa, q, kva, heads, att, kb, vb, score};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
}

/* ---- comparisons ------------------------------------------------------------------- */

static double rel_l2(const float *got, const double *ref, uint64_t n)
{
    double num = 0, den = 0;
    for (uint64_t i = 0; i < n; i++) {
        num += (got[i] - ref[i]) * (got[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return sqrt(num / den);
}

static uint32_t argmax_f(const float *v, uint32_t n)
{
    uint32_t b = 0;
    for (uint32_t i = 1; i < n; i++)
        b = v[i] > v[b] ? i : b;
    return b;
}

static uint32_t argmax_d(const double *v, uint32_t n)
{
    uint32_t b = 0;
    for (uint32_t i = 1; i < n; i++)
        b = v[i] > v[b] ? i : b;
    return b;
}

static rf_state *open_rf(const model *m, uint32_t n_ctx, uint32_t n_batch, bool nextn)
{
    rf_params p = {.n_ctx = n_ctx, .n_batch = n_batch, .n_threads = 2, .nextn = nextn};
    err_t err;
    rf_state *s = rf_new(m, &p, &err);
    CHECK(s != NULL, "rf_new: %s", M(err));
    return s;
}

/* The prompt through the main model, then NextN rows 0..n-1 from the
 * kept hidden states and three chained rows, each against the oracle. */
static void check_against_oracle(const char *what, const model *m, uint32_t n, uint64_t seed)
{
    const model_config *c = &m->cfg;
    uint32_t V = c->n_vocab, H = c->n_embd, chain = 3, rows = n + chain;
    int32_t *tok = malloc(rows * sizeof *tok);
    random_tokens(tok, rows, V, seed);
    rf_state *s = open_rf(m, rows + 1, 64, true);
    if (!s) {
        free(tok);
        return;
    }
    CHECK(rf_has_nextn(s), "%s: no NextN state", what);
    err_t err;
    float *main_logits = malloc((uint64_t)n * V * sizeof(float)), *nx = malloc((uint64_t)rows * V * sizeof(float));
    double *hin = calloc((uint64_t)rows * H, sizeof(double)), *ref = malloc((uint64_t)rows * V * sizeof(double));
    double *out = malloc((uint64_t)rows * H * sizeof(double)), *mref = malloc((uint64_t)V * sizeof(double));
    float *h = malloc(H * sizeof *h);
    CHECK(rf_eval(s, tok, n, 0, main_logits, true, &err) == 0, "%s: %s", what, M(err));
    /* h is output_norm(x): the head applied to it gives the main logits */
    double worst_h = 0;
    for (uint32_t p = 0; p < n; p++) {
        CHECK(rf_hidden(s, p, h, &err) == 0, "%s", M(err));
        for (uint32_t i = 0; i < H; i++)
            hin[(p + 1) * H + i] = h[i]; /* row p + 1 pairs h_p with x_{p+1}; row 0 has h = 0 */
        double hd[4096];
        for (uint32_t i = 0; i < H && i < 4096; i++)
            hd[i] = h[i];
        matvec64(&m->output, 0, hd, mref);
        double r = rel_l2(main_logits + (uint64_t)p * V, mref, V);
        worst_h = r > worst_h ? r : worst_h;
    }
    CHECK(worst_h <= 1e-4, "%s: output · h differs from the main logits: rel-L2 %.3g", what, worst_h);
    /* rows 0..n-1 from the kept states, in one call */
    CHECK(rf_nextn_eval(s, tok, n, 0, NULL, nx, true, &err) == 0, "%s: %s", what, M(err));
    /* three chained rows: (previous row's output, the next token) */
    for (uint32_t i = 0; i < chain; i++) {
        float *prev = malloc(H * sizeof *prev);
        memcpy(prev, rf_nextn_out(s), H * sizeof *prev);
        CHECK(rf_nextn_eval(s, tok + n + i, 1, n + i, prev, nx + (uint64_t)(n + i) * V, true, &err) == 0, "%s",
              M(err));
        free(prev);
    }
    /* the oracle: rows 0..n-1, then the chain on its own outputs */
    nextn64(m, tok, hin, n, 0, ref, out);
    for (uint32_t i = 0; i < chain; i++) {
        /* recomputing the whole history each time keeps the oracle simple */
        memcpy(hin + (uint64_t)(n + i) * H, out + (uint64_t)(n + i - 1) * H, H * sizeof(double));
        nextn64(m, tok, hin, n + i + 1, 0, ref, out);
    }
    double r = rel_l2(nx, ref, (uint64_t)rows * V);
    uint32_t agree = 0;
    for (uint32_t p = 0; p < rows; p++)
        agree += argmax_f(nx + (uint64_t)p * V, V) == argmax_d(ref + (uint64_t)p * V, V);
    CHECK(r <= 1e-4, "%s: NextN logits rel-L2 %.3g against the float64 oracle", what, r);
    CHECK(agree == rows, "%s: argmax agrees on %u of %u rows", what, agree, rows);
    printf("# %s: NextN rel-L2 %.2e over %u rows (%u chained), h check %.2e\n", what, r, rows, chain, worst_h);
    rf_free(s);
    void *bufs[] = {tok, main_logits, nx, hin, ref, out, mref, h};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
}

static void test_nextn_block_matches_f64_oracle(void)
{
    model m;
    if (make_model("glm-f32", "tiny-glm", SYNTH_FT_F32, 11, 1, &m) == 0) {
        check_against_oracle("tiny-glm F32", &m, 9, 5);
        model_free(&m);
    }
}

static void test_nextn_block_quantized_and_dsv2(void)
{
    model m;
    if (make_model("glm-q4k", "tiny-glm", SYNTH_FT_Q4_K_M, 12, 1, &m) == 0) {
        check_against_oracle("tiny-glm Q4_K_M", &m, 7, 6);
        model_free(&m);
    }
    if (make_model("dsv2-q8", "tiny-dsv2lite", SYNTH_FT_Q8_0, 13, 1, &m) == 0) {
        check_against_oracle("tiny-dsv2lite Q8_0 (no q-lora, softmax gating)", &m, 6, 7);
        model_free(&m);
    }
}

/* Rows in one call, one by one, and with a small n_batch give the same
 * bits; rows recomputed after the main cache is rewound and refilled with
 * other tokens follow the new tokens. */
static void test_nextn_rows_batch_independent(void)
{
    model m;
    if (make_model("glm-split", "tiny-glm", SYNTH_FT_Q8_0, 14, 1, &m) != 0)
        return;
    uint32_t V = m.cfg.n_vocab, n = 12;
    int32_t tok[12], other[12];
    random_tokens(tok, n, V, 21);
    random_tokens(other, n, V, 22);
    err_t err;
    float *one = malloc((uint64_t)n * V * sizeof(float)), *split = malloc((uint64_t)n * V * sizeof(float));
    float *again = malloc((uint64_t)n * V * sizeof(float));
    rf_state *a = open_rf(&m, n, 64, true), *b = open_rf(&m, n, 3, true);
    if (a && b) {
        CHECK(rf_eval(a, tok, n, 0, NULL, false, &err) == 0, "%s", M(err));
        CHECK(rf_nextn_eval(a, tok, n, 0, NULL, one, true, &err) == 0, "%s", M(err));
        for (uint32_t p = 0; p < n; p += 3) {
            uint32_t k = n - p < 3 ? n - p : 3;
            CHECK(rf_eval(b, tok + p, k, p, NULL, false, &err) == 0, "%s", M(err));
        }
        for (uint32_t p = 0; p < n; p++)
            CHECK(rf_nextn_eval(b, tok + p, 1, p, NULL, split + (uint64_t)p * V, true, &err) == 0, "%s", M(err));
        CHECK(memcmp(one, split, (uint64_t)n * V * sizeof(float)) == 0, "NextN rows differ between batchings");
        /* positions 5.. with other tokens, then the original ones again */
        CHECK(rf_eval(a, other + 5, n - 5, 5, NULL, false, &err) == 0, "%s", M(err));
        CHECK(rf_nextn_eval(a, other + 5, n - 5, 5, NULL, NULL, false, &err) == 0, "%s", M(err));
        CHECK(rf_eval(a, tok + 5, n - 5, 5, NULL, false, &err) == 0, "%s", M(err));
        CHECK(rf_nextn_eval(a, tok + 5, n - 5, 5, NULL, again + 5 * (uint64_t)V, true, &err) == 0, "%s", M(err));
        CHECK(memcmp(one + 5 * (uint64_t)V, again + 5 * (uint64_t)V, (uint64_t)(n - 5) * V * sizeof(float)) == 0,
              "NextN rows after a rewind differ from the first computation");
    }
    rf_free(a);
    rf_free(b);
    free(one);
    free(split);
    free(again);
    model_free(&m);
}

/* No NextN state without the flag or without the block; clear errors. */
static void test_nextn_absent_costs_nothing(void)
{
    model with, without;
    if (make_model("glm-nx", "tiny-glm", SYNTH_FT_F32, 15, 1, &with) != 0)
        return;
    if (make_model("glm-plain", "tiny-glm", SYNTH_FT_F32, 15, 0, &without) != 0) {
        model_free(&with);
        return;
    }
    err_t err;
    int32_t t = 3;
    float h[256];
    rf_state *off = open_rf(&with, 8, 8, false), *none = open_rf(&without, 8, 8, true);
    if (off && none) {
        CHECK(!rf_has_nextn(off) && !rf_has_nextn(none), "NextN state without the flag or the block");
        CHECK(rf_nextn_eval(off, &t, 1, 0, NULL, NULL, false, &err) < 0 && strstr(M(err), "NextN"), "%s",
              M(err));
        CHECK(rf_hidden(none, 0, h, &err) < 0 && strstr(M(err), "hidden"), "%s", M(err));
    }
    rf_state *on = open_rf(&with, 8, 4, true);
    if (on) {
        int32_t many[5] = {1, 2, 3, 4, 5}, bad = (int32_t)with.cfg.n_vocab;
        CHECK(rf_nextn_eval(on, many, 5, 0, NULL, NULL, false, &err) < 0 && strstr(M(err), "n_batch"), "%s",
              M(err));
        CHECK(rf_nextn_eval(on, many, 2, 7, NULL, NULL, false, &err) < 0 && strstr(M(err), "context"), "%s",
              M(err));
        CHECK(rf_nextn_eval(on, &bad, 1, 0, NULL, NULL, false, &err) < 0 && strstr(M(err), "out of range"), "%s",
              M(err));
    }
    rf_free(off);
    rf_free(none);
    rf_free(on);
    model_free(&with);
    model_free(&without);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/glmchat-test-nextn-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_nextn_block_matches_f64_oracle);
    RUN(test_nextn_block_quantized_and_dsv2);
    RUN(test_nextn_rows_batch_independent);
    RUN(test_nextn_absent_costs_nothing);
    rmdir(tmpdir);
    TESTS_DONE();
}
