/* test_ui_session.c: the chat session without a screen (app/ui_session.h)
 * and the /commands on it, against a real engine: the CPU reference on the
 * tiny-glm-a fixture, greedy, answers of a fixed length (--ignore-eos).
 * A recording frontend stands where the screen would be.  Covers sending,
 * the queue (while busy, while loading, on the way out), cancel, retry,
 * /edit with a system prompt set or removed in between (issue 17 item 4),
 * /clear, save and load, /replay, /set ctx (0 and sizes too small). */
#include <stdarg.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chat_commands.h"
#include "clipboard.h"
#include "testlib.h"
#include "ui_session.h"

#define MODEL "tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf"
#define WAIT_S 60.0 /* a guard against a hang, not a timing: the tiny model answers in milliseconds */

static model m;
static tokenizer *tok;
static uint32_t open_n_ctx; /* the next session's context, 0: the default */
static const engine_backend *open_be; /* the next session's backend, NULL: the CPU reference */
static char tmpdir[256];

/* ---- a frontend that records what the session tells the user ------------------------ */

typedef struct {
    char notes[64][512];
    int n_notes;
    char status[512];
    ui_level status_level;
    char input[512];
    int new_conversations;
    int restored;
    sbuf terminal;      /* what was sent to the terminal itself */
    int replay_turns_begun, replay_updates;
    ui_replay_turn last_turn; /* strings not kept */
} recorder;

static void rec_note(void *user, ui_level level, const char *text)
{
    recorder *r = user;
    if (r->n_notes < 64)
        snprintf(r->notes[r->n_notes++], sizeof r->notes[0], "%s%s", level == UI_ERROR ? "E: " : "", text);
}

static void rec_status(void *user, ui_level level, const char *text)
{
    recorder *r = user;
    snprintf(r->status, sizeof r->status, "%s", text);
    r->status_level = level;
}

static void rec_set_input(void *user, const char *text)
{
    recorder *r = user;
    snprintf(r->input, sizeof r->input, "%s", text);
}

static void rec_restore_input(void *user, const char *text, const char *why)
{
    (void)why;
    recorder *r = user;
    snprintf(r->input, sizeof r->input, "%s", text);
    r->restored++;
}

static bool rec_write_terminal(void *user, const char *bytes, size_t n)
{
    recorder *r = user;
    sbuf_add(&r->terminal, bytes, n);
    return true;
}

static void rec_new_conversation(void *user)
{
    recorder *r = user;
    r->new_conversations++;
}

static void rec_replay_turn(void *user, const ui_replay_turn *t, bool is_new)
{
    recorder *r = user;
    if (is_new)
        r->replay_turns_begun++;
    else
        r->replay_updates++;
    r->last_turn = *t;
    r->last_turn.user = r->last_turn.old_answer = r->last_turn.new_answer = NULL;
}

static bool noted(const recorder *r, const char *part)
{
    for (int i = 0; i < r->n_notes; i++)
        if (strstr(r->notes[i], part))
            return true;
    return false;
}

typedef struct {
    recorder rec;
    ui_frontend fe;
    ui_session *s;
    unsigned changed; /* everything the calls and events reported */
} fixture;

