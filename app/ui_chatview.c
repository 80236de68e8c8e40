/* ui_chatview.c: the chat pane: blocks of wrapped lines, scrollback, drawing. */
#include "ui_chatview.h"

#include <langinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "md_render.h"
#include "text_safe.h"
#include "ui_text.h"

/* A change of style within a line (Markdown): from byte `off` on. */
typedef struct {
    int off;
    short el;         /* theme_el */
    int attrs;        /* curses attributes added to the element's (bold, italic) */
} ui_run;

struct ui_line {
    char *text;       /* sanitized, with control-form markers */
    short el, el2;    /* style, and the style from byte `split` on */
    int split;        /* -1: one style */
    short indent;
    ui_run *runs;     /* non-NULL: the styles by run (el, el2, split unused) */
    int n_runs;
    short fill;       /* >= 0: the rest of the row in this style (code blocks), else -1 */
};

enum { BK_MSG, BK_NOTE, BK_REPLAY, BK_LIVE };

/* What a replay block shows: the view's copy of the session's turn. */
typedef struct {
    int turn, n_turns;
    char *user;
    char *old_answer;
    double old_tps;
    sbuf new_answer;
    double new_tps;
    bool done, stopped;
} replay_copy;

struct ui_block {
    int kind;
    size_t anchor;          /* notes: conversation messages shown before it */
    theme_el el;
    char *text;             /* BK_NOTE */
    replay_copy *replay;    /* BK_REPLAY */
    int think;              /* -1: automatic, 0 folded, 1 open (toggled with F3) */
    ui_line *lines;
    size_t n, cap;
    int width;              /* the width lines were made for, -1: stale */
};

bool ui_utf8_locale(void)
{
    static int cached = -1;
    if (cached < 0) {
        const char *cs = nl_langinfo(CODESET);
        cached = cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));
    }
    return cached;
}

/* ---- lines ------------------------------------------------------------------------- */

static void block_clear(ui_block *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->lines[i].text);
        free(b->lines[i].runs);
    }
    b->n = 0;
    b->width = -1;
}

static void block_free(ui_block *b)
{
    block_clear(b);
    free(b->lines);
    free(b->text);
    if (b->replay) {
        free(b->replay->user);
        free(b->replay->old_answer);
        sbuf_free(&b->replay->new_answer);
        free(b->replay);
    }
    memset(b, 0, sizeof *b);
}

static ui_line *push_line(ui_block *b, const char *s, size_t n, theme_el el, int indent)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        ui_line *l = realloc(b->lines, cap * sizeof *l);
        if (!l) {
            fputs("glmchat: out of memory\n", stderr);
            abort();
        }
        b->lines = l;
        b->cap = cap;
    }
    ui_line *l = &b->lines[b->n++];
    l->text = malloc(n + 1);
    if (!l->text) {
        fputs("glmchat: out of memory\n", stderr);
        abort();
    }
    memcpy(l->text, s, n);
    l->text[n] = 0;
    l->el = (short)el;
    l->el2 = (short)el;
    l->split = -1;
    l->indent = (short)indent;
    l->runs = NULL;
    l->n_runs = 0;
    l->fill = -1;
    return l;
}

typedef struct {
    ui_block *b;
    const char *s;
    theme_el el;
    int indent;
} emit_ctx;

static void emit_span(void *user, ui_span sp)
{
    emit_ctx *c = user;
    push_line(c->b, c->s + sp.off, sp.len, c->el, c->indent);
}

/* Wraps sanitized text (which may hold newlines) into the block. */
static void push_wrapped(ui_block *b, const char *s, size_t n, theme_el el, int indent, int width,
                         ui_wrap_mode mode)
{
    s = s ? s : ""; /* an empty sbuf's text is NULL: no arithmetic or memcpy on it (UBSan) */
    emit_ctx c = {b, NULL, el, indent};
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '\n')
            continue;
        c.s = s + start;
        ui_wrap(s + start, i - start, width - indent, mode, emit_span, &c);
        start = i + 1;
    }
}

static void sanitize(sbuf *out, const char *s)
{
    tsafe_sanitize(out, s, strlen(s), true);
}

