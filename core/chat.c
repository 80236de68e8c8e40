/* chat.c: messages -> template -> tokens, and the streamed answer. */
#include "chat.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the session ------------------------------------------------------------------ */

static void add_stop(chat_session *s, int32_t id)
{
    if (id < 0 || s->n_stop == CHAT_MAX_STOP)
        return;
    for (uint32_t i = 0; i < s->n_stop; i++)
        if (s->stop[i] == id)
            return;
    s->stop[s->n_stop++] = id;
}

void chat_set_template(chat_session *s, const tmpl_preset *tmpl)
{
    s->tmpl = tmpl;
    s->n_stop = 0;
    const char *const *texts = tmpl_stop_texts(tmpl);
    for (size_t i = 0; texts && texts[i]; i++)
        add_stop(s, tok_find(s->tok, texts[i]));
    add_stop(s, tok_eos(s->tok));
    add_stop(s, tok_eot(s->tok));
}

void chat_init(chat_session *s, const tokenizer *tok, const tmpl_preset *tmpl, bool thinking)
{
    memset(s, 0, sizeof *s);
    conv_init(&s->conv);
    s->tok = tok;
    s->thinking = thinking;
    chat_set_template(s, tmpl);
}

void chat_free(chat_session *s)
{
    conv_free(&s->conv);
}

/* ---- rendering ---------------------------------------------------------------------- */

/* Only what people and tools write is guarded; the model's own turns are
 * rendered as the template intends (it may rewrite inline <think>). */
static bool guarded_role(const char *role)
{
    return strcmp(role, "assistant") != 0;
}

static int encode(const tokenizer *tok, const char *text, size_t len, bool special, int32_t **ids,
                  uint32_t *n, uint32_t *cap, err_t *err)
{
    for (;;) {
        int64_t need = tok_encode(tok, text, len, special, *ids + *n, *cap - *n, err);
        if (need < 0)
            return -1;
        if ((uint64_t)need <= *cap - *n) {
            *n += (uint32_t)need;
            return 0;
        }
        uint32_t ncap = *cap * 2 > *n + need ? *cap * 2 : *n + (uint32_t)need + 64;
        int32_t *p = realloc(*ids, ncap * sizeof *p);
        if (!p)
            return err_set(err, "out of memory");
        *ids = p;
        *cap = ncap;
    }
}

/* True when the text holds special-token text (it encodes differently with
 * special tokens parsed). */
static int has_special_text(const tokenizer *tok, const char *text, bool *out, err_t *err)
{
    size_t len = strlen(text);
    int32_t a[64], b[64];
    int64_t na = tok_encode(tok, text, len, true, a, 64, err);
    int64_t nb = na < 0 ? -1 : tok_encode(tok, text, len, false, b, 64, err);
    if (na < 0 || nb < 0)
        return -1;
    if (na != nb) {
        *out = true;
        return 0;
    }
    if (na <= 64) {
        *out = memcmp(a, b, (size_t)na * sizeof *a) != 0;
        return 0;
    }
    /* Long texts: compare in full. */
    int32_t *x = malloc((size_t)na * sizeof *x), *y = malloc((size_t)na * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return err_set(err, "out of memory");
    }
    tok_encode(tok, text, len, true, x, (size_t)na, NULL);
    tok_encode(tok, text, len, false, y, (size_t)na, NULL);
    *out = memcmp(x, y, (size_t)na * sizeof *x) != 0;
    free(x);
    free(y);
    return 0;
}

#define SENTINEL_FMT "\x02glmchat-message-%zu\x03"

/* The messages a prompt is made of: indexes into the conversation, in order
 * (all of them, or the system prompt and the newest ones when the oldest
 * were left out to fit the context). */
typedef struct {
    const size_t *idx;
    size_t n;
} selection;