/* A session on the tiny model; n_predict tokens per answer. */
static bool open_session(fixture *f, int n_predict, conversation *initial)
{
    memset(f, 0, sizeof *f);
    f->fe = (ui_frontend){.user = &f->rec,
                          .note = rec_note,
                          .status = rec_status,
                          .set_input = rec_set_input,
                          .restore_input = rec_restore_input,
                          .new_conversation = rec_new_conversation,
                          .replay_turn = rec_replay_turn,
                          .write_terminal = rec_write_terminal};
    ui_session_config c;
    memset(&c, 0, sizeof c);
    settings_defaults(&c.cfg);
    err_t err;
    if (settings_set(&c.cfg, "temp", "0", &err) != 0)
        return false;
    c.cfg.n_predict = n_predict;
    c.cfg.ignore_eos = true; /* every answer exactly n_predict tokens: never empty */
    c.m = &m;
    c.tok = tok;
    c.tmpl = tmpl_find("chatml");
    c.be = open_be ? open_be : &ref_engine_backend;
    engine_params_default(&c.params);
    c.params.n_threads = 2;
    if (open_n_ctx)
        c.params.n_ctx = open_n_ctx;
    snprintf(c.model_path, sizeof c.model_path, "%s", MODEL);
    snprintf(c.model_name, sizeof c.model_name, "tiny");
    c.seed = 7;
    c.initial = initial;
    snprintf(c.conv_dir, sizeof c.conv_dir, "%s", tmpdir);
    f->s = ui_session_new(&c, &f->fe);
    return f->s != NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Handles decoder events until the model is loaded and no answer runs. */
static bool wait_idle(fixture *f)
{
    double end = now_s() + WAIT_S;
    while (!ui_session_ready(f->s) || ui_session_busy(f->s)) {
        if (ui_session_load_failed(f->s) || now_s() > end)
            return false;
        ui_session_wait(f->s, 1000, &f->changed);
    }
    return true;
}

static bool start_ready(fixture *f, int n_predict)
{
    if (!open_session(f, n_predict, NULL))
        return false;
    f->changed |= ui_session_start(f->s);
    return wait_idle(f);
}

static void close_session(fixture *f)
{
    ui_session_wind_down(f->s);
    ui_session_free(f->s);
    f->s = NULL;
    sbuf_free(&f->rec.terminal);
}

/* "u a u a": the roles of the conversation, one letter each. */
static const char *roles(const ui_session *s)
{
    static char buf[64];
    const conversation *c = ui_session_conv(s);
    size_t n = 0;
    for (size_t i = 0; i < c->n && n + 1 < sizeof buf; i++)
        buf[n++] = c->msgs[i].role[0];
    buf[n] = 0;
    return buf;
}

static const char *content(const ui_session *s, size_t i)
{
    const conversation *c = ui_session_conv(s);
    return i < c->n ? c->msgs[i].content : "(none)";
}

/* Sends a message and waits for its answer. */
static bool chat(fixture *f, const char *text)
{
    f->changed |= ui_session_send(f->s, text);
    return wait_idle(f);
}

/* ---- the cases ---------------------------------------------------------------------------- */

static void test_send_answers_and_saves(void)
{
    fixture f;
    CHECK(start_ready(&f, 4), "the session did not start");
    if (!f.s)
        return;
    CHECK(ui_session_ready(f.s) && !ui_session_busy(f.s), "ready and idle");
    f.changed = 0;
    f.changed |= ui_session_send(f.s, "hello");
    CHECK(ui_session_busy(f.s), "an answer runs after send");
    int job;
    CHECK(ui_session_live(f.s, &job) != NULL && job > 0, "the answer streams");
    CHECK(wait_idle(&f), "the answer did not end");
    CHECK(!strcmp(roles(f.s), "ua"), "roles %s", roles(f.s));
    CHECK(!strcmp(content(f.s, 0), "hello"), "the message: %.100s", content(f.s, 0));
    const conversation *c = ui_session_conv(f.s);
    CHECK(c->n == 2 && c->msgs[1].n_tokens == 4 && !c->msgs[1].stopped, "4 tokens, not stopped");
    unsigned want = UI_CHANGED_CONVERSATION | UI_CHANGED_LIVE | UI_CHANGED_STATE;
    CHECK((f.changed & want) == want, "changes reported: %#x", f.changed);
    CHECK(ui_session_live(f.s, &job) == NULL && job == 0, "no live answer when idle");
    /* Saved at once, into a new file of its own. */
    const char *path = ui_session_autosave_path(f.s);
    CHECK(!strncmp(path, tmpdir, strlen(tmpdir)), "autosave in %.200s", path);
    conversation saved;
    err_t err;
    CHECK(conv_load(&saved, path, &err) == 0 && saved.n == 2 && !strcmp(saved.msgs[1].role, "assistant"),
          "the autosave holds the turn");
    /* No seed was set: the answer drew its own, recorded with it and as
     * the conversation's latest (issue 28.7). */
    CHECK(saved.tmpl && !strcmp(saved.tmpl, "chatml") && saved.sampling.set && saved.msgs[1].has_seed &&
              saved.sampling.seed == saved.msgs[1].seed,
          "metadata saved");
    conv_free(&saved);
    CHECK(!ui_session_unsaved(f.s), "nothing unsaved");
    close_session(&f);
}

/* The penalties set by /set are saved with the conversation (they were
 * not: a replay of the file could not reproduce it). */
static void test_penalties_saved(void)
{
    fixture f;
    CHECK(start_ready(&f, 4), "the session did not start");
    if (!f.s)
        return;
    err_t err;
    CHECK(ui_session_set(f.s, "repeat-penalty", "1.25", &err) == 0 &&
              ui_session_set(f.s, "presence-penalty", "-0.5", &err) == 0 &&
              ui_session_set(f.s, "frequency-penalty", "0.75", &err) == 0,
          "set: %.200s", err.msg);
    CHECK(chat(&f, "hello"), "no answer");
    conversation saved;
    CHECK(conv_load(&saved, ui_session_autosave_path(f.s), &err) == 0, "load: %.200s", err.msg);
    CHECK(saved.sampling.set && saved.sampling_missing == 0, "sampling missing %#x", saved.sampling_missing);
    CHECK(saved.sampling.repeat_penalty == 1.25 && saved.sampling.presence_penalty == -0.5 &&
              saved.sampling.frequency_penalty == 0.75,
          "saved %g %g %g", saved.sampling.repeat_penalty, saved.sampling.presence_penalty,
          saved.sampling.frequency_penalty);
    conv_free(&saved);
    close_session(&f);
}

/* A file the session saves into that another writer changed meanwhile is
 * left alone, and the conversation goes on in a new file (nothing lost). */
static void test_autosave_conflict_moves_to_a_new_file(void)
{
    fixture f;
    CHECK(start_ready(&f, 4), "the session did not start");
    if (!f.s)
        return;
    CHECK(chat(&f, "q1"), "no answer");
    char first[PATH_MAX];
    snprintf(first, sizeof first, "%s", ui_session_autosave_path(f.s));
    /* another writer appends a turn of its own */
    conversation other;
    err_t err;
    CHECK(conv_load(&other, first, &err) == 0, "load: %.200s", err.msg);
    conv_add(&other, "user", "written by someone else", NULL);
    conv_forget_files(&other);
    CHECK(conv_save(&other, first, &err) == 0, "the other save: %.200s", err.msg);
    conv_free(&other);
    CHECK(chat(&f, "q2") && !strcmp(roles(f.s), "uaua"), "roles %s", roles(f.s));
    const char *now = ui_session_autosave_path(f.s);
    CHECK(strcmp(now, first) != 0 && !strncmp(now, tmpdir, strlen(tmpdir)), "saves to %.200s", now);
    CHECK(noted(&f.rec, "is saved to"), "no note of the new file");
    CHECK(!ui_session_unsaved(f.s), "reported unsaved");
    conversation c;
    CHECK(conv_load(&c, now, &err) == 0 && c.n == 4, "the new file holds the whole conversation");
    conv_free(&c);
    CHECK(conv_load(&c, first, &err) == 0 && c.n == 3 && !strcmp(c.msgs[2].content, "written by someone else"),
          "the other writer's file was changed");
    conv_free(&c);
    close_session(&f);
}

static void test_queue_while_busy_and_loading(void)
{
    fixture f;
    CHECK(open_session(&f, 4, NULL), "no session");
    if (!f.s)
        return;
    ui_session_start(f.s);
    /* Loading: the message waits for the model. */
    CHECK(!ui_session_ready(f.s), "ready before any event was handled");
    ui_session_answer(f.s);
    CHECK(strstr(f.rec.status, "still loading") && f.rec.status_level == UI_ERROR, "status: %.200s", f.rec.status);
    ui_session_send(f.s, "first");
    CHECK(strstr(f.rec.status, "Queued: sent when the model is loaded"), "status: %.200s", f.rec.status);
    CHECK(ui_session_conv(f.s)->n == 0, "queued, not in the conversation yet");
    /* Busy: the next two wait for the answer, and go as one message. */
    double end = now_s() + WAIT_S;
    while (!ui_session_busy(f.s) && now_s() < end)
        ui_session_wait(f.s, 1000, &f.changed);
    CHECK(ui_session_busy(f.s) && !strcmp(roles(f.s), "u"), "the queued message was not sent at READY: %s",
          roles(f.s));
    ui_session_send(f.s, "second");
    ui_session_send(f.s, "third");
    CHECK(strstr(f.rec.status, "Queued: sent when this answer is done"), "status: %.200s", f.rec.status);
    CHECK(wait_idle(&f), "did not end");
    CHECK(!strcmp(roles(f.s), "uaua"), "roles %s", roles(f.s));
    CHECK(!strcmp(content(f.s, 2), "second\n\nthird"), "queued text: %.100s", content(f.s, 2));
    close_session(&f);
}

static void test_queued_message_kept_on_the_way_out(void)
{
    fixture f;
    CHECK(start_ready(&f, 2000), "the session did not start");
    if (!f.s)
        return;
    ui_session_send(f.s, "a long answer");
    ui_session_send(f.s, "written while it ran");
    const char *path = ui_session_autosave_path(f.s);
    char file[PATH_MAX];
    snprintf(file, sizeof file, "%s", path);
    ui_session_wind_down(f.s);
    const conversation *c = ui_session_conv(f.s);
    CHECK(c->n >= 2 && !strcmp(c->msgs[c->n - 1].role, "user") &&
              !strcmp(c->msgs[c->n - 1].content, "written while it ran"),
          "the queued message is kept: roles %s", roles(f.s));
    conversation saved;
    err_t err;
    CHECK(conv_load(&saved, file, &err) == 0 && saved.n == c->n, "and saved");
    conv_free(&saved);
    ui_session_free(f.s);
}

static void test_cancel_keeps_partial_answer(void)
{
    fixture f;
    CHECK(start_ready(&f, 3000), "the session did not start");
    if (!f.s)
        return;
    ui_session_send(f.s, "go on and on");
    /* Until text has arrived, then stop (3000 tokens leave plenty of time). */
    double end = now_s() + WAIT_S;
    const chat_stream *st;
    while ((st = ui_session_live(f.s, NULL)) && st->content.len + st->reasoning.len == 0 && now_s() < end)
        ui_session_wait(f.s, 1000, &f.changed);
    CHECK(ui_session_busy(f.s), "the answer ended by itself");
    ui_session_cancel(f.s);
    CHECK(!strcmp(f.rec.status, "Stopping..."), "status: %.100s", f.rec.status);
    CHECK(wait_idle(&f), "cancel did not end the answer");
    const conversation *c = ui_session_conv(f.s);
    CHECK(!strcmp(roles(f.s), "ua") && c->msgs[1].stopped && c->msgs[1].n_tokens < 3000,
          "roles %s, stopped %d, %u tokens", roles(f.s), c->n > 1 && c->msgs[1].stopped, c->n > 1 ? c->msgs[1].n_tokens : 0);
    CHECK(strstr(f.rec.status, "Stopped; the partial answer is kept"), "status: %.100s", f.rec.status);
    close_session(&f);
}

static void test_retry_replaces_the_answer(void)
{
    fixture f;
    CHECK(start_ready(&f, 4), "the session did not start");
    if (!f.s)
        return;
    ui_session_retry(f.s);
    CHECK(strstr(f.rec.status, "Nothing to retry") && f.rec.status_level == UI_ERROR, "status: %.100s",
          f.rec.status);
    CHECK(chat(&f, "question"), "no answer");
    char first[512];
    snprintf(first, sizeof first, "%s", content(f.s, 1));
    ui_session_retry(f.s);
    CHECK(wait_idle(&f), "the retry did not end");
    /* Greedy: the same answer again, in place of the old one. */
    CHECK(!strcmp(roles(f.s), "ua") && !strcmp(content(f.s, 1), first), "roles %s, '%.100s' vs '%.100s'",
          roles(f.s), content(f.s, 1), first);
    close_session(&f);
}

/* Issue 17 item 4: /edit, then /system, then the edited message: the
 * answer before the edited message must stay.  The edit index used to
 * stay put while the system prompt moved every message by one. */
static void test_edit_then_system_keeps_earlier_answer(void)
{
    fixture f;
    CHECK(start_ready(&f, 4), "the session did not start");
    if (!f.s)
        return;
    CHECK(chat(&f, "q1") && chat(&f, "q2"), "no answers");
    CHECK(!strcmp(roles(f.s), "uaua"), "roles %s", roles(f.s));
    char a1[512];
    snprintf(a1, sizeof a1, "%s", content(f.s, 1));
    ui_session_edit(f.s);
    CHECK(ui_session_edit_text(f.s) && !strcmp(ui_session_edit_text(f.s), "q2"), "editing %.100s",
          ui_session_edit_text(f.s) ? ui_session_edit_text(f.s) : "(nothing)");
    /* A system prompt set while editing: inserted before everything. */
    ui_session_set_system(f.s, "be brief");
    CHECK(ui_session_edit_text(f.s) && !strcmp(ui_session_edit_text(f.s), "q2"), "after /system: editing %.100s",
          ui_session_edit_text(f.s) ? ui_session_edit_text(f.s) : "(nothing)");
    unsigned ch = 0;
    CHECK(ui_session_edit_finish(f.s, "q2 edited", &ch), "the edit was not taken");
    CHECK(wait_idle(&f), "no answer");
    CHECK(!strcmp(roles(f.s), "suaua"), "roles %s", roles(f.s));
    CHECK(!strcmp(content(f.s, 1), "q1") && !strcmp(content(f.s, 2), a1) && !strcmp(content(f.s, 3), "q2 edited"),
          "'%.60s' '%.60s' '%.60s'", content(f.s, 1), content(f.s, 2), content(f.s, 3));
    /* And removed while editing: everything moves back by one. */
    ui_session_edit(f.s);
    ui_session_set_system(f.s, "");
    CHECK(ui_session_edit_text(f.s) && !strcmp(ui_session_edit_text(f.s), "q2 edited"),
          "after /system -: editing %.100s", ui_session_edit_text(f.s) ? ui_session_edit_text(f.s) : "(nothing)");
    CHECK(ui_session_edit_finish(f.s, "q2 again", &ch), "the edit was not taken");
    CHECK(wait_idle(&f), "no answer");
    CHECK(!strcmp(roles(f.s), "uaua") && !strcmp(content(f.s, 1), a1) && !strcmp(content(f.s, 2), "q2 again"),
          "roles %s, '%.60s' '%.60s'", roles(f.s), content(f.s, 1), content(f.s, 2));
    CHECK(!ui_session_edit_text(f.s), "still editing");
    close_session(&f);
}

static void test_edit_refused_while_busy_and_cancelled(void)
{
    fixture f;
    CHECK(start_ready(&f, 3000), "the session did not start");
    if (!f.s)
        return;
    ui_session_edit(f.s);
    CHECK(!ui_session_edit_text(f.s) && strstr(f.rec.status, "Nothing to edit"), "status: %.100s", f.rec.status);
    ui_session_send(f.s, "q1");
    ui_session_edit(f.s);
    unsigned ch = 0;
    CHECK(!ui_session_edit_finish(f.s, "new text", &ch), "an edit taken while an answer runs");
    CHECK(strstr(f.rec.status, "Wait for the answer to finish"), "status: %.100s", f.rec.status);
    CHECK(ui_session_edit_text(f.s) != NULL, "the edit went away");
    /* Stopped once the answer has begun: the message and the partial answer stay. */
    double end = now_s() + WAIT_S;
    const chat_stream *st;
    while ((st = ui_session_live(f.s, NULL)) && st->content.len + st->reasoning.len == 0 && now_s() < end)
        ui_session_wait(f.s, 1000, &f.changed);
    ui_session_cancel(f.s);
    CHECK(wait_idle(&f), "cancel did not end the answer");
    ch = ui_session_edit_cancel(f.s);
    CHECK(!ui_session_edit_text(f.s) && (ch & UI_CHANGED_STATE), "edit not cancelled");
    CHECK(!strcmp(content(f.s, 0), "q1"), "the message changed: %.100s", content(f.s, 0));
    close_session(&f);
}

static void test_clear_keeps_system_prompt_and_old_file(void)
{
    fixture f;
    CHECK(start_ready(&f, 4), "the session did not start");
    if (!f.s)
        return;
    ui_session_set_system(f.s, "sys");
    CHECK(chat(&f, "q1"), "no answer");
    char old[PATH_MAX];
    snprintf(old, sizeof old, "%s", ui_session_autosave_path(f.s));
    CHECK(old[0] && ui_session_has_turns(f.s), "saved: %.200s", old);
    unsigned ch = ui_session_clear(f.s);
    CHECK(!strcmp(roles(f.s), "s") && !ui_session_has_turns(f.s), "roles %s", roles(f.s));
    CHECK(f.rec.new_conversations == 1 && (ch & UI_CHANGED_CONVERSATION), "the screen was not told");
    CHECK(!ui_session_autosave_path(f.s)[0], "the next turn goes to the old file");
    conversation saved;
    err_t err;
    CHECK(conv_load(&saved, old, &err) == 0 && saved.n == 3, "the old conversation stays in its file");
    conv_free(&saved);
    CHECK(chat(&f, "q2"), "no answer");
    CHECK(strcmp(ui_session_autosave_path(f.s), old) != 0, "the same file for a new conversation");
    close_session(&f);
}

static void test_save_copy_and_load(void)
{
    fixture f;
    CHECK(start_ready(&f, 4), "the session did not start");
    if (!f.s)
        return;
    CHECK(chat(&f, "q1") && chat(&f, "q2"), "no answers");
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%.200s/copy.json", tmpdir);
    err_t err;
    CHECK(ui_session_save_copy(f.s, copy, false, &err) == 0, "save: %.200s", err.msg);
    ui_session_clear(f.s);
    CHECK(ui_session_conv(f.s)->n == 0, "not cleared");
    conversation c;
    CHECK(conv_load(&c, copy, &err) == 0, "load: %.200s", err.msg);
    unsigned ch = ui_session_load(f.s, &c, copy);
    CHECK(c.n == 0, "the loaded conversation was not taken over");
    conv_free(&c);
    CHECK(!strcmp(roles(f.s), "uaua") && (ch & UI_CHANGED_CONVERSATION), "roles %s", roles(f.s));
    CHECK(noted(&f.rec, "Loaded 4 messages from"), "no note");
    CHECK(strcmp(ui_session_autosave_path(f.s), copy) != 0, "the loaded file would be written to");
    CHECK(chat(&f, "q3") && !strcmp(roles(f.s), "uauaua"), "roles %s", roles(f.s));
    CHECK(conv_load(&c, copy, &err) == 0 && c.n == 4, "the loaded file changed");
    conv_free(&c);
    close_session(&f);
}

/* Issue 16.2: /save FILE and /export FILE never replace a file glmchat did
 * not write, unless asked with '!'; never a device or a FIFO. */
static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = 0;
    return buf;
}

