/* cmd_bench.c: `glmchat bench` (prefill and decode speed, the per-kernel
 * profile) and `glmchat devices` (the Vulkan devices).
 *
 *   glmchat bench -m MODEL [-p 512] [-n 128] [--depth 0,4096] [--profile] [--routing]
 *                 [--plan] [--tune KEY=VALUE ...]
 *
 * Loads the model the way the chat does -- a decoder (core/engine/decoder.h) owns
 * the engine on its thread, the sampled profiler on -- warms up, then
 * measures: prefill tokens/s for a P-token prompt (random ids), in whole
 * batches and as the chat reads it (chunks cut by time); decode
 * tokens/s for N tokens after D tokens of context for each depth D, as the
 * chat's answers run: decoder jobs sampling with the model's preset (its
 * template's defaults, GPU sampling), the figure the status line shows;
 * greedy beside it (the same jobs at temperature 0); and with --profile the
 * per-kernel table from fully timed tokens, sorted by time.  Where the
 * model has a NextN block and the backend drafts with it, a line per k = 1,
 * 2, 3 for speculative decoding (engine.h) at each depth: the share of
 * drafts kept, tokens per verification step and the effective tokens/s with
 * the chat's sampling (the real acceptance: low on random weights), and the
 * same with forced acceptance -- greedy, the drafts being the answer's own
 * greedy continuation computed ahead (the greedy run's tokens), so every
 * draft is kept: the ceiling of the mechanics.  --routing
 * reports how many distinct experts each MoE layer used: on the Vulkan core
 * for a 64-token prompt of random ids, on the CPU reference for an English
 * prompt, with the top experts' shares of the router's choices.  --plan
 * prints the backend's recorded programs, every dispatch and what joins it
 * to the next, instead of measuring.  The backend's optional entries
 * (core/engine/engine.h) do the backend's part.  --tune overrides a field of the Vulkan core's tuning table for an
 * A/B run (`--tune help` lists them; the backend line names the fields
 * changed).  Logits must stay finite throughout; a non-finite value fails
 * the run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/backends.h"
#include "cpu/cpu_kernels.h"
#include "text/chat_template.h"
#include "common/cli_common.h"
#include "commands.h"
#include "engine/decoder.h"
#include "base/text_safe.h"
#include "ref/ref_forward.h"
#include "vk.h"

#define MAX_DEPTHS 8

typedef struct {
    uint32_t p, n, reps;
    uint32_t depth[MAX_DEPTHS], n_depth;
    bool profile, routing, no_draft, plan;
} bench_opts;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: glmchat bench -m MODEL [-p 512] [-n 128] [--depth D[,D...]] [--profile] [--routing] [--plan]\n"
               "Prefill tokens/s for a P-token prompt, decode tokens/s for N tokens after D\n"
               "tokens of context, and (--profile) where a decoded token's GPU time goes.\n\noptions:\n"
               "  -p, --prompt N       prompt tokens for the prefill figure (default 512; 0: skip)\n"
               "  -n, --n-gen N        decoded tokens per depth (default 128; 0: skip)\n"
               "  -d, --depth LIST     context lengths before decoding, e.g. 0,4096 (default 0)\n"
               "  -r, --repeat R       prefill repetitions, the best is reported (default 2)\n"
               "  -b, --batch N        the prompt batch (default: the chat's, which the backend chooses);\n"
               "                       ppP reads the prompt in whole batches, \"ppP (the chat's chunking)\"\n"
               "                       in the chunks the chat cuts to stop within a fraction of a second\n"
               "      --profile        per-kernel table (every dispatch timed)\n"
               "      --routing        per MoE layer, the distinct experts a prompt reached (Vulkan: 64\n"
               "                       random ids; CPU: an English prompt, with the top experts' shares)\n"
               "      --draft off      leave out the speculative decoding lines (NextN models)\n"
               "      --plan           the recorded GPU programs, dispatch by dispatch (no measurement)\n"
               "      --tune help      the Vulkan tuning knobs: key, default, range, the gpu/PERF.md run\n"
               "KV cache: f16 unless --kv-type f32.  Backend: auto unless --backend.\n%s",
               cli_common_help());
}

static int parse_depths(const char *s, bench_opts *b, err_t *err)
{
    b->n_depth = 0;
    while (*s) {
        char buf[32];
        size_t n = strcspn(s, ",");
        if (n == 0 || n >= sizeof buf || b->n_depth == MAX_DEPTHS)
            return err_set(err, "--depth: '%s' is not a list of up to %d numbers", s, MAX_DEPTHS);
        memcpy(buf, s, n);
        buf[n] = 0;
        if (cli_parse_u32(buf, "--depth", 0, 1u << 20, &b->depth[b->n_depth++], err) < 0)
            return -1;
        s += n + (s[n] == ',');
    }
    return b->n_depth ? 0 : err_set(err, "--depth: empty list");
}

/* A decoder (the chat's decode thread) on the model, once READY; the load
 * progress on stderr. */
static decoder *open_decoder(const engine_backend *be, const model *m, const tokenizer *tok, const engine_params *p,
                             err_t *err)
{
    decoder *dec = decoder_start(be, m, tok, p, err);
    if (!dec)
        return NULL;
    dec_event ev;
    for (;;) {
        if (!decoder_wait(dec, &ev, -1)) {
            err_set(err, "the decoder stopped answering");
            break;
        }
        dec_ev_type t = ev.type;
        if (t == DEC_EV_PROGRESS) {
            fprintf(stderr, "\r%s: %.1f / %.1f GiB", ev.text, ev.done / 1073741824.0, ev.total / 1073741824.0);
            if (ev.done >= ev.total)
                fprintf(stderr, "\n");
        } else if (t == DEC_EV_ERROR) {
            err_set(err, "%s", ev.text ? ev.text : "the engine failed to load");
        }
        decoder_event_free(&ev);
        if (t == DEC_EV_READY)
            return dec;
        if (t == DEC_EV_ERROR)
            break;
    }
    decoder_free(dec);
    return NULL;
}

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static int32_t rand_token(uint32_t n_vocab)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (int32_t)(rng_state % n_vocab);
}