/* Message content: ``` fences switch to verbatim code lines. */
static void push_content(ui_block *b, const char *content, theme_el el, int width)
{
    sbuf s = {0};
    sanitize(&s, content);
    bool code = false;
    size_t start = 0;
    const char *t = sbuf_str(&s);
    for (size_t i = 0; i <= s.len; i++) {
        if (i < s.len && t[i] != '\n')
            continue;
        const char *line = t + start;
        size_t len = i - start;
        size_t lead = 0;
        while (lead < len && line[lead] == ' ')
            lead++;
        bool fence = len - lead >= 3 && !strncmp(line + lead, "```", 3);
        if (fence || code)
            push_wrapped(b, line, len, TH_CODE, 2, width, UI_WRAP_CHARS);
        else
            push_wrapped(b, line, len, el, 0, width, UI_WRAP_WORDS);
        if (fence)
            code = !code;
        start = i + 1;
    }
    sbuf_free(&s);
}

/* ---- Markdown (answers) ------------------------------------------------------------ */

/* The style of a span: its element, and bold or italic added on top (so a
 * bold word in a heading or a quote keeps their look and is bold too). */
static theme_el span_style(const md_span *sp, bool in_quote, int *attrs)
{
    *attrs = 0;
    switch (sp->kind) {
    case MDR_SPAN_BULLET: return TH_MD_BULLET;
    case MDR_SPAN_QUOTE_BAR: return TH_MD_QUOTE;
    case MDR_SPAN_CODE: return TH_CODE;
    case MDR_SPAN_CODE_LANG: return TH_MD_CODE_LANG;
    case MDR_SPAN_TABLE_BORDER: return TH_MD_TABLE;
    case MDR_SPAN_RULE: return TH_MD_RULE;
    case MDR_SPAN_PAD: return in_quote ? TH_MD_QUOTE : TH_ASSISTANT;
    default: break;
    }
    unsigned f = sp->flags;
    if (f & MDR_BOLD)
        *attrs |= A_BOLD;
    if (f & MDR_ITALIC)
        *attrs |= A_ITALIC;
    if (f & MDR_CODE_INLINE)
        return TH_MD_CODE;
    if (f & MDR_URL)
        return TH_MD_URL;
    if (f & MDR_LINK)
        return TH_MD_LINK;
    if (sp->heading)
        return TH_MD_HEADING;
    if (f & MDR_STRIKE)
        return TH_MD_STRIKE;
    if (f & (MDR_BOLD | MDR_TABLE_HEAD))
        return TH_MD_BOLD;
    if (f & MDR_ITALIC)
        return TH_MD_ITALIC;
    return in_quote ? TH_MD_QUOTE : TH_ASSISTANT;
}

/* An answer's content through md_render: one ui_line per display line, a
 * run per span; code blocks fill their rows in the code style. */
static void push_markdown(ui_chatview *v, ui_block *b, const char *content, int width, bool streaming)
{
    unsigned opts = MDR_OPT_WRAP_CODE | MDR_OPT_CODE_NUMBERS | (streaming ? MDR_OPT_STREAMING : 0) |
                    (ui_utf8_locale() ? 0 : MDR_OPT_ASCII);
    md_render(&v->md, content, strlen(content), width, opts);
    const md_doc *d = &v->md;
    sbuf text = {0};
    for (size_t i = 0; i < d->n_lines; i++) {
        const md_line *ml = &d->lines[i];
        sbuf_clear(&text);
        ui_run *runs = ml->n ? malloc(ml->n * sizeof *runs) : NULL;
        if (ml->n && !runs) {
            fputs("glmchat: out of memory\n", stderr);
            abort();
        }
        bool in_quote = false;
        for (size_t k = 0; k < ml->n; k++) {
            const md_span *sp = &d->spans[ml->first + k];
            in_quote |= sp->kind == MDR_SPAN_QUOTE_BAR;
            runs[k].off = (int)text.len;
            runs[k].el = (short)span_style(sp, in_quote, &runs[k].attrs);
            sbuf_add(&text, md_span_text(d, sp), sp->len);
        }
        ui_line *l = push_line(b, sbuf_str(&text), text.len, TH_ASSISTANT, 0);
        l->runs = runs;
        l->n_runs = (int)ml->n;
        if (ml->kind == MDR_LINE_CODE || ml->kind == MDR_LINE_CODE_HEADER)
            l->fill = ml->kind == MDR_LINE_CODE ? TH_CODE : TH_MD_CODE_LANG;
    }
    sbuf_free(&text);
}