static void write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "wb");
    if (fp) {
        fputs(text, fp);
        fclose(fp);
    }
}

static void test_save_and_export_replace_only_with_bang(void)
{
    fixture f;
    CHECK(start_ready(&f, 4), "the session did not start");
    if (!f.s)
        return;
    theme th;
    memset(&th, 0, sizeof th);
    chatcmd_ctx cmd = {.session = f.s, .fe = &f.fe, .theme = &th};
    CHECK(chat(&f, "q1"), "no answer");
    char notes[PATH_MAX], line[PATH_MAX + 32];
    snprintf(notes, sizeof notes, "%.200s/notes.txt", tmpdir);
    write_text(notes, "my notes\n");
    CHECK(chmod(notes, 0644) == 0, "chmod");
    snprintf(line, sizeof line, "/export %s", notes);
    chatcmd_run(&cmd, line);
    CHECK(noted(&f.rec, "was not written by glmchat; /export! replaces it"), "no refusal noted");
    const char *t = slurp(notes);
    CHECK(t && !strcmp(t, "my notes\n"), "notes.txt was replaced: %.100s", t ? t : "(gone)");
    snprintf(line, sizeof line, "/export! %s", notes);
    chatcmd_run(&cmd, line);
    t = slurp(notes);
    CHECK(t && !strncmp(t, "# Conversation", 14) && strstr(t, "q1"), "/export! did not replace it: %.100s",
          t ? t : "(gone)");
    struct stat st;
    /* Private whatever it replaced (issue 28.8: the old 0644 stayed). */
    CHECK(stat(notes, &st) == 0 && (st.st_mode & 0777) == 0600, "the export took the old file's mode: %o",
          st.st_mode & 0777);
    /* Our own export is ours to replace, without '!'. */
    CHECK(chat(&f, "q2"), "no answer");
    int before = f.rec.n_notes;
    snprintf(line, sizeof line, "/export %s", notes);
    chatcmd_run(&cmd, line);
    t = slurp(notes);
    CHECK(f.rec.n_notes == before && t && strstr(t, "q2"), "re-export refused: %s",
          f.rec.n_notes ? f.rec.notes[f.rec.n_notes - 1] : "");
    char fresh[PATH_MAX];
    snprintf(fresh, sizeof fresh, "%.200s/fresh.md", tmpdir);
    snprintf(line, sizeof line, "/export %s", fresh);
    chatcmd_run(&cmd, line);
    CHECK(stat(fresh, &st) == 0 && (st.st_mode & 0777) == 0600, "a new export is 0600: %o", st.st_mode & 0777);
    /* /save: the same rule. */
    char other[PATH_MAX];
    snprintf(other, sizeof other, "%.200s/other.txt", tmpdir);
    write_text(other, "keep me");
    snprintf(line, sizeof line, "/save %s", other);
    chatcmd_run(&cmd, line);
    CHECK(noted(&f.rec, "is not a conversation glmchat can read; not overwriting it (") && noted(&f.rec, "/save! replaces it") && (t = slurp(other)) && !strcmp(t, "keep me"), "/save replaced it");
    snprintf(line, sizeof line, "/save! %s", other);
    chatcmd_run(&cmd, line);
    conversation c;
    err_t err;
    CHECK(conv_load(&c, other, &err) == 0 && c.n == 4, "/save! did not write the conversation: %.200s", err.msg);
    conv_free(&c);
    /* Never a device, '!' or not; a '!' only where a command takes one. */
    chatcmd_run(&cmd, "/export! /dev/null");
    CHECK(noted(&f.rec, "/dev/null is a device; not replacing it"), "a device was replaced");
    CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode), "/dev/null is gone");
    chatcmd_run(&cmd, "/clear!");
    CHECK(noted(&f.rec, "/clear takes no '!'"), "/clear! ran");
    close_session(&f);
}