/* ---- the measurements ----------------------------------------------------------- */

static int prefill(engine *e, uint32_t n, uint32_t n_vocab, double *secs, err_t *err)
{
    int32_t *t = malloc((n ? n : 1) * sizeof *t);
    if (!t)
        return err_set(err, "out of memory");
    for (uint32_t i = 0; i < n; i++)
        t[i] = rand_token(n_vocab);
    int32_t id;
    float v, lz;
    engine_output out = {.top_k = 1, .top_ids = &id, .top_logits = &v, .log_z = &lz};
    double t0 = now_s();
    int rc = engine_eval(e, t, n, &out, err);
    *secs = now_s() - t0;
    free(t);
    if (!rc && (!isfinite(v) || !isfinite(lz)))
        rc = err_set(err, "non-finite logits after the prompt (best %g, logsumexp %g)", v, lz);
    return rc;
}

/* n greedy steps from the last prompt token; returns seconds. */
static int decode(engine *e, uint32_t n, uint32_t n_vocab, double *secs, err_t *err)
{
    int32_t id = rand_token(n_vocab);
    float v = 0, lz = 0;
    engine_output out = {.top_k = 1, .top_ids = &id, .top_logits = &v, .log_z = &lz};
    double t0 = now_s();
    for (uint32_t i = 0; i < n; i++) {
        if (engine_eval(e, &id, 1, &out, err))
            return -1;
        if (!isfinite(v) || !isfinite(lz))
            return err_set(err, "non-finite logits at decode step %u (best %g, logsumexp %g)", i, v, lz);
    }
    *secs = now_s() - t0;
    return 0;
}