static json_t *render_inputs(const chat_session *s, selection sel, const bool *guard)
{
    json_t *msgs = json_array();
    for (size_t i = 0; i < sel.n; i++) {
        const conv_msg *m = &s->conv.msgs[sel.idx[i]];
        json_t *o = json_object();
        json_object_set_new(o, "role", json_string(m->role));
        if (guard && guard[i]) {
            char sent[64];
            snprintf(sent, sizeof sent, SENTINEL_FMT, i);
            json_object_set_new(o, "content", json_string(sent));
        } else {
            json_object_set_new(o, "content", json_string(m->content));
        }
        if (m->reasoning)
            json_object_set_new(o, "reasoning_content", json_string(m->reasoning));
        json_array_append_new(msgs, o);
    }
    json_t *in = json_object();
    json_object_set_new(in, "messages", msgs);
    json_object_set_new(in, "add_generation_prompt", json_true());
    json_object_set_new(in, "enable_thinking", json_boolean(s->thinking));
    return in;
}

static char *render(const chat_session *s, selection sel, const bool *guard, err_t *err)
{
    json_t *in = render_inputs(s, sel, guard);
    char *out = tmpl_render(s->tmpl, in, err);
    json_decref(in);
    return out;
}

static void trim_span(const char *s, size_t *off, size_t *len)
{
    while (*len && isspace((unsigned char)s[*off]))
        (*off)++, (*len)--;
    while (*len && isspace((unsigned char)s[*off + *len - 1]))
        (*len)--;
}

/* Splits the sentinel rendering into template parts and guarded texts and
 * encodes them; checks that the parts and texts rebuild the real rendering
 * exactly (texts as given, or trimmed for templates that trim). */
static int encode_guarded(const chat_session *s, selection sel, const bool *guard, const char *real,
                          int32_t **ids, uint32_t *n, uint32_t *cap, err_t *err)
{
    char *marked = render(s, sel, guard, err);
    if (!marked)
        return -1;
    int rc = -1;
    for (int trimmed = 0; trimmed < 2 && rc != 0; trimmed++) {
        /* First pass: verify; second: encode. */
        const char *p = marked;
        size_t r = 0;
        bool ok = true;
        *n = 0;
        for (size_t i = 0; i < sel.n && ok; i++) {
            if (!guard[i])
                continue;
            char sent[64];
            snprintf(sent, sizeof sent, SENTINEL_FMT, i);
            const char *at = strstr(p, sent);
            if (!at)
                continue; /* the template left this message out */
            size_t part = (size_t)(at - p);
            const char *text = s->conv.msgs[sel.idx[i]].content;
            size_t off = 0, len = strlen(text);
            if (trimmed)
                trim_span(text, &off, &len);
            ok = strncmp(real + r, p, part) == 0 && strncmp(real + r + part, text + off, len) == 0;
            if (ok && (encode(s->tok, p, part, true, ids, n, cap, err) != 0 ||
                       encode(s->tok, text + off, len, false, ids, n, cap, err) != 0)) {
                free(marked);
                return -1;
            }
            r += part + len;
            p = at + strlen(sent);
        }
        if (ok && strcmp(real + r, p) == 0) {
            if (encode(s->tok, p, strlen(p), true, ids, n, cap, err) != 0) {
                free(marked);
                return -1;
            }
            rc = 0;
        }
    }
    free(marked);
    if (rc != 0)
        return err_set(err, "template %s rewrites a message that contains special-token text; "
                            "it cannot be encoded safely",
                       tmpl_name(s->tmpl));
    return 0;
}

static bool ends_in_think(const char *r)
{
    size_t n = strlen(r);
    while (n && isspace((unsigned char)r[n - 1]))
        n--;
    return n >= 7 && memcmp(r + n - 7, "<think>", 7) == 0;
}