/* Stopped before a word of the answer: the message leaves the
 * conversation and its file (made for it) and comes back to the input,
 * with what was queued after it. */
static void test_stop_before_answer_gives_message_back(void)
{
    fixture f;
    CHECK(start_ready(&f, 3000), "the session did not start");
    if (!f.s)
        return;
    ui_session_send(f.s, "long question");
    ui_session_send(f.s, "and a queued one");
    const char *path = ui_session_autosave_path(f.s);
    char file[PATH_MAX];
    snprintf(file, sizeof file, "%s", path);
    CHECK(file[0] && access(file, F_OK) == 0, "the message was not saved when sent");
    ui_session_cancel(f.s); /* at once: before the prompt is read */
    CHECK(wait_idle(&f), "cancel did not end the answer");
    CHECK(ui_session_conv(f.s)->n == 0, "roles %s: the stopped message stayed", roles(f.s));
    CHECK(f.rec.restored == 1 && !strcmp(f.rec.input, "long question\n\nand a queued one"), "input: %.100s",
          f.rec.input);
    CHECK(access(file, F_OK) != 0 && !ui_session_autosave_path(f.s)[0], "its file stayed: %.200s", file);
    /* The next one is answered (nothing queued is sent behind the user's back). */
    CHECK(!ui_session_busy(f.s), "the queued message was sent");
    close_session(&f);
}

