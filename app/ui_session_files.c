/* ui_session_files.c: the session's files: the conversation's metadata,
 * autosaving, /save FILE, /export, /load. */
#include "ui_session_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void ui_session_fill_metadata(const ui_session *s, conversation *c)
{
    conv_set_str(&c->model_path, s->c.demo_note ? "(built-in demo model)" : s->c.model_path);
    conv_set_str(&c->model_name, s->c.model_name);
    conv_set_str(&c->model_fingerprint, s->c.fingerprint[0] ? s->c.fingerprint : NULL);
    c->model_size = s->c.model_size;
    conv_set_str(&c->tmpl, tmpl_name(s->chat.tmpl));
    c->thinking = s->chat.thinking;
    sampler_params sp;
    ui_session_sampling(s, &sp);
    c->sampling = conv_sampling_of(&sp, s->cfg.n_predict);
}

/* A conversation of only a system prompt is not worth a file. */
bool uis_worth_saving(const conversation *c)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->msgs[i].role, "system") != 0)
            return true;
    return false;
}

bool uis_autosave(ui_session *s)
{
    struct stat st;
    if (!uis_worth_saving(&s->chat.conv)) {
        /* Nothing left worth a file (/undo, a message stopped before its
         * answer): a file this session made goes again; a file it was
         * given (-C, /resume) keeps what is left; else there is nothing to do. */
        if (s->autosave_path[0] && s->autosave_ours) {
            if (unlink(s->autosave_path) != 0 && errno != ENOENT) {
                s->unsaved = true;
                ui_note(s->fe, UI_ERROR, "Cannot remove the empty %s: %s", s->autosave_path, strerror(errno));
                return false;
            }
            s->autosave_path[0] = 0;
            s->autosave_ours = false;
            s->changed |= UI_CHANGED_SETTINGS;
        }
        if (!s->autosave_path[0] || stat(s->autosave_path, &st) != 0) {
            s->unsaved = false;
            return true;
        }
    }
    ui_session_fill_metadata(s, &s->chat.conv);
    err_t err;
    /* A new file is created exclusively: two UIs started in one second get two files. */
    bool first = !s->autosave_path[0];
    int rc = first ? conv_save_new(&s->chat.conv, s->c.conv_dir, s->autosave_path, sizeof s->autosave_path, &err)
                   : conv_save(&s->chat.conv, s->autosave_path, &err);
    if (first && rc == 0) {
        s->loaded_from[0] = 0; /* a loaded conversation has a file of its own now */
        s->autosave_ours = true;
        s->changed |= UI_CHANGED_SETTINGS; /* the file's name is shown */
    }
    if (rc != 0 && !first) {
        /* The file we save into cannot take this conversation (another
         * glmchat or program changed it, it became unwritable, ...): keep
         * what the user wrote in a new file of its own rather than nowhere. */
        char fresh[sizeof s->autosave_path];
        err_t err2;
        if (conv_save_new(&s->chat.conv, s->c.conv_dir, fresh, sizeof fresh, &err2) == 0) {
            ui_note(s->fe, UI_ERROR, "Could not save into %s (%s); this conversation is saved to %s from now on",
                    s->autosave_path, err.msg, fresh);
            snprintf(s->autosave_path, sizeof s->autosave_path, "%s", fresh);
            s->autosave_ours = true;
            s->changed |= UI_CHANGED_SETTINGS; /* the file's name is shown */
            rc = 0;
        }
    }
    if (rc != 0) {
        s->unsaved = true;
        ui_note(s->fe, UI_ERROR, "Autosave failed: %s", err.msg);
        return false;
    }
    s->unsaved = false;
    return true;
}

void uis_conversation_changed(ui_session *s)
{
    s->changed |= UI_CHANGED_CONVERSATION;
    uis_autosave(s);
}

bool ui_session_autosave(ui_session *s)
{
    return uis_autosave(s);
}

const char *ui_session_autosave_path(const ui_session *s)
{
    return s->autosave_path;
}

bool ui_session_unsaved(const ui_session *s)
{
    return s->unsaved;
}

const char *ui_session_saved_path(const ui_session *s)
{
    if (s->unsaved || !uis_worth_saving(&s->chat.conv))
        return NULL;
    /* Loaded and nothing new since: it is in the file it came from. */
    return s->autosave_path[0] ? s->autosave_path : s->loaded_from[0] ? s->loaded_from : NULL;
}

/* ---- writing other files: /save FILE, /export ---------------------------------------- */

/* What is at path: nothing, a regular file (its first bytes in head), or
 * something that must never be replaced (a device, a FIFO, a directory).
 * Opened without blocking, so a FIFO cannot hang the UI. */
typedef enum { TARGET_NONE, TARGET_FILE, TARGET_OTHER } target_kind;

static target_kind probe_target(const char *path, char *head, size_t cap, size_t *n)
{
    *n = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        struct stat st;
        return errno == ENOENT && lstat(path, &st) != 0 ? TARGET_NONE : TARGET_OTHER;
    }
    struct stat st;
    target_kind k = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? TARGET_FILE : TARGET_OTHER;
    if (k == TARGET_FILE) {
        ssize_t r = read(fd, head, cap);
        *n = r > 0 ? (size_t)r : 0;
    }
    close(fd);
    return k;
}

/* The first bytes of every conv_to_markdown() text. */
static const char export_head[] = "# Conversation\n\n- started: ";