static int prompt_of(const chat_session *s, selection sel, int32_t **ids_out, uint32_t *n_out, bool *opens_think,
                     err_t *err)
{
    bool *guard = calloc(sel.n + 1, sizeof *guard);
    if (!guard)
        return err_set(err, "out of memory");
    bool any = false;
    for (size_t i = 0; i < sel.n; i++) {
        const conv_msg *m = &s->conv.msgs[sel.idx[i]];
        if (guarded_role(m->role) && has_special_text(s->tok, m->content, &guard[i], err) != 0) {
            free(guard);
            return -1;
        }
        any |= guard[i];
    }
    char *real = render(s, sel, NULL, err);
    if (!real) {
        free(guard);
        return -1;
    }
    uint32_t cap = 256, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    int rc = ids ? 0 : err_set(err, "out of memory");
    if (rc == 0 && any)
        rc = encode_guarded(s, sel, guard, real, &ids, &n, &cap, err);
    else if (rc == 0)
        rc = encode(s->tok, real, strlen(real), true, &ids, &n, &cap, err);
    *opens_think = ends_in_think(real);
    free(real);
    free(guard);
    if (rc != 0) {
        free(ids);
        return -1;
    }
    *ids_out = ids;
    *n_out = n;
    return 0;
}

/* The first n messages (the selection of everything). */
static size_t *all_of(size_t n)
{
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    for (size_t i = 0; idx && i < n; i++)
        idx[i] = i;
    return idx;
}

int chat_prompt(const chat_session *s, size_t n_msgs, int32_t **ids_out, uint32_t *n_out, bool *opens_think,
                err_t *err)
{
    if (n_msgs > s->conv.n)
        n_msgs = s->conv.n;
    size_t *idx = all_of(n_msgs);
    if (!idx)
        return err_set(err, "out of memory");
    int rc = prompt_of(s, (selection){idx, n_msgs}, ids_out, n_out, opens_think, err);
    free(idx);
    return rc;
}

/* ---- fitting the context -------------------------------------------------------------------- */

uint32_t chat_answer_reserve(uint32_t n_ctx, int n_predict)
{
    uint32_t r = n_ctx / 4 < 1024 ? n_ctx / 4 : 1024;
    if (n_predict > 0 && (uint32_t)n_predict < r)
        r = (uint32_t)n_predict;
    return r ? r : 1;
}

const char *chat_ctx_policy_name(chat_ctx_policy p)
{
    return p == CHAT_CTX_STOP ? "stop" : "trim";
}

int chat_ctx_policy_parse(const char *name, chat_ctx_policy *out)
{
    if (!strcmp(name, "trim"))
        *out = CHAT_CTX_TRIM;
    else if (!strcmp(name, "stop"))
        *out = CHAT_CTX_STOP;
    else
        return -1;
    return 0;
}

/* Where the exchanges after the system prompt start: the first message
 * after it, then every user message.  The last exchange (from the last user
 * message on) is never left out, so n_droppable counts those before it. */
typedef struct {
    size_t base;        /* 1 after a system prompt, else 0 */
    size_t *start;      /* start[k]: first message of exchange k */
    size_t n, n_droppable;
} exchanges;

static int find_exchanges(const chat_session *s, size_t n_msgs, exchanges *x, err_t *err)
{
    memset(x, 0, sizeof *x);
    x->base = n_msgs && !strcmp(s->conv.msgs[0].role, "system") ? 1 : 0;
    x->start = malloc((n_msgs + 1) * sizeof *x->start);
    if (!x->start)
        return err_set(err, "out of memory");
    long last_user = -1;
    for (size_t i = x->base; i < n_msgs; i++) {
        bool user = !strcmp(s->conv.msgs[i].role, "user");
        if (i == x->base || user)
            x->start[x->n++] = i;
        if (user)
            last_user = (long)i;
    }
    for (size_t k = 0; k < x->n && last_user >= 0 && x->start[k] < (size_t)last_user; k++)
        x->n_droppable++;
    return 0;
}

/* One try: the prompt without the first `drop` exchanges. */
typedef struct {
    const chat_session *s;
    size_t n_msgs;
    exchanges x;
    size_t *idx;        /* room for the selection */
    uint64_t *least;    /* least[i]: a lower bound on the tokens of messages i.. (i >= base) */
    uint64_t least_system;
} fit_job;

#define FIT_BOUND_FACTOR 2