static int cmp_time(const void *a, const void *b)
{
    double x = ((const engine_kernel_stat *)a)->us_per_token, y = ((const engine_kernel_stat *)b)->us_per_token;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The per-kernel (per-step, on the CPU backend) table; `per` "token" or
 * "batch", `cpu`: the CPU backend's wording (steps end in barriers, the
 * time is thread 0's clock). */
static void print_table(engine_stats st, double roof_bytes, const char *per, bool cpu)
{
    if (!st.n_kernels) {
        printf("  (no per-kernel timings from this backend)\n");
        return;
    }
    qsort(st.kernels, st.n_kernels, sizeof st.kernels[0], cmp_time);
    double total = 0, bytes = 0;
    for (uint32_t k = 0; k < st.n_kernels; k++) {
        total += st.kernels[k].us_per_token;
        bytes += st.kernels[k].bytes_per_token;
    }
    printf("  %-16s %9s %10s %8s %10s %8s\n", "kernel", per[0] == 't' ? "calls/tok" : "calls", per[0] == 't' ? "us/tok" : "us",
           "% time", per[0] == 't' ? "MB/tok" : "MB", "GB/s");
    for (uint32_t k = 0; k < st.n_kernels; k++) {
        const engine_kernel_stat *s = &st.kernels[k];
        printf("  %-16s %9.1f %10.1f %7.1f%% %10.2f %8.0f\n", s->name, s->calls_per_token, s->us_per_token,
               total > 0 ? 100 * s->us_per_token / total : 0, s->bytes_per_token / 1e6, s->gbps);
    }
    printf("  %-16s %9s %10.1f %7.1f%% %10.2f %8.0f\n", "sum", "", total, 100.0, bytes / 1e6,
           total > 0 ? bytes / (total * 1e3) : 0);
    if (cpu)
        printf("  CPU time of a %s: %.1f us (per token); %u steps (barriers) per token; bytes %.3f GB/token%s%.3f%s\n",
               per, st.us_per_token_measured, st.dispatches_per_token, bytes / 1e9,
               per[0] == 't' ? " (the file's active weights: " : "", roof_bytes / 1e9, per[0] == 't' ? " GB)" : "");
    else if (per[0] == 't')
        printf("  GPU time of a timed token: %.1f us; %u dependent dispatches per token; bytes %.3f GB/token "
               "(the file's active weights: %.3f GB)\n",
               st.us_per_token_measured, st.dispatches_per_token, bytes / 1e9, roof_bytes / 1e9);
    else
        printf("  GPU time of the timed batch: %.1f us; %u dependent dispatches\n", st.us_per_token_measured,
               st.dispatches_per_token);
}

static void print_profile(engine *e, double roof_bytes)
{
    engine_stats st;
    engine_get_stats(e, &st);
    print_table(st, roof_bytes, "token", e->be->prompt_stats != NULL);
}

/* The sampling kernels' rows of the per-kernel table, one line (`how`: the
 * sampler of the run). */
static void print_sampling(engine *e, const char *how)
{
    engine_stats st;
    engine_get_stats(e, &st);
    printf("  sampling kernels, every dispatch timed, %s:", how);
    double total = 0;
    for (uint32_t k = 0; k < st.n_kernels; k++)
        if (strncmp(st.kernels[k].name, "sample_", 7) == 0) {
            printf(" %s %.1f us (%.1f calls)", st.kernels[k].name + 7, st.kernels[k].us_per_token,
                   st.kernels[k].calls_per_token);
            total += st.kernels[k].us_per_token;
        }
    printf("; %.1f us a token\n", total);
}

/* With experts in host memory: where a decoded token's time went, per
 * token and per host layer (engine_split_stat). */
/* The split's means over the tokens of `all` that are not in `before`
 * (the stats are means over every token measured since the reset). */
static engine_split_stat split_since(const engine_split_stat *all, const engine_split_stat *before)
{
    engine_split_stat d = *all;
    double na = (double)all->tokens, nb = (double)before->tokens, n = na - nb;
    d.tokens = all->tokens - before->tokens;
    if (n <= 0)
        return d;
    d.token_us = (all->token_us * na - before->token_us * nb) / n;
    d.gpu_us = (all->gpu_us * na - before->gpu_us * nb) / n;
    d.idle_us = (all->idle_us * na - before->idle_us * nb) / n;
    d.wait_us = (all->wait_us * na - before->wait_us * nb) / n;
    d.cpu_us = (all->cpu_us * na - before->cpu_us * nb) / n;
    d.turn_us = (all->turn_us * na - before->turn_us * nb) / n;
    d.side_us = (all->side_us * na - before->side_us * nb) / n;
    return d;
}

static void split_row(const char *name, double chat, double greedy, double layers)
{
    char pc[32], pg[32]; /* one word each: the tests read the columns by field */
    snprintf(pc, sizeof pc, "(%.1f)", chat / layers);
    snprintf(pg, sizeof pg, "(%.1f)", greedy / layers);
    printf("    %-34s %9.1f %-9s %9.1f %s\n", name, chat, pc, greedy, pg);
}

/* Where a decoded token's time went with experts in host memory: the
 * chat's sampling run (`chat`: the stats after it) and the greedy run after
 * it, side by side -- they differ in the tokens (so in the experts routed
 * to) and in the sampling after the last part. */
static void print_split(engine *e, const engine_split_stat *chat)
{
    engine_stats st;
    engine_get_stats(e, &st);
    const engine_split_stat *all = &st.split;
    if (!all->layers)
        return;
    if (all->packed_bytes)
        printf("  experts in host memory, %u layers: the CPU's packed copies %.1f MiB\n", all->layers,
               (double)all->packed_bytes / 1048576.0);
    else
        printf("  experts in host memory, %u layers: the CPU multiplies the file's rows (no packed copies)\n",
               all->layers);
    if (all->streamed) {
        double k = 1e3 / (double)all->streamed, L = all->layers;
        printf("  experts in host memory, %u layers; prompt batches that streamed them to the GPU: %llu, ms a batch "
               "(a layer): %.1f (%.2f), of which the host's layout %.1f (%.2f), its waits for a staging buffer "
               "%.1f (%.2f)\n",
               all->layers, (unsigned long long)all->streamed, all->stream_s * k, all->stream_s * k / L,
               all->layout_s * k, all->layout_s * k / L, all->stall_s * k, all->stall_s * k / L);
    }
    if (!all->tokens) {
        printf("  experts in host memory, %u layers: no token measured (the sampled profiler is off)\n", all->layers);
        return;
    }
    engine_split_stat z = {0}, g = split_since(all, chat);
    const engine_split_stat *c = chat->tokens ? chat : &z;
    if (!g.tokens)
        g = z;
    double L = all->layers;
    printf("  experts in host memory, %u layers; a decoded token, means of %llu and %llu sampled, us "
           "(per host layer in brackets):\n",
           all->layers, (unsigned long long)c->tokens, (unsigned long long)g.tokens);
    printf("    %-34s %18s %18s\n", "", "chat's sampling", "greedy");
    split_row("token (host clock)", c->token_us, g.token_us, L);
    split_row("GPU parts (timestamps)", c->gpu_us, g.gpu_us, L);
    split_row("GPU idle between parts", c->idle_us, g.idle_us, L);
    split_row("  host's turn: part seen -> next", c->turn_us, g.turn_us, L);
    split_row("    of which the CPU's experts", c->cpu_us, g.cpu_us, L);
    split_row("  hand-over: idle - turn", c->idle_us - c->turn_us, g.idle_us - g.turn_us, L);
    split_row("host waits: part submitted -> seen", c->wait_us, g.wait_us, L);
    split_row("shared experts (GPU, in the turns)", c->side_us, g.side_us, L);
}

/* The Vulkan core: distinct experts per layer for a 64-token prompt of
 * random ids, read back from the GPU's routing buffers. */
static int routing_vulkan(engine *e, uint32_t n_vocab, err_t *err)
{
    uint32_t n = 64;
    engine_rewind(e, 0);
    double s;
    if (prefill(e, n, n_vocab, &s, err))
        return -1;
    uint32_t distinct[1024], n_layers = 0, n_expert = 0;
    if (e->be->routing(e->impl, n, distinct, 1024, &n_layers, &n_expert, err))
        return -1;
    uint32_t lo = n_expert, sum = 0;
    printf("routing: distinct experts chosen by a %u-token prompt, per MoE layer (of %u):\n ", n, n_expert);
    for (uint32_t i = 0; i < n_layers; i++) {
        printf(" %u", distinct[i]);
        lo = distinct[i] < lo ? distinct[i] : lo;
        sum += distinct[i];
    }
    printf("\n  min %u, mean %.1f of %u experts\n", lo, n_layers ? (double)sum / n_layers : 0.0, n_expert);
    return 0;
}

/* A prompt in English for the CPU report: on a trained model routing
 * depends on the text, so the figure is for words, not random ids. */
static const char routing_text[] =
    "What is a river? A river is a large natural stream of water that flows into the sea. "
    "What does the ls command do? The ls command is used to list directory contents.";

/* One MoE layer's line: distinct experts and the three largest shares of
 * the layer's n * k choices. */
static void print_layer_routing(uint32_t il, const int32_t *sel, uint32_t n, uint32_t k, uint32_t n_expert,
                                uint32_t *count)
{
    memset(count, 0, n_expert * sizeof *count);
    for (uint64_t i = 0; i < (uint64_t)n * k; i++)
        count[sel[i]]++;
    uint32_t distinct = 0;
    for (uint32_t e = 0; e < n_expert; e++)
        distinct += count[e] > 0;
    printf("  layer %u: %u distinct;", il, distinct);
    for (int top = 0; top < 3 && top < (int)n_expert; top++) {
        uint32_t best = 0;
        for (uint32_t e = 1; e < n_expert; e++)
            if (count[e] > count[best])
                best = e;
        if (!count[best])
            break;
        printf("%s expert %u %.1f%%", top ? "," : "", best, 100.0 * count[best] / ((double)n * k));
        count[best] = 0;
    }
    printf("\n");
}

/* The CPU reference: the router's own choices for an English prompt, per
 * MoE layer the distinct experts reached and the top experts' shares. */
static int routing_cpu(const model *m, err_t *err)
{
    const model_config *c = &m->cfg;
    tokenizer *tok = tok_load(m->gguf, err);
    if (!tok)
        return -1;
    int32_t ids[512];
    int64_t n = tok_encode(tok, routing_text, strlen(routing_text), false, ids, 512, err);
    tok_free(tok);
    if (n < 0)
        return -1;
    if (n > 512)
        n = 512;
    if (n == 0 || c->n_expert == 0)
        return err_set(err, "--routing: %s", c->n_expert ? "the prompt has no tokens" : "the model has no experts");
    rf_params rp = {.n_ctx = (uint32_t)n, .n_batch = (uint32_t)n, .kv_f16 = false, .n_threads = 0};
    rf_state *rf = rf_new(m, &rp, err);
    uint64_t per_layer = (uint64_t)n * c->n_expert_used;
    int32_t *sel = malloc(c->n_layer * per_layer * sizeof *sel);
    uint32_t *count = malloc(c->n_expert * sizeof *count);
    int rc = -1;
    if (!rf || !sel || !count) {
        if (rf)
            err_set(err, "out of memory");
        goto out;
    }
    rf_record_routing(rf, sel);
    if (rf_eval(rf, ids, (uint32_t)n, 0, NULL, false, err))
        goto out;
    printf("routing (CPU reference): a %d-token English prompt; per MoE layer, the distinct experts of %u it "
           "reached (%u per token) and the largest shares of its %llu choices:\n",
           (int)n, c->n_expert, c->n_expert_used, (unsigned long long)per_layer);
    for (uint32_t il = c->n_dense_lead; il < c->n_layer; il++)
        print_layer_routing(il, sel + il * per_layer, (uint32_t)n, c->n_expert_used, c->n_expert, count);
    rc = 0;
out:
    rf_free(rf);
    free(sel);
    free(count);
    return rc;
}

static int routing(engine *e, const model *m, uint32_t n_vocab, err_t *err)
{
    return e->be->routing ? routing_vulkan(e, n_vocab, err) : routing_cpu(m, err);
}

/* --plan: the backend's recorded programs. */
static int print_plan(decoder *dec, err_t *err)
{
    engine *e = decoder_engine(dec);
    if (!e)
        return err_set(err, "internal: the decoder's engine is busy");
    if (!e->be->print_plan)
        return err_set(err, "--plan needs the Vulkan backend");
    return e->be->print_plan(e->impl, stdout, err);
}

/* The sampling of the two decode figures. */
typedef struct {
    sampler_params sampling, greedy;
    char desc[96];
} chat_sampling;

/* A decoder job: the prompt, how to draft, forced drafts (or NULL); what
 * it measured, and (record, optional) its n tokens. */
typedef struct {
    const int32_t *prompt;
    uint32_t n_prompt;
    int draft;                /* dec_job.draft */
    const int32_t *forced;
    int32_t *record;
} decode_run;

typedef struct {
    double tps;
    uint32_t steps, drafted, accepted;
    double spec_s, host_s; /* the job's drafting and verifying time, and the host's share of it */
} decode_result;

/* n random tokens (at least 1); NULL when out of memory. */
static int32_t *random_prompt(uint32_t n, uint32_t n_vocab)
{
    int32_t *p = malloc((n ? n : 1) * sizeof *p);
    for (uint32_t i = 0; p && i < (n ? n : 1); i++)
        p[i] = rand_token(n_vocab);
    return p;
}

/* One chat answer's decode rate: a decoder job of n tokens after the
 * prompt (no stop token), from an empty cache. */
static int run_job(decoder *dec, const decode_run *jr, uint32_t n, const sampler_params *sp, decode_result *res,
                   err_t *err)
{
    decoder_reset_cache(dec);
    dec_stats st0, st1;
    decoder_get_stats(dec, &st0);
    dec_job job = {.prompt = jr->prompt, .n_prompt = jr->n_prompt, .n_predict = (int)n, .sampling = *sp,
                   .draft = jr->draft, .forced = jr->forced, .n_forced = jr->forced ? n : 0};
    if (decoder_submit(dec, &job, err) < 0)
        return -1;
    dec_event ev;
    uint32_t got = 0;
    for (;;) {
        if (!decoder_wait(dec, &ev, -1))
            return err_set(err, "the decoder stopped answering");
        dec_ev_type t = ev.type;
        if (t == DEC_EV_TEXT && jr->record && ev.token >= 0 && got < n)
            jr->record[got++] = ev.token;
        if (t == DEC_EV_ERROR)
            err_set(err, "%s", ev.text ? ev.text : "decoding failed");
        if (t == DEC_EV_DONE) {
            decoder_get_stats(dec, &st1);
            *res = (decode_result){ev.decode_tps, ev.n_steps, ev.n_drafted, ev.n_accepted,
                                   st1.engine.spec_seconds - st0.engine.spec_seconds,
                                   st1.engine.spec_host_seconds - st0.engine.spec_host_seconds};
            if (ev.n_gen != n)
                err_set(err, "the answer stopped after %u of %u tokens", ev.n_gen, n);
        }
        bool ok = t != DEC_EV_ERROR && (t != DEC_EV_DONE || ev.n_gen == n);
        decoder_event_free(&ev);
        if (t == DEC_EV_DONE || t == DEC_EV_ERROR)
            return ok ? 0 : -1;
    }
}

/* The same after max(depth, 1) random tokens, without drafting. */
static int chat_decode(decoder *dec, uint32_t depth, uint32_t n, const sampler_params *sp, double *tps, err_t *err)
{
    int32_t *prompt = random_prompt(depth, decoder_n_vocab(dec));
    if (!prompt)
        return err_set(err, "out of memory");
    decode_run jr = {.prompt = prompt, .n_prompt = depth ? depth : 1, .draft = DEC_DRAFT_OFF};
    decode_result r;
    int rc = run_job(dec, &jr, n, sp, &r, err);
    free(prompt);
    *tps = r.tps;
    return rc;
}

/* The speculative decoding lines of one depth: k = 1, 2, 3 with the chat's
 * sampling (real acceptance) and forced (greedy, the drafts being the
 * greedy answer computed first), against the same runs without drafts. */
static int spec_lines(decoder *dec, uint32_t depth, uint32_t n, const chat_sampling *cs, err_t *err)
{
    uint32_t np = depth ? depth : 1;
    int32_t *prompt = random_prompt(depth, decoder_n_vocab(dec)), *greedy = malloc(n * sizeof *greedy);
    int rc = 0;
    if (!prompt || !greedy) {
        rc = err_set(err, "out of memory");
        goto out;
    }
    decode_result chat0, greedy0, r, f;
    decode_run jr = {.prompt = prompt, .n_prompt = np, .draft = DEC_DRAFT_OFF, .record = greedy};
    if ((rc = run_job(dec, &jr, n, &cs->greedy, &greedy0, err)) != 0)
        goto out;
    jr.record = NULL;
    if ((rc = run_job(dec, &jr, n, &cs->sampling, &chat0, err)) != 0)
        goto out;
    for (int k = 1; k <= 3; k++) {
        jr.draft = k;
        jr.forced = NULL;
        if ((rc = run_job(dec, &jr, n, &cs->sampling, &r, err)) != 0)
            goto out;
        jr.forced = greedy;
        if ((rc = run_job(dec, &jr, n, &cs->greedy, &f, err)) != 0)
            goto out;
        printf("  drafting k=%d @ depth %u: %.0f%% of drafts kept, %.2f tokens/step, %.1f tokens/s with the chat's "
               "sampling (%.2fx); forced acceptance %.2f tokens/step, %.1f tokens/s greedy (%.2fx)\n",
               k, depth, r.drafted ? 100.0 * r.accepted / r.drafted : 0.0,
               r.steps ? (double)(r.accepted + r.steps) / r.steps : 0.0, r.tps, chat0.tps > 0 ? r.tps / chat0.tps : 0.0,
               f.steps ? (double)(f.accepted + f.steps) / f.steps : 0.0, f.tps,
               greedy0.tps > 0 ? f.tps / greedy0.tps : 0.0);
        if (r.steps && f.steps)
            printf("    a step: %.2f ms with the chat's sampling, %.2f of them the host's draws and tests; forced "
                   "%.2f ms, %.2f the host's\n",
                   1e3 * r.spec_s / r.steps, 1e3 * r.host_s / r.steps, 1e3 * f.spec_s / f.steps,
                   1e3 * f.host_s / f.steps);
        if (f.accepted != f.drafted)
            printf("  (forced drafts rejected: %u of %u -- greedy with drafts should keep every one)\n",
                   f.drafted - f.accepted, f.drafted);
    }
out:
    free(prompt);
    free(greedy);
    return rc;
}

/* The prompt as the chat reads it: the engine's batch (the chat's unless
 * -b), chunks cut to the decoder's DECODER_CHUNK_S from the times of the
 * chunks before (the pp line's included, as a chat's earlier turns are),
 * so that Esc stops it within a chunk.  The figure a user gets. */
static int prompt_as_chat(engine *e, const bench_opts *b, uint32_t n_vocab, err_t *err)
{
    double best = 1e30, s;
    uint32_t best_chunks = 0;
    for (uint32_t r = 0; r < b->reps; r++) {
        engine_rewind(e, 0);
        uint32_t seen = e->chunks_seen;
        if (prefill(e, b->p, n_vocab, &s, err))
            return -1;
        if (s < best) {
            best = s;
            best_chunks = e->chunks_seen - seen;
        }
    }
    uint32_t nc = best_chunks ? best_chunks : 1;
    printf("pp%u (the chat's chunking): %.1f tokens/s (chunks of ~%u tokens, ~%.0f ms each, at most %u; best of %u)\n",
           b->p, b->p / best, (b->p + nc / 2) / nc, best * 1e3 / nc, e->params.n_batch, b->reps);
    return 0;
}

static int run(decoder *dec, const model *m, const bench_opts *b, const chat_sampling *cs, err_t *err)
{
    engine *e = decoder_engine(dec);
    if (!e)
        return err_set(err, "internal: the decoder's engine is busy");
    bool drafts = engine_can_draft(e) && !b->no_draft;
    uint32_t V = m->cfg.n_vocab;
    model_census cen;
    model_census_compute(m, &cen);
    void (*set_profile)(void *, profile_mode) = e->be->set_profile;
    bool vk = set_profile && e->be->prefill_stats; /* the per-kernel tables */
    double s;
    /* warm-up: pipelines, caches, clocks; both samplers */
    double warm;
    if (prefill(e, 16 < b->p ? 16 : (b->p ? b->p : 16), V, &s, err) || decode(e, 8, V, &s, err) ||
        chat_decode(dec, 0, 8, &cs->sampling, &warm, err) || chat_decode(dec, 0, 8, &cs->greedy, &warm, err))
        return -1;
    e = decoder_engine(dec);
    engine_rewind(e, 0);
    if (vk)
        set_profile(e->impl, PROFILE_OFF);
    engine_set_chunk_seconds(e, 0); /* the prompt figure: whole chunks of n_batch */
    if (b->p) {
        double best = 1e30;
        for (uint32_t r = 0; r < b->reps; r++) {
            engine_rewind(e, 0);
            if (prefill(e, b->p, V, &s, err))
                return -1;
            best = s < best ? s : best;
        }
        printf("pp%u: %.1f tokens/s (%.1f ms, whole chunks of %u, best of %u)\n", b->p, b->p / best, best * 1e3,
               b->p < e->params.n_batch ? b->p : e->params.n_batch, b->reps);
        if (b->profile && vk) {
            engine_rewind(e, 0);
            set_profile(e->impl, PROFILE_FULL);
            if (prefill(e, b->p, V, &s, err))
                return -1;
            set_profile(e->impl, PROFILE_OFF);
            printf("  prompt batch with every dispatch timed: %.1f ms\n", s * 1e3);
            engine_stats st;
            e->be->prefill_stats(e->impl, &st);
            print_table(st, 0, "batch", false);
        }
        if (b->profile && e->be->prompt_stats) { /* every step is timed: the prompt's own steps */
            engine_stats st;
            e->be->prompt_stats(e->impl, &st);
            printf("  the prompt's steps (every step timed; per prompt token):\n");
            print_table(st, 0, "token", true);
        }
    }
    engine_set_chunk_seconds(e, DECODER_CHUNK_S); /* the chat's again */
    if (b->p && prompt_as_chat(e, b, V, err))
        return -1;
    double tg0 = 0;
    for (uint32_t d = 0; d < b->n_depth && b->n; d++) {
        uint32_t D = b->depth[d];
        double chat, greedy;
        if (vk)
            set_profile(e->impl, PROFILE_SAMPLED); /* the chat's */
        if (e->be->reset_profile)
            e->be->reset_profile(e->impl); /* this depth's table */
        engine_stats after_chat;
        if (chat_decode(dec, D, b->n, &cs->sampling, &chat, err))
            return -1;
        engine_get_stats(decoder_engine(dec), &after_chat);
        if (chat_decode(dec, D, b->n, &cs->greedy, &greedy, err))
            return -1;
        if (D == 0 || tg0 == 0)
            tg0 = chat;
        printf("tg%u @ depth %u: %.1f tokens/s with the chat's sampling (%s), %.1f greedy (%+.1f%%); "
               "%.3f ms/token, weights %.0f GB/s of the file's %.3f GB/token",
               b->n, D, chat, cs->desc, greedy, 100 * (greedy - chat) / chat, 1e3 / chat,
               cen.active_bytes * chat / 1e9, cen.active_bytes / 1e9);
        if (D && tg0 > 0 && D != b->depth[0])
            printf(", %.1f%% of the first depth", 100 * chat / tg0);
        printf("\n");
        print_split(decoder_engine(dec), &after_chat.split);
        if (drafts && spec_lines(dec, D, b->n, cs, err))
            return -1;
        if (b->profile && e->be->prompt_stats) { /* every step is timed, always: the chat's tokens */
            printf("  the decoded tokens' steps (both runs above):\n");
            print_profile(e, (double)cen.active_bytes);
        }
        if (!vk || !b->profile)
            continue;
        engine_rewind(e, 0);
        if (D && prefill(e, D, V, &s, err))
            return -1;
        set_profile(e->impl, PROFILE_FULL);
        uint32_t nf = 8;
        double s2;
        if (decode(e, nf, V, &s2, err))
            return -1;
        printf("  every dispatch timed: %.1f tokens/s (serialized; for the table only)\n", nf / s2);
        print_profile(e, (double)cen.active_bytes);
        /* what the chat's sampler costs against greedy, kernel by kernel
         * (the table above asks only for the best token) */
        for (int gr = 0; gr < 2; gr++) {
            if (e->be->reset_profile)
                e->be->reset_profile(e->impl);
            double tps;
            if (chat_decode(dec, D, 16, gr ? &cs->greedy : &cs->sampling, &tps, err))
                return -1;
            print_sampling(decoder_engine(dec), gr ? "greedy" : "the chat's sampling");
        }
        set_profile(e->impl, PROFILE_SAMPLED);
    }
    if (b->routing && routing(e, m, V, err))
        return -1;
    engine_stats fin;
    engine_get_stats(decoder_engine(dec), &fin);
    if (fin.sync_gave_up_at)
        printf("note: a dependency wait gave up at token %llu (the GPU did not run two dispatches together as "
               "assumed; %u in all); every program since joins its steps by barriers, slower than the figures would "
               "be, %s\n",
               (unsigned long long)fin.sync_gave_up_at, fin.sync_give_ups,
               fin.sync_retry_at ? "until the counters are tried again" : "for the rest of the session");
    else if (fin.sync_give_ups)
        printf("note: dependency waits gave up %u time%s (the GPU did not run two dispatches together as assumed); "
               "the counters were tried again and hold, but the tokens in between ran on barriers\n",
               fin.sync_give_ups, fin.sync_give_ups == 1 ? "" : "s");
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    cli_options o;
    cli_options_init(&o);
    bench_opts b = {.p = 512, .n = 128, .reps = 2, .depth = {0}, .n_depth = 1};
    err_t err = {{0}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--tune") == 0 && i + 1 < argc && strcmp(argv[i + 1], "help") == 0) {
            vk_tune_print(stdout);
            cli_options_free(&o);
            return 0;
        }
        int r = cli_parse_common(&o, argc, argv, &i, &err);
        if (r < 0)
            goto usage_err;
        if (r > 0)
            continue;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            cli_options_free(&o);
            return 0;
        } else if ((strcmp(a, "-p") == 0 || strcmp(a, "--prompt") == 0) && i + 1 < argc) {
            if (cli_parse_u32(argv[++i], a, 0, 1u << 20, &b.p, &err) < 0)
                goto usage_err;
        } else if ((strcmp(a, "-n") == 0 || strcmp(a, "--n-gen") == 0) && i + 1 < argc) {
            if (cli_parse_u32(argv[++i], a, 0, 1u << 20, &b.n, &err) < 0)
                goto usage_err;
        } else if ((strcmp(a, "-r") == 0 || strcmp(a, "--repeat") == 0) && i + 1 < argc) {
            if (cli_parse_u32(argv[++i], a, 1, 100, &b.reps, &err) < 0)
                goto usage_err;
        } else if ((strcmp(a, "-d") == 0 || strcmp(a, "--depth") == 0) && i + 1 < argc) {
            if (parse_depths(argv[++i], &b, &err) < 0)
                goto usage_err;
        } else if (strcmp(a, "--profile") == 0) {
            b.profile = true;
        } else if (strcmp(a, "--routing") == 0) {
            b.routing = true;
        } else if (strcmp(a, "--plan") == 0) {
            b.plan = true;
        } else if (strcmp(a, "--draft") == 0 && i + 1 < argc && strcmp(argv[i + 1], "off") == 0) {
            b.no_draft = true;
            i++;
        } else {
            err_set(&err, "bench: unknown option or missing value: '%s'", a);
            goto usage_err;
        }
    }
    if (!o.model_path) {
        err_set(&err, "no model given (-m FILE)");
        goto usage_err;
    }
    uint32_t maxd = 0;
    for (uint32_t d = 0; d < b.n_depth; d++)
        maxd = b.depth[d] > maxd ? b.depth[d] : maxd;
    uint32_t span = b.p > b.n ? b.p : b.n;
    if (span < 64)
        span = 64;

    model m;
    if (model_load(&m, o.model_path, &err) < 0) {
        fprintf(stderr, "glmchat: %s\n", err.msg);
        cli_options_free(&o);
        return 1;
    }
    const engine_backend *be = app_find_backend(o.backend, &err);
    if (be && cli_check_tune(&o, be, &err))
        be = NULL;
    engine_params p;
    engine_params_default(&p);
    p.kv = o.kv_given ? o.kv : KV_F16; /* f16 on every backend: the figures compare with llama.cpp's */
    p.n_threads = o.n_threads;
    p.device_index = o.device;
    p.gpu_mem = o.gpu_mem;
    p.n_cpu_moe = o.n_cpu_moe;
    p.n_ctx = o.n_ctx ? o.n_ctx : maxd + span + 16;
    p.n_batch = o.n_batch ? o.n_batch : ENGINE_BATCH_AUTO; /* the chat's: -b, else the backend's choice */
    p.profile = PROFILE_SAMPLED; /* the chat's; the prompt figure turns it off */
    p.tune = o.tune;
    p.n_tune = o.n_tune;
    /* the NextN state where the model and backend have it, also where auto
     * would not draft (the drafting lines measure k = 1..3 anyway) */
    p.draft = b.no_draft ? ENGINE_DRAFT_OFF : 3;
    int rc = 1;
    double t0 = now_s();
    chat_sampling cs;
    tokenizer *tok = be ? tok_load(m.gguf, &err) : NULL;
    decoder *dec = tok ? open_decoder(be, &m, tok, &p, &err) : NULL;
    if (dec) {
        /* the chat's sampling: the template preset's defaults and the file's
         * recommendation (as the chat's settings_to_sampler without user
         * settings), a fixed seed */
        const tmpl_preset *tp = tmpl_detect(m.gguf);
        sampler_params_default(&cs.sampling);
        tmpl_sampling_defaults(tp, &cs.sampling.temp, &cs.sampling.top_p, &cs.sampling.min_p, &cs.sampling.top_k);
        tmpl_model_sampling(m.gguf, &cs.sampling.temp, &cs.sampling.top_p, &cs.sampling.min_p, &cs.sampling.top_k);
        cs.sampling.seed = 1;
        cs.greedy = cs.sampling;
        cs.greedy.temp = 0;
        snprintf(cs.desc, sizeof cs.desc, "%s: temp %g, top-k %d, top-p %g, min-p %g", tmpl_name(tp),
                 (double)cs.sampling.temp, cs.sampling.top_k, (double)cs.sampling.top_p, (double)cs.sampling.min_p);
        char path[1024], name[4 * sizeof m.cfg.name]; /* the file's name and general.name, inert */
        tsafe_one_line_buf(path, sizeof path, o.model_path, strlen(o.model_path));
        tsafe_one_line_buf(name, sizeof name, m.cfg.name[0] ? m.cfg.name : m.cfg.arch,
                           strlen(m.cfg.name[0] ? m.cfg.name : m.cfg.arch));
        printf("model: %s (%s, %u layers, %u experts, %.2f GiB)\n", path, name,
               m.cfg.n_layer, m.cfg.n_expert, gguf_file_size(m.gguf) / 1073741824.0);
        /* the engine's figures, not the request's: a batch left to the
         * backend, or longer than the context, is what the engine made it */
        const engine *eng = decoder_engine(dec);
        const engine_params *ep = eng ? &eng->params : &p;
        printf("backend: %s\nload: %.1f s; context %u tokens, prompt batch %u tokens%s, KV cache %s\n",
               decoder_describe(dec), now_s() - t0, ep->n_ctx, ep->n_batch, o.n_batch ? " (-b)" : "",
               p.kv == KV_F16 ? "f16" : "f32");
        fflush(stdout);
        rc = (b.plan ? print_plan(dec, &err) : run(dec, &m, &b, &cs, &err)) ? 1 : 0;
        decoder_free(dec);
    }
    tok_free(tok);
    if (rc) {
        err_prefix(&err, "%s", o.model_path); /* inert, as every message is */
        fprintf(stderr, "glmchat: %s\n", err.msg);
    }
    model_free(&m);
    cli_options_free(&o);
    return rc;