/* /undo: the last exchange goes, then the one before; the file follows. */
static void test_undo_removes_exchanges(void)
{
    fixture f;
    CHECK(start_ready(&f, 4), "the session did not start");
    if (!f.s)
        return;
    theme th;
    memset(&th, 0, sizeof th);
    chatcmd_ctx cmd = {.session = f.s, .fe = &f.fe, .theme = &th};
    ui_session_set_system(f.s, "sys");
    CHECK(chat(&f, "q1") && chat(&f, "q2"), "no answers");
    char file[PATH_MAX];
    snprintf(file, sizeof file, "%s", ui_session_autosave_path(f.s));
    conversation c;
    err_t err;
    chatcmd_run(&cmd, "/undo");
    CHECK(!strcmp(roles(f.s), "sua") && strstr(f.rec.status, "Removed your last exchange (2 messages)"),
          "roles %s, status %.100s", roles(f.s), f.rec.status);
    CHECK(conv_load(&c, file, &err) == 0 && c.n == 3, "the file did not follow: %zu messages", c.n);
    conv_free(&c);
    chatcmd_run(&cmd, "/undo");
    CHECK(!strcmp(roles(f.s), "s"), "roles %s", roles(f.s));
    /* Nothing worth a file is left: the file this session made goes. */
    CHECK(access(file, F_OK) != 0 && !ui_session_autosave_path(f.s)[0], "the empty file stayed");
    chatcmd_run(&cmd, "/undo");
    CHECK(strstr(f.rec.status, "Nothing to undo") && f.rec.status_level == UI_ERROR, "status %.100s", f.rec.status);
    /* A message without an answer (one that failed, say) is an exchange too. */
    CHECK(chat(&f, "q3"), "no answer");
    conv_add((conversation *)ui_session_conv(f.s), "user", "unanswered", NULL);
    chatcmd_run(&cmd, "/undo");
    CHECK(!strcmp(roles(f.s), "sua") && !strcmp(content(f.s, 1), "q3"), "roles %s", roles(f.s));
    f.changed |= ui_session_send(f.s, "busy now");
    chatcmd_run(&cmd, "/undo");
    CHECK(strstr(f.rec.status, "/undo: wait for the answer"), "status %.100s", f.rec.status);
    CHECK(wait_idle(&f), "no answer");
    close_session(&f);
}

/* A small context: the oldest exchanges leave the prompt (a note says so,
 * the conversation keeps them); with context-overflow stop, no answer. */
static void test_context_trim_and_stop(void)
{
    fixture f;
    open_n_ctx = 256;
    bool started = start_ready(&f, 8);
    open_n_ctx = 0;
    CHECK(started, "the session did not start");
    if (!f.s)
        return;
    size_t dropped = 0;
    uint32_t prompt = 0;
    CHECK(ui_session_n_ctx(f.s, &dropped, &prompt) == 256, "n_ctx %u", ui_session_n_ctx(f.s, NULL, NULL));
    int sent = 0;
    while (sent < 40 && !noted(&f.rec, "left out of the prompt")) {
        CHECK(chat(&f, "a question of quite a few words to fill the small context"), "no answer");
        sent++;
    }
    CHECK(noted(&f.rec, "The context is full: the oldest ") && noted(&f.rec, "left out of the prompt, which is now"),
          "no note after %d messages: %s", sent, f.rec.n_notes ? f.rec.notes[f.rec.n_notes - 1] : "");
    ui_session_n_ctx(f.s, &dropped, &prompt);
    /* A quarter of the room went at once: the prompt leaves room to grow. */
    CHECK(dropped >= 1 && prompt > 0 && prompt + 8 + (256 - 8) / 4 <= 256, "dropped %zu, prompt %u", dropped, prompt);
    /* Answered, and the conversation keeps every message. */
    const conversation *c = ui_session_conv(f.s);
    CHECK(c->n == (size_t)sent * 2 && !strcmp(c->msgs[c->n - 1].role, "assistant"), "%zu messages after %d sent",
          c->n, sent);
    /* One more: it fits beside what was left out (a quarter of the room went
     * at once), so its prompt starts as the last one did and only the new
     * turn is read; no new note. */
    int notes = f.rec.n_notes;
    size_t dropped_before = dropped;
    CHECK(chat(&f, "short"), "no answer");
    c = ui_session_conv(f.s);
    CHECK(c->n == (size_t)sent * 2 + 2, "not answered");
    ui_session_n_ctx(f.s, &dropped, &prompt);
    const conv_msg *asked = &c->msgs[c->n - 2];
    CHECK(dropped == dropped_before && f.rec.n_notes == notes, "dropped %zu then %zu, %d new notes", dropped_before,
          dropped, f.rec.n_notes - notes);
    CHECK(asked->n_tokens > 0 && asked->n_tokens < prompt / 2, "read %u of the prompt's %u tokens: the cache was not used",
          asked->n_tokens, prompt);
    /* context-overflow stop: not answered, with the reason. */
    err_t err;
    CHECK(ui_session_set(f.s, "context-overflow", "stop", &err) == 0, "set: %.200s", err.msg);
    CHECK(chat(&f, "and one more"), "did not end");
    CHECK(noted(&f.rec, "E: Not answered: The conversation is"), "no refusal: %s",
          f.rec.n_notes ? f.rec.notes[f.rec.n_notes - 1] : "");
    c = ui_session_conv(f.s);
    CHECK(!strcmp(c->msgs[c->n - 1].role, "user"), "answered with context-overflow stop");
    close_session(&f);
}