/* A lower bound on the tokens a message adds to any prompt: the user's
 * and the system's texts are in every rendering as they are (some
 * templates trim the ends), and a token stands for at most
 * tok_max_piece() bytes.  Other roles' texts may be rewritten (an
 * assistant's reasoning left out): 0 for them. */
static uint64_t least_tokens(const chat_session *s, const conv_msg *m)
{
    if (strcmp(m->role, "user") != 0 && strcmp(m->role, "system") != 0)
        return 0;
    size_t off = 0, len = strlen(m->content), piece = tok_max_piece(s->tok);
    trim_span(m->content, &off, &len);
    return piece ? (len + piece - 1) / piece : 0;
}

static int fit_bounds(fit_job *j, err_t *err)
{
    j->least = malloc((j->n_msgs + 1) * sizeof *j->least);
    if (!j->least)
        return err_set(err, "out of memory");
    j->least[j->n_msgs] = 0;
    for (size_t i = j->n_msgs; i-- > j->x.base;)
        j->least[i] = j->least[i + 1] + least_tokens(j->s, &j->s->conv.msgs[i]);
    j->least_system = j->x.base ? least_tokens(j->s, &j->s->conv.msgs[0]) : 0;
    return 0;
}

/* The bound for the prompt without the first `drop` exchanges. */
static uint64_t least_without(const fit_job *j, size_t drop)
{
    size_t from = drop ? j->x.start[drop] : j->x.base;
    return j->least_system + j->least[from];
}

static uint32_t clamp_u32(uint64_t v)
{
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

typedef struct {
    int32_t *ids;
    uint32_t n;
    bool opens;
    size_t drop;
} attempt;

static int try_without(const fit_job *j, size_t drop, attempt *a, err_t *err)
{
    size_t k = 0, from = drop ? j->x.start[drop] : j->x.base;
    if (j->x.base)
        j->idx[k++] = 0;
    for (size_t i = from; i < j->n_msgs; i++)
        j->idx[k++] = i;
    a->ids = NULL;
    a->drop = drop;
    return prompt_of(j->s, (selection){j->idx, k}, &a->ids, &a->n, &a->opens, err);
}

static void take(chat_fit *out, attempt *a, const fit_job *j)
{
    out->ids = a->ids;
    out->n_ids = a->n;
    out->opens_think = a->opens;
    out->fits = true;
    out->first_kept = a->drop ? j->x.start[a->drop] : j->x.base;
    out->n_dropped = out->first_kept - j->x.base;
    out->n_dropped_exchanges = a->drop;
}

static int fit(const fit_job *j, uint32_t room, chat_ctx_policy policy, size_t min_drop, chat_fit *out, err_t *err)
{
    attempt best, a;
    if (policy == CHAT_CTX_STOP)
        min_drop = 0;
    if (min_drop > j->x.n_droppable)
        min_drop = j->x.n_droppable;
    /* What cannot fit by length alone is not tokenized (a 100 MB message
     * took 44 s): no prompt of it at all, or none before the first
     * exchange whose prompt may fit.  The bound decides only when it is
     * over FIT_BOUND_FACTOR times the room: near the edge the count stays
     * exact (what the user is told the context needs), and what is
     * tokenized of the user's and system's texts stays under about
     * FIT_BOUND_FACTOR * room * tok_max_piece() bytes. */
    uint64_t limit = (uint64_t)room * FIT_BOUND_FACTOR;
    if (least_without(j, 0) > limit) {
        out->bounded = true;
        out->n_full = clamp_u32(least_without(j, 0));
        out->first_kept = j->x.base;
        if (policy == CHAT_CTX_STOP || j->x.n_droppable == 0) {
            out->n_least = out->n_full;
            return 0;
        }
        size_t d = min_drop ? min_drop : 1;
        while (d < j->x.n_droppable && least_without(j, d) > limit)
            d++;
        if (least_without(j, d) > limit) {
            out->n_least = clamp_u32(least_without(j, d));
            return 0;
        }
        min_drop = d;
    }
    if (!out->bounded && try_without(j, 0, &best, err) != 0)
        return -1;
    if (!out->bounded) {
        out->n_full = best.n;
        out->first_kept = j->x.base;
        if (best.n <= room && min_drop == 0) {
            take(out, &best, j);
            return 0;
        }
        free(best.ids);
        if (policy == CHAT_CTX_STOP || j->x.n_droppable == 0)
            return 0;
    }
    /* The fewest exchanges left out (at least min_drop) that make it fit,
     * by bisection over min_drop..n_droppable (more left out, fewer
     * tokens); `best` always fits. */
    if (try_without(j, j->x.n_droppable, &best, err) != 0)
        return -1;
    out->n_least = best.n;
    out->bounded = false; /* what is reported now was counted */
    if (best.n > room) {
        free(best.ids);
        return 0;
    }
    size_t lo = min_drop ? min_drop : 1, hi = j->x.n_droppable;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (try_without(j, mid, &a, err) != 0) {
            free(best.ids);
            return -1;
        }
        if (a.n <= room) {
            free(best.ids);
            best = a;
            hi = mid;
        } else {
            free(a.ids);
            lo = mid + 1;
        }
    }
    take(out, &best, j);
    return 0;
}