int ui_session_save_copy(ui_session *s, const char *path, bool replace, err_t *err)
{
    char head[64];
    size_t n;
    target_kind k = probe_target(path, head, sizeof head, &n);
    if (k == TARGET_OTHER)
        return err_set(err, "%s is not a regular file; not replacing it", path);
    ui_session_fill_metadata(s, &s->chat.conv);
    if (k == TARGET_FILE) {
        conversation old;
        err_t why;
        if (conv_load(&old, path, &why) == 0) {
            conv_free(&old);
        } else if (!replace) {
            /* The reason without the path it starts with (the message names it once). */
            size_t pl = strlen(path);
            const char *reason = !strncmp(why.msg, path, pl) && !strncmp(why.msg + pl, ": ", 2) ? why.msg + pl + 2
                                                                                                : why.msg;
            return err_set(err, "%s exists and is not a conversation glmchat can read; not overwriting it (%s); "
                                "/save! replaces it",
                           path, reason);
        } else {
            /* Asked for: the other file goes, the conversation takes its place. */
            char *json = conv_to_json(&s->chat.conv);
            if (!json)
                return err_set(err, "%s: out of memory", path);
            int rc = conv_write_atomic(path, json, strlen(json), 0600, err);
            free(json);
            return rc;
        }
    }
    return conv_save(&s->chat.conv, path, err);
}

/* What a path is, in words, for a refusal. */
static const char *kind_of(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m) || S_ISBLK(m) ? "a device" : "not a regular file";
}

/* What /export may replace: nothing (a new file), a regular file glmchat
 * exported (its first bytes say so), and with `replace` any other regular
 * file; never a symbolic link (the export would land elsewhere than the
 * name says, or replace the link), a directory, a device, a FIFO or a
 * socket.  The file is written atomically and is 0600 whether new or
 * replacing (what was there, even a 0644 file, does not make the
 * conversation readable by others). */
int ui_session_export(ui_session *s, const char *path, bool replace, err_t *err)
{
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (S_ISLNK(st.st_mode)) {
            char to[PATH_MAX];
            ssize_t n = readlink(path, to, sizeof to - 1);
            to[n > 0 ? n : 0] = 0;
            return err_set(err, "%s is a symbolic link%s%s; not replacing it (export to the file itself)", path,
                           n > 0 ? " to " : "", to);
        }
        if (!S_ISREG(st.st_mode))
            return err_set(err, "%s is %s; not replacing it", path, kind_of(st.st_mode));
        char head[64];
        size_t n;
        if (probe_target(path, head, sizeof head, &n) != TARGET_FILE)
            return err_set(err, "%s cannot be read; not replacing it", path);
        bool ours = n >= sizeof export_head - 1 && !memcmp(head, export_head, sizeof export_head - 1);
        if (!ours && !replace)
            return err_set(err, "%s exists and was not written by glmchat; /export! replaces it", path);
    } else if (errno != ENOENT) {
        return err_set(err, "%s: %s", path, strerror(errno));
    }
    sbuf md = {0};
    ui_session_fill_metadata(s, &s->chat.conv);
    conv_to_markdown(&s->chat.conv, &md);
    /* 0600: the conversation is nobody else's business (issue 17.8). */
    int rc = conv_write_private(path, md.s, md.len, err);
    sbuf_free(&md);
    return rc;
}

/* /load and /resume: the conversation c (taken over) replaces the current
 * one.  `into` is the file new turns go into: the loaded file itself
 * (/resume), or "" for a new file made by the first new turn (/load). */
static void take_conversation(ui_session *s, conversation *c, const char *into)
{
    if (s->unsaved)
        uis_autosave(s);
    conv_free(&s->chat.conv);
    s->chat.conv = *c;
    conv_init(c); /* moved */
    snprintf(s->autosave_path, sizeof s->autosave_path, "%s", into);
    s->loaded_from[0] = 0;
    s->autosave_ours = false;
    s->edit_index = -1;
    uis_context_reset(s);
    s->fe->new_conversation(s->fe->user);
    /* Not saved now: nothing changed yet, so a /load alone leaves no copy
     * of the loaded file behind (issue 16.6). */
    s->unsaved = false;
    s->changed |= UI_CHANGED_CONVERSATION | UI_CHANGED_SETTINGS | UI_CHANGED_STATE | UI_CHANGED_STATS;
}

/* Before the conversation takes the current metadata on its first save. */
static void template_hint(const ui_session *s, const conversation *c, char *extra, size_t cap)
{
    extra[0] = 0;
    const char *now = tmpl_name(s->chat.tmpl);
    if (c->tmpl && strcmp(c->tmpl, now) != 0 && tmpl_find(c->tmpl))
        snprintf(extra, cap, "\nIt was made with the %.40s template (now %s: /template %.40s switches).", c->tmpl, now,
                 c->tmpl);
}

unsigned ui_session_load(ui_session *s, conversation *c, const char *name)
{
    char extra[200];
    template_hint(s, c, extra, sizeof extra);
    size_t n = c->n;
    /* New turns go to a new file: the loaded one is never written to. */
    take_conversation(s, c, "");
    snprintf(s->loaded_from, sizeof s->loaded_from, "%s", name);
    ui_note(s->fe, UI_INFO, "Loaded %zu messages from %s. New turns are saved to a new file.%s", n, name, extra);
    return uis_take_changes(s);
}

unsigned ui_session_resume(ui_session *s, conversation *c, const char *path)
{
    if (!strcmp(path, s->autosave_path)) {
        conv_free(c);
        ui_status(s->fe, UI_INFO, "That is the conversation you are in");
        return uis_take_changes(s);
    }
    char extra[200];
    template_hint(s, c, extra, sizeof extra);
    size_t n = c->n;
    take_conversation(s, c, path);
    ui_note(s->fe, UI_INFO, "Continuing %s (%zu messages); new turns are saved into it.%s", path, n, extra);
    return uis_take_changes(s);
}

const char *ui_session_conv_dir(const ui_session *s)
{
    return s->c.conv_dir;
}