/* The last note, "" when none. */
static const char *last_note(const recorder *r)
{
    return r->n_notes ? r->notes[r->n_notes - 1] : "";
}

/* /set ctx: 0 is what -c 0 is (the largest context that fits, which a note
 * tells once the engine has it; it answered "a context of 0 tokens"), and a
 * size that cannot hold the next answer to the conversation is refused with
 * one line that says what it needs, the engine left as it is. */
static void test_set_ctx_zero_and_too_small(void)
{
    fixture f;
    open_n_ctx = 256;
    bool started = start_ready(&f, 8);
    open_n_ctx = 0;
    CHECK(started, "the session did not start");
    if (!f.s)
        return;
    theme th;
    memset(&th, 0, sizeof th);
    chatcmd_ctx cmd = {.session = f.s, .fe = &f.fe, .theme = &th};
    /* A system prompt of a few hundred tokens, and a turn after it. */
    sbuf sys = {0};
    for (int i = 0; i < 40; i++)
        sbuf_adds(&sys, "Answer in full sentences. ");
    ui_session_set_system(f.s, sbuf_str(&sys));
    sbuf_free(&sys);
    chatcmd_run(&cmd, "/set ctx 2048");
    CHECK(wait_idle(&f) && ui_session_n_ctx(f.s, NULL, NULL) == 2048, "n_ctx %u", ui_session_n_ctx(f.s, NULL, NULL));
    CHECK(chat(&f, "hello"), "no answer");
    /* Too small: refused, nothing restarted. */
    int notes = f.rec.n_notes;
    chatcmd_run(&cmd, "/set ctx 64");
    CHECK(f.rec.n_notes == notes + 1 && strstr(last_note(&f.rec), "E: /set ctx 64: too small for this conversation: "
                                                                  "it needs at least ") &&
              strstr(last_note(&f.rec), "the system prompt;") && !strchr(last_note(&f.rec), '\n'),
          "note: %.300s", last_note(&f.rec));
    CHECK(ui_session_ready(f.s) && ui_session_n_ctx(f.s, NULL, NULL) == 2048 && ui_session_settings(f.s)->n_ctx == 2048,
          "the engine changed: ready %d, n_ctx %u", ui_session_ready(f.s), ui_session_n_ctx(f.s, NULL, NULL));
    /* What it says it needs is exact: one less is refused, that much is taken. */
    unsigned need = 0;
    const char *at = strstr(last_note(&f.rec), "at least ");
    CHECK(at && sscanf(at, "at least %u tokens", &need) == 1 && need > 64 && need < 2048, "need %u", need);
    if (need > 64 && need < 2048) {
        char line[64];
        snprintf(line, sizeof line, "/set ctx %u", need - 1);
        notes = f.rec.n_notes;
        chatcmd_run(&cmd, line);
        CHECK(f.rec.n_notes == notes + 1 && strstr(last_note(&f.rec), "too small"), "%u: %.300s", need - 1,
              last_note(&f.rec));
        snprintf(line, sizeof line, "/set ctx %u", need);
        chatcmd_run(&cmd, line);
        CHECK(wait_idle(&f) && ui_session_n_ctx(f.s, NULL, NULL) == need, "%u taken as %u", need,
              ui_session_n_ctx(f.s, NULL, NULL));
    }
    /* context-overflow stop: the whole conversation must fit. */
    err_t err;
    CHECK(ui_session_set(f.s, "context-overflow", "stop", &err) == 0, "set: %.200s", err.msg);
    chatcmd_run(&cmd, "/set ctx 64");
    CHECK(strstr(last_note(&f.rec), "E: /set ctx 64: too small") &&
              strstr(last_note(&f.rec), "the whole conversation, as context-overflow is stop"),
          "note: %.300s", last_note(&f.rec));
    /* 0: the largest that fits, as -c 0; said when known; then "already". */
    chatcmd_run(&cmd, "/set ctx 0");
    CHECK(noted(&f.rec, "Starting the model again with the largest context that fits") &&
              !noted(&f.rec, "context of 0 tokens"),
          "note: %.300s", last_note(&f.rec));
    CHECK(ui_session_settings(f.s)->n_ctx == 0, "the setting is %u", ui_session_settings(f.s)->n_ctx);
    CHECK(wait_idle(&f), "the engine did not start again");
    uint32_t chosen = ui_session_n_ctx(f.s, NULL, NULL);
    char want[128];
    snprintf(want, sizeof want, "The context is %u tokens: the largest that fits", chosen);
    CHECK(chosen > 2048 && noted(&f.rec, want), "context %u, note: %.300s", chosen, last_note(&f.rec));
    notes = f.rec.n_notes;
    chatcmd_run(&cmd, "/set ctx 0");
    snprintf(want, sizeof want, "The context is %u tokens already (the largest that fits)", chosen);
    CHECK(f.rec.n_notes == notes && !strcmp(f.rec.status, want) && ui_session_ready(f.s), "status: %.300s", f.rec.status);
    CHECK(chat(&f, "after the restart") && !strcmp(roles(f.s), "suaua"), "roles %s", roles(f.s));
    close_session(&f);
}

/* /copy: the last answer or one of its code blocks as OSC 52 bytes for the
 * terminal (plain, and wrapped again inside tmux); errors named. */