static const char *role_label(const char *role, theme_el *label, theme_el *text)
{
    if (!strcmp(role, "user")) {
        *label = TH_USER_LABEL, *text = TH_USER;
        return "You";
    }
    if (!strcmp(role, "assistant")) {
        *label = TH_ASSISTANT_LABEL, *text = TH_ASSISTANT;
        return "Assistant";
    }
    if (!strcmp(role, "system")) {
        *label = TH_SYSTEM, *text = TH_SYSTEM;
        return "System";
    }
    *label = TH_NOTICE, *text = TH_NOTICE;
    return "Tool";
}

static int count_words(const char *s)
{
    int n = 0;
    bool in = false;
    for (; *s; s++) {
        bool sp = *s == ' ' || *s == '\n' || *s == '\t';
        n += !sp && !in;
        in = !sp;
    }
    return n;
}

static void push_header(ui_block *b, const char *label, theme_el el, const char *meta)
{
    sbuf h = {0};
    sbuf_adds(&h, label);
    ui_line *l;
    if (meta && meta[0]) {
        int split = (int)h.len;
        sbuf_adds(&h, "  ");
        sanitize(&h, meta);
        l = push_line(b, h.s, h.len, el, 0);
        l->split = split;
        l->el2 = TH_NOTICE;
    } else {
        push_line(b, h.s, h.len, el, 0);
    }
    sbuf_free(&h);
}

static void render_message(ui_chatview *v, ui_block *b, const char *role, const char *content,
                           const char *reasoning, const char *meta, bool think_open, bool thinking_now, int width,
                           bool streaming)
{
    theme_el lab, txt;
    const char *label = role_label(role, &lab, &txt);
    push_header(b, label, lab, meta);
    if (reasoning && (reasoning[0] || thinking_now)) {
        char head[96];
        const char *open = ui_utf8_locale() ? "\xe2\x96\xbe" : "v";   /* ▾ */
        const char *shut = ui_utf8_locale() ? "\xe2\x96\xb8" : ">";   /* ▸ */
        if (thinking_now && think_open)
            snprintf(head, sizeof head, "%s Thinking...", open);
        else if (think_open)
            snprintf(head, sizeof head, "%s Thinking (F3 folds)", open);
        else
            snprintf(head, sizeof head, "%s Thinking: %d words (F3 shows)", shut, count_words(reasoning));
        push_line(b, head, strlen(head), TH_THINK_LABEL, 0);
        if (think_open && reasoning[0]) {
            sbuf s = {0};
            sanitize(&s, reasoning);
            push_wrapped(b, s.s, s.len, TH_THINK, 2, width, UI_WRAP_WORDS);
            sbuf_free(&s);
        }
    }
    /* Answers are Markdown (F5 shows them as written); what people type is shown as typed. */
    if (!v->raw && !strcmp(role, "assistant"))
        push_markdown(v, b, content, width, streaming);
    else
        push_content(b, content, txt, width);
    push_line(b, "", 0, TH_NORMAL, 0);
}

static void message_meta(const conv_msg *m, char *buf, size_t cap)
{
    buf[0] = 0;
    size_t n = 0;
    if (m->time > 0) {
        time_t t = (time_t)m->time;
        struct tm tm;
        if (localtime_r(&t, &tm))
            n += strftime(buf, cap, "%H:%M", &tm);
    }
    if (!strcmp(m->role, "assistant") && m->n_tokens > 0 && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "%s%u tokens, %.1f tok/s", n ? " · " : "", m->n_tokens, m->tps);
    if (m->stopped && n < cap)
        snprintf(buf + n, cap - n, "%s(stopped)", n ? " · " : "");
}

/* ---- replay ---------------------------------------------------------------------------- */

static void push_column_lines(ui_block *tmp, const char *title, const char *text, int width)
{
    push_line(tmp, title, strlen(title), TH_NORMAL, 0);
    sbuf s = {0};
    sanitize(&s, text[0] ? text : "(empty)");
    push_wrapped(tmp, s.s, s.len, TH_NORMAL, 0, width, UI_WRAP_WORDS);
    sbuf_free(&s);
}

