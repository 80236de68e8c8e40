/* vk_sync.c: the synchronisation planner (vk_sync.h).  Two passes over a
 * graph's table: the plan (steps, what joins each to the next, the sites of
 * the tagged words), then the recording (each call's dependency ends, the
 * barriers and links between steps). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "vk_sync.h"

void vk_sync_init(vk_sync *s, const vk_kb *kb, vk_buf counters, vk_buf params)
{
    const VkPhysicalDeviceProperties *pr = &kb->c->props;
    memset(s, 0, sizeof *s);
    s->kb = kb;
    s->counters = counters;
    s->params = params;
    s->device_known = pr->vendorID == 0x10DE || pr->deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
}

bool vk_sync_tagged(const vk_sync *s)
{
    uint32_t ll = s->kb->tune->ll;
    return !s->gave_up && (ll == VK_TUNE_AUTO ? s->device_known : ll != 0);
}

uint32_t vk_sync_dep_mask(const vk_sync *s)
{
    uint32_t f = s->kb->tune->dep_flags;
    if (s->gave_up)
        return 0;
    return f == VK_TUNE_AUTO ? (s->device_known ? UINT32_MAX : 0) : f;
}

void vk_sync_give_up(vk_sync *s)
{
    s->gave_up = true;
}

void vk_sync_retry(vk_sync *s)
{
    s->gave_up = false;
    s->retried = true;
}

/* Whether this recording injects give-ups (tune.dep_stall). */
static bool stalls(const vk_sync *s)
{
    uint32_t st = s->kb->tune->dep_stall;
    return st == 1 || (st == 2 && !s->retried);
}

/* ---- the plan ------------------------------------------------------------------------------ */

enum { JOIN_BARRIER, JOIN_BARRIER_GRID, JOIN_TAGGED, JOIN_COUNTER, JOIN_END };

typedef struct {
    uint32_t first, n;      /* its nodes */
    vk_res r, w;            /* what they read and write */
    int join;               /* JOIN_*: what joins it to the next step */
    vk_vec word;            /* JOIN_COUNTER: its counter */
    bool running_total;     /* the decode attention: the next step waits for params[VKP_ATTN_TOTAL] */
    uint32_t groups;        /* workgroups recorded */
} step;

typedef struct {
    const vk_sync *s;
    vk_graph *g;
    step *st;
    uint32_t ns;
    uint32_t mask;          /* dep_flags in force */
    int32_t *early;         /* per node: the step whose counter it waits on before its early reads, or -1 */
    uint32_t (*site)[3];    /* per node: the sites of tagged_in[0], tagged_in[1] and tagged_out (0: none) */
} plan;

static int bit_of(vk_res r)
{
    int b = 0;
    while (!(r >> b & 1))
        b++;
    return b;
}

/* Consecutive nodes that touch nothing another of them writes: one step. */
static void group(plan *p)
{
    for (uint32_t i = 0; i < p->g->n; i++) {
        const vk_node *n = &p->g->nodes[i];
        step *cur = p->ns ? &p->st[p->ns - 1] : NULL;
        if (!cur || (n->reads & cur->w) || (n->writes & (cur->r | cur->w))) {
            cur = &p->st[p->ns++];
            memset(cur, 0, sizeof *cur);
            cur->first = i;
        }
        cur->n++;
        cur->r |= n->reads;
        cur->w |= n->writes;
    }
}

/* The sites of the tagged words: each tagged write the next site, each
 * tagged read its buffer's latest writer's (with dep_stall a site nothing
 * writes).  VK_SYNC_UNTAGGED where a kernel cannot or the sites run out. */