static void test_copy_sends_osc52(void)
{
    conversation c;
    conv_init(&c);
    conv_add(&c, "user", "q", NULL);
    conv_add(&c, "assistant", "old answer", NULL);
    conv_add(&c, "user", "q2", NULL);
    conv_add(&c, "assistant", "Two:\n```sh\nls -l\n```\nand\n```\necho hi\necho there\n```", NULL);
    fixture f;
    CHECK(open_session(&f, 4, &c), "no session");
    if (!f.s)
        return;
    theme th;
    memset(&th, 0, sizeof th);
    chatcmd_ctx cmd = {.session = f.s, .fe = &f.fe, .theme = &th};
    unsetenv("TMUX");
    unsetenv("STY");
    unsetenv("VTE_VERSION");
    unsetenv("TERM_PROGRAM");
    setenv("TERM", "xterm-256color", 1);
    sbuf want = {0};
    const char *answer = ui_session_conv(f.s)->msgs[3].content;
    sbuf_adds(&want, "\x1b]52;c;");
    clip_base64(answer, strlen(answer), &want);
    sbuf_addc(&want, '\a');
    chatcmd_run(&cmd, "/copy");
    CHECK(f.rec.terminal.len == want.len && !memcmp(f.rec.terminal.s, want.s, want.len), "/copy sent '%.80s'",
          sbuf_str(&f.rec.terminal));
    CHECK(strstr(f.rec.status, "Copied the last answer"), "status %.100s", f.rec.status);
    sbuf_clear(&f.rec.terminal);
    sbuf_clear(&want);
    sbuf_adds(&want, "\x1b]52;c;");
    clip_base64("echo hi\necho there", 18, &want);
    sbuf_addc(&want, '\a');
    chatcmd_run(&cmd, "/copy code 2");
    CHECK(f.rec.terminal.len == want.len && !memcmp(f.rec.terminal.s, want.s, want.len), "/copy code 2 sent '%.80s'",
          sbuf_str(&f.rec.terminal));
    CHECK(strstr(f.rec.status, "code block 2 of 2 (2 lines)"), "status %.100s", f.rec.status);
    sbuf_clear(&f.rec.terminal);
    chatcmd_run(&cmd, "/copy code");
    CHECK(f.rec.terminal.len == want.len, "/copy code is the last block");
    sbuf_clear(&f.rec.terminal);
    chatcmd_run(&cmd, "/copy code 1");
    CHECK(strstr(f.rec.status, "code block 1 of 2, sh (1 line)"), "status %.100s", f.rec.status);
    sbuf_clear(&f.rec.terminal);
    chatcmd_run(&cmd, "/copy code 3");
    CHECK(noted(&f.rec, "E: /copy code: the answer has 2 code blocks: /copy code 1-2") && !f.rec.terminal.len,
          "block 3 of 2");
    chatcmd_run(&cmd, "/copy code x");
    CHECK(noted(&f.rec, "E: usage: /copy code [N]"), "a bad number");
    /* Inside tmux: the plain sequence, then the same in tmux's passthrough. */
    setenv("TMUX", "/tmp/tmux-0/default,1,0", 1);
    chatcmd_run(&cmd, "/copy code 2");
    CHECK(f.rec.terminal.len > want.len && !memcmp(f.rec.terminal.s, want.s, want.len) &&
              !memcmp(f.rec.terminal.s + want.len, "\x1bPtmux;\x1b\x1b]52;c;", 14),
          "tmux: '%.80s'", sbuf_str(&f.rec.terminal) + want.len);
    unsetenv("TMUX");
    sbuf_clear(&f.rec.terminal);
    /* Too large: nothing sent, the reason given. */
    conversation *cv = (conversation *)ui_session_conv(f.s);
    char *big = malloc(90001);
    memset(big, 'x', 90000);
    big[90000] = 0;
    conv_add(cv, "assistant", big, NULL);
    free(big);
    chatcmd_run(&cmd, "/copy");
    CHECK(noted(&f.rec, "too large to copy") && !f.rec.terminal.len, "90 KB copied");
    sbuf_free(&want);
    ui_session_free(f.s);
    sbuf_free(&f.rec.terminal);
}

static void test_replay_compares_answers(void)
{
    fixture f;
    CHECK(start_ready(&f, 4), "the session did not start");
    if (!f.s)
        return;
    conversation c;
    conv_init(&c);
    conv_add(&c, "user", "first question", NULL);
    conv_add(&c, "assistant", "recorded", NULL)->tps = 10;
    conv_add(&c, "user", "second question", NULL);
    f.changed |= ui_session_start_replay(f.s, &c, "rec.json");
    CHECK(c.n == 0, "not taken over");
    int turn, turns;
    CHECK(ui_session_replaying(f.s, &turn, &turns) && turn == 1 && turns == 2, "turn %d of %d", turn, turns);
    CHECK(wait_idle(&f), "the replay did not end");
    CHECK(!ui_session_replaying(f.s, NULL, NULL), "still replaying");
    CHECK(f.rec.replay_turns_begun == 2 && f.rec.last_turn.done && f.rec.last_turn.turn == 2, "turns %d, done %d",
          f.rec.replay_turns_begun, f.rec.last_turn.done);
    CHECK(noted(&f.rec, "Replay done: 2 turns"), "no summary");
    CHECK(ui_session_conv(f.s)->n == 0, "the replay touched the conversation");
    conv_init(&c);
    f.changed |= ui_session_start_replay(f.s, &c, "empty.json");
    CHECK(noted(&f.rec, "E: /replay: empty.json has no user messages"), "no error");
    close_session(&f);
}

/* The commands on a session: /edit puts the message in the input, /system
 * keeps the edit on it, /clear asks twice. */