static void render_replay(ui_block *b, int width)
{
    replay_copy *r = b->replay;
    char head[96], old_t[64], new_t[64];
    snprintf(head, sizeof head, "Replay: turn %d of %d", r->turn, r->n_turns);
    push_line(b, head, strlen(head), TH_NOTICE, 0);
    sbuf u = {0};
    sanitize(&u, r->user);
    push_wrapped(b, u.s, u.len, TH_USER, 2, width, UI_WRAP_WORDS);
    sbuf_free(&u);
    snprintf(old_t, sizeof old_t, "recorded");
    if (r->old_tps > 0)
        snprintf(old_t, sizeof old_t, "recorded · %.1f tok/s", r->old_tps);
    if (!r->done)
        snprintf(new_t, sizeof new_t, "new · generating...");
    else
        snprintf(new_t, sizeof new_t, "new · %.1f tok/s%s", r->new_tps, r->stopped ? " (stopped)" : "");
    const char *new_text = sbuf_str(&r->new_answer);
    if (width >= 72) {
        /* Side by side: recorded on the left, new on the right. */
        int colw = (width - 3) / 2;
        ui_block left = {.width = -1}, right = {.width = -1};
        push_column_lines(&left, old_t, r->old_answer, colw);
        push_column_lines(&right, new_t, new_text, colw);
        size_t rows = left.n > right.n ? left.n : right.n;
        const char *bar = ui_utf8_locale() ? " \xe2\x94\x82 " : " | ";
        for (size_t i = 0; i < rows; i++) {
            sbuf line = {0};
            const char *lt = i < left.n ? left.lines[i].text : "";
            sbuf_adds(&line, lt);
            for (int k = ui_text_width(lt, strlen(lt)); k < colw; k++)
                sbuf_addc(&line, ' ');
            int split = (int)line.len;
            sbuf_adds(&line, bar);
            if (i < right.n)
                sbuf_adds(&line, right.lines[i].text);
            ui_line *l = push_line(b, line.s, line.len, TH_REPLAY_OLD, 0);
            l->split = split;
            l->el2 = TH_REPLAY_NEW;
            sbuf_free(&line);
        }
        block_free(&left);
        block_free(&right);
    } else {
        /* Narrow screens: one after the other. */
        ui_block tmp = {.width = -1};
        push_column_lines(&tmp, old_t, r->old_answer, width - 2);
        for (size_t i = 0; i < tmp.n; i++)
            push_line(b, tmp.lines[i].text, strlen(tmp.lines[i].text), TH_REPLAY_OLD, i ? 2 : 0);
        block_clear(&tmp);
        push_column_lines(&tmp, new_t, new_text, width - 2);
        for (size_t i = 0; i < tmp.n; i++)
            push_line(b, tmp.lines[i].text, strlen(tmp.lines[i].text), TH_REPLAY_NEW, i ? 2 : 0);
        block_free(&tmp);
    }
    push_line(b, "", 0, TH_NORMAL, 0);
}

/* ---- blocks ------------------------------------------------------------------------------ */

static void render_block(ui_chatview *v, ui_block *b, size_t msg_index, int width)
{
    block_clear(b);
    b->width = width;
    if (b->kind == BK_MSG) {
        const conv_msg *m = &v->conv->msgs[msg_index];
        char meta[128];
        message_meta(m, meta, sizeof meta);
        render_message(v, b, m->role, m->content, m->reasoning, meta, b->think == 1, false, width, false);
    } else if (b->kind == BK_LIVE) {
        const chat_stream *st = v->live;
        bool thinking_now = st->in_think;
        bool has_content = st->content.len > 0;
        /* Reasoning shows while it streams and folds once the answer starts. */
        bool open = b->think >= 0 ? b->think == 1 : !has_content;
        const char *reasoning = st->reasoning.len || thinking_now ? sbuf_str(&st->reasoning) : NULL;
        render_message(v, b, "assistant", sbuf_str(&st->content), reasoning, v->live_meta, open, thinking_now, width,
                       true);
    } else if (b->kind == BK_REPLAY) {
        render_replay(b, width);
    } else {
        sbuf s = {0};
        sanitize(&s, b->text);
        push_wrapped(b, s.s, s.len, b->el, 0, width, UI_WRAP_WORDS);
        push_line(b, "", 0, TH_NORMAL, 0);
        sbuf_free(&s);
    }
}