static int assign_sites(plan *p, err_t *err)
{
    const vk_kb *kb = p->s->kb;
    uint32_t site_of[64] = {0}, next = 0;
    bool stall = stalls(p->s);
    for (uint32_t i = 0; i < p->g->n; i++) {
        const vk_node *n = &p->g->nodes[i];
        for (int k = 0; k < 2; k++) {
            vk_res t = n->tagged_in[k];
            if (!t)
                continue;
            if (!vk_node_tags(kb, n, k))
                return VK_SYNC_UNTAGGED;
            uint32_t site = site_of[bit_of(t)];
            for (int b = 0; b < 64; b++)
                if ((t >> b & 1) && site_of[b] != site)
                    site = 0;
            if (!site)
                return err_set(err, "internal: node %u polls tagged words no one node wrote before it", i);
            p->site[i][k] = stall ? VK_LL_STALL_SITE : site;
        }
        if (n->tagged_out) {
            if (!vk_node_tags(kb, n, -1) || ++next >= VK_LL_STALL_SITE)
                return VK_SYNC_UNTAGGED;
            for (int b = 0; b < 64; b++)
                if (n->tagged_out >> b & 1)
                    site_of[b] = next;
            p->site[i][2] = next;
        }
    }
    return 0;
}

/* What the planner knows at a boundary, walking the table. */
typedef struct {
    vk_res un_r, un_w;      /* read and written since the last counter or barrier (may still run) */
    vk_res bar_w;           /* written since the last barrier */
    vk_res unpolled;        /* tagged words written since the last barrier and not yet polled */
    int32_t writer[64];     /* per buffer: the step that wrote it last */
} walk;

/* Whether only tagged words join step P to step C. */
static bool tagged_ok(const plan *p, const step *P, const step *C, const walk *w)
{
    for (uint32_t i = P->first; i < P->first + P->n; i++) {
        const vk_node *n = &p->g->nodes[i];
        if (!n->writes || (n->writes & ~n->tagged_out))
            return false;
    }
    for (uint32_t i = C->first; i < C->first + C->n; i++) {
        const vk_node *n = &p->g->nodes[i];
        if ((n->reads & w->un_w & ~(n->tagged_in[0] | n->tagged_in[1])) || (n->writes & (w->un_r | w->un_w)) ||
            (n->reads_early & w->bar_w))
            return false;
    }
    return true;
}

/* The counter joining step P (index s) to step C: its segment's word for
 * C's bit (vk_sync.h). */
static vk_vec counter_word(const plan *p, uint32_t s, const step *C)
{
    uint32_t seg = (uint32_t)p->g->nodes[p->st[s].first].segment;
    uint32_t bit = (uint32_t)bit_of(p->g->nodes[C->first].dep_bit);
    return V(p->s->counters, 1 + (seg - 1) * VK_DEP_PER_LAYER + bit);
}

/* Whether a counter can join step P (index s) to step C; the early waits
 * it needs into early[] (per node of C). */
static bool counter_ok(const plan *p, uint32_t s, const step *C, const walk *w, int32_t *early)
{
    const vk_kb *kb = p->s->kb;
    const step *P = &p->st[s];
    const vk_node *c0 = &p->g->nodes[C->first];
    if (!(c0->dep_bit & p->mask) || w->unpolled || p->g->nodes[P->first].segment < 1)
        return false;
    /* a word counts one boundary's workgroups: where an earlier boundary
     * of the segment took the word of C's bit (two steps of one layer
     * given the same bit), a second producer's signals would let C's wait
     * end early -- a barrier instead */
    vk_vec word = counter_word(p, s, C);
    for (uint32_t t = 0; t < s; t++)
        if (p->st[t].join == JOIN_COUNTER && p->st[t].word.off == word.off)
            return false;
    for (uint32_t i = P->first; i < P->first + P->n; i++) {
        const vk_node *n = &p->g->nodes[i];
        /* an indirect grid is counted only for the decode attention's (the host keeps its total) */
        if (!vk_node_counts(kb, n) || (n->k.op == VK_OP_ATTN && n->k.a.attn.indirect && !P->running_total))
            return false;
    }
    for (uint32_t i = C->first; i < C->first + C->n; i++) {
        const vk_node *n = &p->g->nodes[i];
        early[i - C->first] = -1;
        if (n->dep_bit != c0->dep_bit || !vk_node_counts(kb, n))
            return false;
        vk_res e = n->reads_early & w->bar_w;
        if (!e)
            continue;
        int32_t from = w->writer[bit_of(e)];
        for (int b = 0; b < 64; b++)
            if ((e >> b & 1) && w->writer[b] != from)
                return false;
        /* its writer's step ended with a counter (P's is this one) */
        if (!vk_node_waits_early(n) || ((uint32_t)from != s && p->st[from].join != JOIN_COUNTER))
            return false;
        early[i - C->first] = from;
    }
    return true;
}