static void test_commands_drive_the_session(void)
{
    fixture f;
    CHECK(start_ready(&f, 4), "the session did not start");
    if (!f.s)
        return;
    theme th;
    memset(&th, 0, sizeof th);
    chatcmd_ctx cmd = {.session = f.s, .fe = &f.fe, .theme = &th};
    CHECK(chat(&f, "q1") && chat(&f, "q2"), "no answers");
    chatcmd_run(&cmd, "/edit");
    CHECK(!strcmp(f.rec.input, "q2"), "input: %.100s", f.rec.input);
    unsigned ch = chatcmd_run(&cmd, "/system  be brief  ");
    CHECK((ch & UI_CHANGED_CONVERSATION) && !strcmp(content(f.s, 0), "be brief"), "system: %.100s", content(f.s, 0));
    CHECK(ui_session_edit_text(f.s) && !strcmp(ui_session_edit_text(f.s), "q2"), "the edit moved");
    ui_session_edit_cancel(f.s);
    CHECK(chatcmd_run(&cmd, "/quit") == UI_QUIT, "/quit");
    CHECK((chatcmd_run(&cmd, "/think off") & UI_CHANGED_SETTINGS) && !ui_session_thinking(f.s), "/think off");
    CHECK((chatcmd_run(&cmd, "/set temp 0.5") & UI_CHANGED_SETTINGS) && ui_session_settings(f.s)->temp == 0.5f,
          "/set temp");
    chatcmd_run(&cmd, "/set colour red");
    CHECK(noted(&f.rec, "E: /set: 'colour' is not a setting"), "bad /set key");
    chatcmd_run(&cmd, "/clear");
    CHECK(strstr(f.rec.status, "Type /clear again") && !strcmp(roles(f.s), "suaua"), "the first /clear cleared");
    chatcmd_run(&cmd, "/clear");
    CHECK(!strcmp(roles(f.s), "s") && !strcmp(f.rec.status, "New conversation"), "roles %s", roles(f.s));
    f.changed |= ui_session_send(f.s, "busy now");
    chatcmd_run(&cmd, "/load x.json");
    CHECK(strstr(f.rec.status, "/load x.json: wait for the answer") && f.rec.status_level == UI_ERROR,
          "status: %.100s", f.rec.status);
    CHECK(wait_idle(&f), "no answer");
    chatcmd_run(&cmd, "/sav");
    CHECK(noted(&f.rec, "Did you mean /save?"), "no hint");
    close_session(&f);
}

/* ---- issue 28 ------------------------------------------------------------------------------ */

/* A backend whose single-token evals fail after a few: a device error in
 * the middle of an answer (injected at the backend interface). */
static engine_backend failing;
static int evals_left;

static int failing_eval(void *impl, const int32_t *tokens, uint32_t n_tokens, uint32_t pos, const engine_output *out,
                        err_t *err)
{
    if (n_tokens == 1 && evals_left-- <= 0)
        return err_set(err, "injected: the device was lost at position %u", pos);
    return ref_engine_backend.eval(impl, tokens, n_tokens, pos, out, err);
}

/* 28.6d: the failed answer is kept with what it said and why, in the
 * conversation and its file; the user's message is not left without an
 * answer, and /retry replaces it. */
static void test_failed_answer_is_recorded(void)
{
    failing = ref_engine_backend;
    failing.name = "cpu-failing";
    failing.eval = failing_eval;
    open_be = &failing;
    evals_left = 1000; /* the session's start evaluates nothing, but be safe */
    fixture f;
    bool started = start_ready(&f, 12);
    open_be = NULL;
    CHECK(started, "the session did not start");
    if (!f.s)
        return;
    evals_left = 3;
    CHECK(chat(&f, "hello"), "no end to the answer");
    CHECK(!strcmp(roles(f.s), "ua"), "roles %s", roles(f.s));
    CHECK(noted(&f.rec, "The answer failed: injected: the device was lost"), "no note of the failure");
    const conversation *c = ui_session_conv(f.s);
    CHECK(c->n == 2 && c->msgs[1].error && strstr(c->msgs[1].error, "injected") && c->msgs[1].stopped &&
              c->msgs[1].content[0],
          "the failed answer is not recorded");
    conversation saved;
    err_t err = {{0}};
    CHECK(conv_load(&saved, ui_session_autosave_path(f.s), &err) == 0 && saved.n == 2 && saved.msgs[1].error,
          "the file: %.200s", err.msg);
    conv_free(&saved);
    evals_left = 1000;
    f.changed |= ui_session_retry(f.s);
    CHECK(wait_idle(&f), "the retry did not end");
    c = ui_session_conv(f.s);
    CHECK(!strcmp(roles(f.s), "ua") && c->n == 2 && !c->msgs[1].error, "/retry did not replace the failed answer: %s",
          roles(f.s));
    close_session(&f);
}

/* 28.2: /set refuses absurd sampler values (the check every entry path
 * calls) and leaves the setting as it was. */
static void test_set_refuses_absurd_sampling(void)
{
    fixture f;
    CHECK(start_ready(&f, 4), "the session did not start");
    if (!f.s)
        return;
    static const char *const bad[][2] = {{"temp", "1e-39"}, {"temp", "nan"},     {"temp", "-1"},
                                         {"top-p", "1e-40"}, {"min-p", "inf"},   {"top-k", "2000000"},
                                         {"repeat-penalty", "1e30"}, {"seed", " -5"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err_t err = {{0}};
        CHECK(ui_session_set(f.s, bad[i][0], bad[i][1], &err) != 0 && !strncmp(err.msg, bad[i][0], strlen(bad[i][0])),
              "/set %s %s: '%.200s'", bad[i][0], bad[i][1], err.msg);
    }
    err_t err = {{0}};
    CHECK(ui_session_set(f.s, "temp", "0.001", &err) == 0, "/set temp 0.001: %.200s", err.msg);
    CHECK(chat(&f, "hi") && !strcmp(roles(f.s), "ua"), "an answer after the refusals");
    close_session(&f);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/glmchat-test-session-XXXXXX");
    if (!mkdtemp(tmpdir))
        return 1;
    err_t err;
    if (model_load(&m, MODEL, &err) != 0 || !(tok = tok_load(m.gguf, &err))) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    RUN(test_send_answers_and_saves);
    RUN(test_penalties_saved);
    RUN(test_queue_while_busy_and_loading);
    RUN(test_queued_message_kept_on_the_way_out);
    RUN(test_cancel_keeps_partial_answer);
    RUN(test_retry_replaces_the_answer);
    RUN(test_edit_then_system_keeps_earlier_answer);
    RUN(test_edit_refused_while_busy_and_cancelled);
    RUN(test_clear_keeps_system_prompt_and_old_file);
    RUN(test_autosave_conflict_moves_to_a_new_file);
    RUN(test_save_copy_and_load);
    RUN(test_save_and_export_replace_only_with_bang);
    RUN(test_stop_before_answer_gives_message_back);
    RUN(test_undo_removes_exchanges);
    RUN(test_context_trim_and_stop);
    RUN(test_set_ctx_zero_and_too_small);
    RUN(test_copy_sends_osc52);
    RUN(test_replay_compares_answers);
    RUN(test_commands_drive_the_session);
    RUN(test_failed_answer_is_recorded);
    RUN(test_set_refuses_absurd_sampling);
    tok_free(tok);
    model_free(&m);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%.100s'", tmpdir);
    if (system(cmd) != 0)
        return 1;
    TESTS_DONE();
}