void ui_chatview_init(ui_chatview *v, const conversation *conv)
{
    memset(v, 0, sizeof *v);
    v->conv = conv;
    v->live_block = calloc(1, sizeof *v->live_block);
    if (!v->live_block) {
        fputs("glmchat: out of memory\n", stderr);
        abort();
    }
    v->live_block->kind = BK_LIVE;
    v->live_block->think = -1;
    v->live_block->width = -1;
    ui_chatview_messages_changed(v);
}

void ui_chatview_free(ui_chatview *v)
{
    for (size_t i = 0; i < v->n_msg_blocks; i++)
        block_free(&v->msg_blocks[i]);
    free(v->msg_blocks);
    for (size_t i = 0; i < v->n_notes; i++)
        block_free(&v->notes[i]);
    free(v->notes);
    block_free(v->live_block);
    free(v->live_block);
    md_doc_free(&v->md);
    memset(v, 0, sizeof *v);
}

void ui_chatview_set_raw(ui_chatview *v, bool raw)
{
    v->raw = raw;
    /* Every answer is drawn again, the one streaming included. */
    for (size_t i = 0; i < v->n_msg_blocks; i++)
        v->msg_blocks[i].width = -1;
    v->live_block->width = -1;
}

void ui_chatview_messages_changed(ui_chatview *v)
{
    size_t n = v->conv->n;
    for (size_t i = 0; i < v->n_msg_blocks; i++)
        block_clear(&v->msg_blocks[i]);
    if (n > v->n_msg_blocks) {
        ui_block *b = realloc(v->msg_blocks, n * sizeof *b);
        if (!b) {
            fputs("glmchat: out of memory\n", stderr);
            abort();
        }
        v->msg_blocks = b;
        for (size_t i = v->n_msg_blocks; i < n; i++) {
            memset(&b[i], 0, sizeof b[i]);
            b[i].kind = BK_MSG;
            b[i].think = 0;
            b[i].width = -1;
        }
    } else {
        for (size_t i = n; i < v->n_msg_blocks; i++)
            block_free(&v->msg_blocks[i]);
    }
    v->n_msg_blocks = n;
    /* A system prompt set or removed moves every message by one at index
     * 0: the notes shown after a message move with it (else a note written
     * after the last answer would come before it). */
    bool has_system = n && !strcmp(v->conv->msgs[0].role, "system");
    if (has_system != v->had_system)
        for (size_t i = 0; i < v->n_notes; i++)
            if (v->notes[i].anchor > 0)
                v->notes[i].anchor += has_system ? 1 : (size_t)-1;
    v->had_system = has_system;
    for (size_t i = 0; i < v->n_notes; i++)
        if (v->notes[i].anchor > n)
            v->notes[i].anchor = n;
}

void ui_chatview_reset(ui_chatview *v)
{
    for (size_t i = 0; i < v->n_notes; i++)
        block_free(&v->notes[i]);
    v->n_notes = 0;
    v->scroll = 0;
    for (size_t i = 0; i < v->n_msg_blocks; i++)
        block_free(&v->msg_blocks[i]);
    v->n_msg_blocks = 0;
    ui_chatview_messages_changed(v);
}

static ui_block *add_note(ui_chatview *v, int kind)
{
    if (v->n_notes == v->cap_notes) {
        size_t cap = v->cap_notes ? v->cap_notes * 2 : 16;
        ui_block *b = realloc(v->notes, cap * sizeof *b);
        if (!b) {
            fputs("glmchat: out of memory\n", stderr);
            abort();
        }
        v->notes = b;
        v->cap_notes = cap;
    }
    ui_block *b = &v->notes[v->n_notes++];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    b->anchor = v->conv->n;
    b->width = -1;
    b->think = -1;
    v->scroll = 0; /* something new to read: follow it */
    return b;
}

void ui_chatview_note(ui_chatview *v, theme_el el, const char *text)
{
    ui_block *b = add_note(v, BK_NOTE);
    b->el = el;
    b->text = strdup(text);
    if (!b->text) {
        fputs("glmchat: out of memory\n", stderr);
        abort();
    }
}

static char *dup_or_die(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d) {
        fputs("glmchat: out of memory\n", stderr);
        abort();
    }
    return d;
}