usage_err:
    fprintf(stderr, "glmchat: %s\n(see `glmchat bench --help`)\n", err.msg);
    cli_options_free(&o);
    return 2;
}

/* ---- devices ------------------------------------------------------------------------ */

/* What `--backend auto` takes, and why: for MODEL when given (the estimate
 * of backends.h), else the rule. */
static void print_auto_choice(const char *model_path, bool have_device, const vk_device_info *best)
{
    err_t err;
    const cpu_kernels *k = cpu_kernels_best(&err);
    char cpu[128];
    snprintf(cpu, sizeof cpu, "the CPU backend (%s kernels, %ld threads)", k ? k->name : "no usable",
             sysconf(_SC_NPROCESSORS_ONLN));
    if (model_path) {
        model m;
        char why[512];
        if (model_load_ex(&m, model_path, MODEL_LOAD_NO_CONVERT, &err) < 0) {
            printf("auto: cannot weigh %s: %s\n", model_path, err.msg);
            return;
        }
        if (app_choose_backend("auto", &m, why, sizeof why, &err))
            printf("auto, for %s: %s\n", model_path, why);
        else
            printf("auto: %s\n", err.msg);
        model_free(&m);
        return;
    }
    if (!have_device)
        printf("auto: %s -- no usable Vulkan device\n", cpu);
    else if (strcmp(best->kind, "cpu") != 0)
        printf("auto: Vulkan on %s (a %s GPU)\n", best->name, best->kind);
    else
        printf("auto: whichever of %s and Vulkan on %s (which runs on the CPU) an estimate for the model says is "
               "faster (`glmchat devices -m MODEL` shows the choice)\n",
               cpu, best->name);
}