/* The decode attention, whose grid the host writes per token: the next
 * step waits for the host's running total of its workgroups. */
static bool attention_total(const plan *p, const step *P)
{
    const vk_node *n = &p->g->nodes[P->first];
    const vk_buf *ind = n->k.op == VK_OP_ATTN ? n->k.a.attn.indirect : NULL;
    const vk_buf *prm = &p->s->params;
    return P->n == 1 && ind && ind->buf == prm->buf && ind->off == prm->off + 4ull * VKP_ATTN_IND;
}

/* What joins each step to the next (vk_sync.h's rules). */
static void join_steps(plan *p)
{
    walk w = {0};
    for (int b = 0; b < 64; b++)
        w.writer[b] = -1;
    for (uint32_t s = 0; s < p->ns; s++) {
        step *P = &p->st[s];
        w.un_r |= P->r;
        w.un_w |= P->w;
        w.bar_w |= P->w;
        for (uint32_t i = P->first; i < P->first + P->n; i++) {
            const vk_node *n = &p->g->nodes[i];
            w.unpolled = (w.unpolled & ~(n->tagged_in[0] | n->tagged_in[1])) | n->tagged_out;
        }
        for (int b = 0; b < 64; b++)
            if (P->w >> b & 1)
                w.writer[b] = (int32_t)s;
        P->running_total = attention_total(p, P);
        if (s + 1 == p->ns) {
            P->join = JOIN_END;
            break;
        }
        const step *C = &p->st[s + 1];
        vk_res grid = 0;
        for (uint32_t i = C->first; i < C->first + C->n; i++)
            grid |= p->g->nodes[i].grid;
        if (grid & w.bar_w)
            P->join = JOIN_BARRIER_GRID;
        else if (tagged_ok(p, P, C, &w))
            P->join = JOIN_TAGGED;
        else if (counter_ok(p, s, C, &w, p->early + C->first))
            P->join = JOIN_COUNTER;
        else
            P->join = JOIN_BARRIER;
        for (uint32_t i = C->first; P->join != JOIN_COUNTER && i < C->first + C->n; i++)
            p->early[i] = -1;
        if (P->join == JOIN_COUNTER) {
            P->word = counter_word(p, s, C);
            w.un_r = w.un_w = 0;
        } else if (P->join != JOIN_TAGGED) {
            w.un_r = w.un_w = w.bar_w = w.unpolled = 0;
        }
    }
}

/* ---- the recording ------------------------------------------------------------------------- */

/* One node's dependency ends from the plan: the counter its step signals,
 * the one the step before signalled, its tagged words' sites, its early
 * wait. */
static void set_ends(plan *p, uint32_t s, uint32_t i)
{
    const vk_sync *sy = p->s;
    vk_node *n = &p->g->nodes[i];
    vk_dep *d = vk_node_dep(n);
    if (!d)
        return;
    *d = (vk_dep){0};
    const step *P = s ? &p->st[s - 1] : NULL, *S = &p->st[s];
    if (S->join == JOIN_COUNTER)
        d->signal = &S->word;
    const vk_buf params = n->dep_params ? *n->dep_params : sy->params;
    if (P && P->join == JOIN_COUNTER) {
        d->wait = &P->word;
        d->wait_n = P->running_total ? 0 : P->groups + (stalls(sy) ? 1 : 0);
        d->params = params;
    }
    if (n->tagged_in[0] || n->tagged_in[1] || n->tagged_out) {
        vk_node_sites(n, p->site[i], p->site[i][2]);
        d->params = params;
        d->ll_fails = sy->counters;
    }
    if (p->early[i] >= 0)
        vk_node_wait_early(n, &p->st[p->early[i]].word, p->st[p->early[i]].groups);
}