/* The parts of a turn that change while its answer streams. */
static void replay_copy_progress(replay_copy *r, const ui_replay_turn *t)
{
    sbuf_clear(&r->new_answer);
    sbuf_adds(&r->new_answer, t->new_answer ? t->new_answer : "");
    r->new_tps = t->new_tps;
    r->done = t->done;
    r->stopped = t->stopped;
}

void ui_chatview_replay(ui_chatview *v, const ui_replay_turn *t)
{
    ui_block *b = add_note(v, BK_REPLAY);
    replay_copy *r = calloc(1, sizeof *r);
    if (!r) {
        fputs("glmchat: out of memory\n", stderr);
        abort();
    }
    r->turn = t->turn;
    r->n_turns = t->n_turns;
    r->user = dup_or_die(t->user);
    r->old_answer = dup_or_die(t->old_answer);
    r->old_tps = t->old_tps;
    replay_copy_progress(r, t);
    b->replay = r;
}

void ui_chatview_replay_update(ui_chatview *v, const ui_replay_turn *t)
{
    for (size_t i = v->n_notes; i-- > 0;) {
        ui_block *b = &v->notes[i];
        if (b->kind == BK_REPLAY && b->replay->turn == t->turn) {
            replay_copy_progress(b->replay, t);
            b->width = -1;
            return;
        }
    }
}

void ui_chatview_set_live(ui_chatview *v, const chat_stream *live, const char *meta)
{
    if (live && !v->live) {
        v->live_block->think = -1;
        v->live_think_toggled = false;
        v->scroll = 0;
    }
    v->live = live;
    v->live_meta = meta;
    v->live_block->width = -1;
}

void ui_chatview_toggle_think(ui_chatview *v)
{
    ui_block *b = NULL;
    if (v->live && (v->live->reasoning.len || v->live->in_think)) {
        b = v->live_block;
        bool open = b->think >= 0 ? b->think == 1 : v->live->content.len == 0;
        b->think = !open;
    } else {
        for (size_t i = v->n_msg_blocks; i-- > 0;)
            if (v->conv->msgs[i].reasoning && v->conv->msgs[i].reasoning[0]) {
                b = &v->msg_blocks[i];
                b->think = !(b->think == 1);
                break;
            }
    }
    if (b)
        b->width = -1;
}

void ui_chatview_scroll(ui_chatview *v, int lines)
{
    v->scroll += lines;
    if (v->scroll < 0)
        v->scroll = 0;
}

void ui_chatview_scroll_end(ui_chatview *v)
{
    v->scroll = 0;
}

/* ---- drawing --------------------------------------------------------------------------------- */

/* Visits the blocks in screen order: notes anchored before message i, then
 * message i; the notes after the last message; the live answer. */
typedef void (*block_fn)(ui_chatview *v, ui_block *b, size_t msg, void *user);

static void each_block(ui_chatview *v, block_fn fn, void *user)
{
    size_t note = 0;
    for (size_t i = 0; i <= v->n_msg_blocks; i++) {
        while (note < v->n_notes && v->notes[note].anchor <= i)
            fn(v, &v->notes[note++], 0, user);
        if (i < v->n_msg_blocks)
            fn(v, &v->msg_blocks[i], i, user);
    }
    while (note < v->n_notes)
        fn(v, &v->notes[note++], 0, user);
    if (v->live)
        fn(v, v->live_block, 0, user);
}

static void count_fn(ui_chatview *v, ui_block *b, size_t msg, void *user)
{
    if (b->width != v->width)
        render_block(v, b, msg, v->width);
    *(int *)user += (int)b->n;
}

typedef struct {
    WINDOW *w;
    int first, row; /* first visible line (global index), current global line */
} draw_ctx;