int cmd_devices(int argc, char **argv)
{
    const char *model_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: glmchat devices [-m MODEL]\nLists the Vulkan devices (the index is what --device takes), "
                   "whether each can run glmchat,\nand which backend --backend auto takes (for MODEL: the faster "
                   "one for it) and why.\n");
            return 0;
        }
        if ((strcmp(argv[i], "-m") == 0 || strcmp(argv[i], "--model") == 0) && i + 1 < argc) {
            model_path = argv[++i];
            continue;
        }
        fprintf(stderr, "glmchat: devices: unknown option '%s'\n(see `glmchat devices --help`)\n", argv[i]);
        return 2;
    }
    vk_device_info d[VK_MAX_DEVICES];
    uint32_t n;
    int best;
    err_t err;
    if (vk_list_devices(d, &n, &best, &err)) {
        print_auto_choice(model_path, false, NULL);
        fprintf(stderr, "glmchat: %s\n", err.msg);
        return 1;
    }
    if (n == 0) {
        print_auto_choice(model_path, false, NULL);
        fprintf(stderr, "glmchat: no Vulkan device found (install a driver, e.g. mesa-vulkan-drivers)\n");
        return 1;
    }
    for (uint32_t i = 0; i < n; i++) {
        const vk_device_info *v = &d[i];
        printf("%u: %s [%s] Vulkan %u.%u, %.1f GiB device-local, subgroup %u, max allocation %.0f MiB, "
               "max storage buffer %.0f MiB, shared memory %u KiB%s%s%s\n",
               i, v->name, v->kind, v->api_major, v->api_minor, v->device_local_bytes / 1073741824.0,
               v->subgroup_size, v->max_alloc_bytes / 1048576.0, v->max_range_bytes / 1048576.0, v->shared_bytes / 1024,
               v->coopmat ? ", cooperative matrices" : "", v->idot_fast ? ", fast 8-bit integer dot products" : "",
               (int)i == best ? "  <- default" : "");
        if (!v->usable)
            printf("   unusable: lacks %s\n", v->missing);
    }
    print_auto_choice(model_path, best >= 0, best >= 0 ? &d[best] : NULL);
    if (best < 0) {
        fprintf(stderr, "glmchat: no Vulkan device can run glmchat\n");
        return 1;
    }
    return 0;
}