int chat_prompt_fit(const chat_session *s, size_t n_msgs, uint32_t n_ctx, uint32_t reserve, chat_ctx_policy policy,
                    chat_fit *out, err_t *err)
{
    return chat_prompt_fit_from(s, n_msgs, n_ctx, reserve, policy, 0, out, err);
}

int chat_prompt_fit_from(const chat_session *s, size_t n_msgs, uint32_t n_ctx, uint32_t reserve,
                         chat_ctx_policy policy, size_t min_dropped, chat_fit *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    out->n_ctx = n_ctx;
    out->reserve = reserve;
    out->policy = policy;
    if (reserve >= n_ctx)
        return err_set(err, "the %u tokens kept for the answer leave nothing of the %u-token context for the prompt",
                       reserve, n_ctx);
    fit_job j = {s, n_msgs < s->conv.n ? n_msgs : s->conv.n, {0}, NULL, NULL, 0};
    if (find_exchanges(s, j.n_msgs, &j.x, err) != 0)
        return -1;
    int rc = fit_bounds(&j, err);
    if (rc == 0)
        rc = (j.idx = malloc((j.n_msgs + 1) * sizeof *j.idx)) ? fit(&j, n_ctx - reserve, policy, min_dropped, out, err)
                                                               : err_set(err, "out of memory");
    free(j.idx);
    free(j.least);
    free(j.x.start);
    return rc;
}

void chat_fit_free(chat_fit *f)
{
    free(f->ids);
    f->ids = NULL;
}

void chat_fit_describe(const chat_fit *f, sbuf *out)
{
    if (f->fits && !f->n_dropped)
        return;
    if (f->fits) {
        sbuf_printf(out,
                    "The context is full: the oldest %zu exchange%s (%zu message%s) %s left out of the prompt, "
                    "which is now %u of %u tokens with %u kept for the answer.",
                    f->n_dropped_exchanges, f->n_dropped_exchanges == 1 ? "" : "s", f->n_dropped,
                    f->n_dropped == 1 ? "" : "s", f->n_dropped_exchanges == 1 ? "is" : "are", f->n_ids, f->n_ctx, f->reserve);
        return;
    }
    const char *least = f->bounded ? "at least " : "";
    if (f->policy == CHAT_CTX_STOP)
        sbuf_printf(out,
                    "The conversation is %s%u tokens; the context holds %u with %u kept for the answer. "
                    "Make room (a larger context, /undo, /clear) or let the oldest turns go (context policy trim).",
                    least, f->n_full, f->n_ctx, f->reserve);
    else
        sbuf_printf(out,
                    "The system prompt and the last message alone are %s%u tokens; the context holds %u "
                    "with %u kept for the answer.",
                    least, f->n_least ? f->n_least : f->n_full, f->n_ctx, f->reserve);
}

/* ---- the streamed answer ---------------------------------------------------------------- */

static const char open_tag[] = "<think>", close_tag[] = "</think>";