static void draw_line(WINDOW *w, int y, const ui_line *l, int width)
{
    int col = l->indent;
    int base = theme_attr((theme_el)l->el);
    int attr = base;
    bool ctrl = false;
    int run = 0;
    wmove(w, y, col);
    wattrset(w, attr);
    const char *s = l->text;
    size_t n = strlen(s);
    size_t i = 0;
    while (i < n) {
        if (l->split >= 0 && i == (size_t)l->split) {
            base = theme_attr((theme_el)l->el2);
            if (!ctrl)
                wattrset(w, base);
        }
        while (run < l->n_runs && (size_t)l->runs[run].off <= i) {
            base = theme_attr((theme_el)l->runs[run].el) | l->runs[run].attrs;
            if (!ctrl)
                wattrset(w, base);
            run++;
        }
        if (s[i] == TSAFE_MARK_ON || s[i] == TSAFE_MARK_OFF) {
            ctrl = s[i] == TSAFE_MARK_ON;
            wattrset(w, ctrl ? theme_attr(TH_CONTROL) : base);
            i++;
            continue;
        }
        uint32_t cp;
        size_t len = tsafe_decode(s + i, n - i, &cp);
        int cw = cp == '\t' ? UI_TAB_WIDTH - (col - l->indent) % UI_TAB_WIDTH : ui_cp_width(cp);
        if (col + cw > width)
            break;
        if (cp == '\t')
            for (int k = 0; k < cw; k++)
                waddch(w, ' ');
        else if (cw == 0 && col == l->indent)
            waddstr(w, " "); /* a combining mark with nothing to combine with */
        else
            waddnstr(w, s + i, (int)len);
        col += cw;
        i += len;
    }
    if (l->fill >= 0) {
        /* A code block is a rectangle of its own colour. */
        wattrset(w, theme_attr((theme_el)l->fill));
        for (; col < width; col++)
            waddch(w, ' ');
    }
}

static void draw_fn(ui_chatview *v, ui_block *b, size_t msg, void *user)
{
    draw_ctx *c = user;
    for (size_t i = 0; i < b->n; i++, c->row++) {
        int y = c->row - c->first;
        if (y >= 0 && y < v->height)
            draw_line(c->w, y, &b->lines[i], v->width);
    }
}

static void chatview_draw(void *self, WINDOW *w)
{
    ui_chatview *v = self;
    int h, wd;
    getmaxyx(w, h, wd);
    if (wd != v->width) {
        v->width = wd;
        v->last_total = -1; /* positions change with the width: keep the scroll as lines */
    }
    v->height = h;
    int total = 0;
    each_block(v, count_fn, &total);
    /* While scrolled up, new lines below must not move what is on screen. */
    if (v->scroll > 0 && v->last_total >= 0 && total > v->last_total)
        v->scroll += total - v->last_total;
    v->last_total = total;
    int max_scroll = total > h ? total - h : 0;
    if (v->scroll > max_scroll)
        v->scroll = max_scroll;
    wbkgdset(w, (chtype)theme_attr(TH_NORMAL));
    werase(w);
    draw_ctx c = {w, total > h ? total - h - v->scroll : 0, 0};
    each_block(v, draw_fn, &c);
    if (v->scroll > 0) {
        char more[48];
        snprintf(more, sizeof more, " %s %d more (PgDn) ", ui_utf8_locale() ? "\xe2\x86\x93" : "v", v->scroll);
        int len = ui_text_width(more, strlen(more));
        wattrset(w, theme_attr(TH_STATUS_MSG));
        mvwaddstr(w, h - 1, wd - len > 0 ? wd - len : 0, more);
    }
}

static int chatview_key(void *self, int key)
{
    ui_chatview *v = self;
    int page = v->height > 3 ? v->height - 2 : 1;
    switch (key) {
    case KEY_PPAGE:
        ui_chatview_scroll(v, page);
        return UI_HANDLED | UI_REDRAW;
    case KEY_NPAGE:
        ui_chatview_scroll(v, -page);
        return UI_HANDLED | UI_REDRAW;
    case KEY_SR: /* shift-up */
        ui_chatview_scroll(v, 1);
        return UI_HANDLED | UI_REDRAW;
    case KEY_SF:
        ui_chatview_scroll(v, -1);
        return UI_HANDLED | UI_REDRAW;
    case KEY_MOUSE: {
        MEVENT me;
        if (getmouse(&me) != OK)
            return UI_HANDLED;
        if (me.bstate & BUTTON4_PRESSED)
            ui_chatview_scroll(v, 3);
        else if (me.bstate & BUTTON5_PRESSED)
            ui_chatview_scroll(v, -3);
        return UI_HANDLED | UI_REDRAW;
    }
    case KEY_F(3):
        ui_chatview_toggle_think(v);
        return UI_HANDLED | UI_REDRAW;
    default:
        return 0;
    }
}

const ui_panel ui_chatview_panel = {"chat", chatview_draw, chatview_key};