/* The listing's line after a call: what its arguments say it waits for,
 * signals, polls. */
static void annotate(const plan *p, uint32_t i, FILE *f)
{
    vk_node *n = &p->g->nodes[i];
    const vk_dep *d = vk_node_dep(n);
    const vk_moe_down_args *md = n->k.op == VK_OP_MOE_DOWN ? &n->k.a.moe_down : NULL;
    bool early = md && md->ids_wait;
    if (!d || !(d->signal || d->wait || d->ll_in || d->ll_out || early))
        return;
    fprintf(f, "    #");
    if (early)
        fprintf(f, " waits for word %u to reach %u workgroups a token before its early reads;", md->ids_wait->off,
                md->ids_wait_n);
    if (d->wait && d->wait_n)
        fprintf(f, " waits for word %u to reach %u workgroups a token;", d->wait->off, d->wait_n);
    else if (d->wait)
        fprintf(f, " waits for word %u to reach the attention's running total;", d->wait->off);
    if (d->ll_in)
        fprintf(f, " polls tagged words of site %u;", d->ll_in);
    if (n->k.op == VK_OP_KV_STORE && n->k.a.kv_store.ll_q)
        fprintf(f, " polls tagged words of site %u;", n->k.a.kv_store.ll_q);
    if (d->ll_out)
        fprintf(f, " writes tagged words of site %u;", d->ll_out);
    if (d->signal)
        fprintf(f, " signals word %u;", d->signal->off);
    fputc('\n', f);
}

static void record_join(vk_rec *r, int join)
{
    if (join == JOIN_BARRIER)
        vk_rec_barrier(r);
    else if (join == JOIN_BARRIER_GRID)
        vk_rec_barrier_indirect(r);
    else
        vk_rec_link(r, join == JOIN_TAGGED);
}

static int record_plan(plan *p, vk_rec *r)
{
    const vk_kb *kb = p->s->kb;
    int seg = INT_MIN;
    for (uint32_t s = 0; s < p->ns; s++) {
        step *S = &p->st[s];
        if (s)
            record_join(r, p->st[s - 1].join);
        for (uint32_t i = S->first; i < S->first + S->n; i++) {
            vk_node *n = &p->g->nodes[i];
            if (n->segment >= 0 && n->segment != seg)
                vk_rec_segment(r, seg = n->segment);
            set_ends(p, s, i);
            vk_call k;
            if (vk_node_build(kb, n, &k) < 0) {
                if (kb->err != r->err) /* the builder's line, where the recording's caller looks */
                    *r->err = *kb->err;
                return r->status = -1;
            }
            vk_rec_call(r, &k);
            if (r->status)
                return -1;
            S->groups += k.groups[0] * k.groups[1] * k.groups[2];
            if (r->list)
                annotate(p, i, r->list->f);
        }
        if (S->join == JOIN_COUNTER && !S->running_total && !S->groups)
            return r->status = err_set(r->err, "internal: a step of no workgroups signals a counter");
    }
    return r->status;
}

int vk_sync_record(const vk_sync *s, vk_graph *g, vk_rec *r)
{
    if (g->status)
        return r->status = -1;
    plan p = {.s = s, .g = g, .mask = vk_sync_dep_mask(s)};
    uint32_t n = g->n ? g->n : 1;
    p.st = calloc(n, sizeof *p.st);
    p.early = malloc(n * sizeof *p.early);
    p.site = calloc(n, sizeof *p.site);
    int rc = p.st && p.early && p.site ? 0 : err_set(r->err, "out of host memory");
    for (uint32_t i = 0; !rc && i < g->n; i++)
        p.early[i] = -1;
    if (!rc)
        rc = assign_sites(&p, r->err);
    if (!rc) {
        group(&p);
        join_steps(&p);
        rc = record_plan(&p, r);
    }
    free(p.st);
    free(p.early);
    free(p.site);
    if (rc < 0 && !r->status)
        r->status = rc;
    return rc;
}