void chat_stream_init(chat_stream *st, bool opens_think)
{
    memset(st, 0, sizeof *st);
    st->in_think = opens_think;
}

/* Length of the longest suffix of s[0..n) that is a proper prefix of tag. */
static size_t partial_suffix(const char *s, size_t n, const char *tag)
{
    size_t t = strlen(tag);
    for (size_t k = t - 1; k > 0; k--)
        if (k <= n && memcmp(s + n - k, tag, k) == 0)
            return k;
    return 0;
}

static void add_content(chat_stream *st, const char *s, size_t n)
{
    if (!st->started) {
        while (n && isspace((unsigned char)*s))
            s++, n--;
        if (!n)
            return;
        st->started = true;
    }
    sbuf_add(&st->content, s, n);
}

static void process(chat_stream *st, const char *s, size_t n)
{
    while (n > 0) {
        if (st->in_think) {
            const char *end = memmem(s, n, close_tag, sizeof close_tag - 1);
            if (end) {
                sbuf_add(&st->reasoning, s, (size_t)(end - s));
                n -= (size_t)(end - s) + sizeof close_tag - 1;
                s = end + sizeof close_tag - 1;
                st->in_think = false;
                continue;
            }
            size_t keep = partial_suffix(s, n, close_tag);
            sbuf_add(&st->reasoning, s, n - keep);
            memcpy(st->hold, s + n - keep, keep);
            st->n_hold = keep;
            return;
        }
        if (st->started) {
            sbuf_add(&st->content, s, n);
            return;
        }
        /* Before any content: an opening tag may start the reasoning. */
        size_t ws = 0;
        while (ws < n && isspace((unsigned char)s[ws]))
            ws++;
        size_t rest = n - ws;
        if (rest >= sizeof open_tag - 1 && memcmp(s + ws, open_tag, sizeof open_tag - 1) == 0) {
            st->in_think = true;
            s += ws + sizeof open_tag - 1;
            n = rest - (sizeof open_tag - 1);
            continue;
        }
        if (rest < sizeof open_tag - 1 && memcmp(s + ws, open_tag, rest) == 0) {
            /* Maybe the start of the tag: wait for more (whitespace is dropped anyway). */
            memcpy(st->hold, s + ws, rest);
            st->n_hold = rest;
            return;
        }
        add_content(st, s, n);
        return;
    }
}

void chat_stream_feed(chat_stream *st, const char *text, size_t n)
{
    if (st->n_hold == 0 && !memchr(text, 0, n)) {
        process(st, text, n);
        return;
    }
    sbuf tmp = {0};
    sbuf_add(&tmp, st->hold, st->n_hold);
    /* A NUL byte cannot live in a C string or a JSON message: it becomes U+FFFD. */
    for (size_t i = 0; i < n; i++) {
        if (text[i])
            sbuf_addc(&tmp, text[i]);
        else
            sbuf_adds(&tmp, "\xef\xbf\xbd");
    }
    st->n_hold = 0;
    process(st, tmp.s, tmp.len);
    sbuf_free(&tmp);
}

static void trim_sbuf(sbuf *b, bool leading)
{
    if (!b->s)
        return;
    size_t start = 0;
    while (leading && start < b->len && isspace((unsigned char)b->s[start]))
        start++;
    size_t end = b->len;
    while (end > start && isspace((unsigned char)b->s[end - 1]))
        end--;
    memmove(b->s, b->s + start, end - start);
    b->len = end - start;
    b->s[b->len] = 0;
}

void chat_stream_finish(chat_stream *st)
{
    if (st->n_hold) {
        if (st->in_think)
            sbuf_add(&st->reasoning, st->hold, st->n_hold);
        else
            add_content(st, st->hold, st->n_hold);
        st->n_hold = 0;
    }
    trim_sbuf(&st->reasoning, true);
    trim_sbuf(&st->content, true);
}

void chat_stream_free(chat_stream *st)
{
    sbuf_free(&st->reasoning);
    sbuf_free(&st->content);
}
