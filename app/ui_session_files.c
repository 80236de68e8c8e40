/* ui_session_files.c: the session's files: the conversation's metadata,
 * autosaving, /save FILE, /export, /load. */
#include "ui_session_internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

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
    c->sampling = (conv_sampling){true, sp.temp, sp.top_p, sp.min_p, sp.top_k, sp.seed, s->cfg.n_predict};
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
    if (!uis_worth_saving(&s->chat.conv)) {
        s->unsaved = false;
        return true;
    }
    ui_session_fill_metadata(s, &s->chat.conv);
    err_t err;
    /* A new file is created exclusively: two UIs started in one second get two files. */
    bool first = !s->autosave_path[0];
    int rc = first ? conv_save_new(&s->chat.conv, s->c.conv_dir, s->autosave_path, sizeof s->autosave_path, &err)
                   : conv_save(&s->chat.conv, s->autosave_path, &err);
    if (first && rc == 0)
        s->changed |= UI_CHANGED_SETTINGS; /* the file's name is shown */
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
    return s->autosave_path[0] && !s->unsaved && uis_worth_saving(&s->chat.conv) ? s->autosave_path : NULL;
}

int ui_session_save_copy(ui_session *s, const char *path, err_t *err)
{
    ui_session_fill_metadata(s, &s->chat.conv);
    return conv_save(&s->chat.conv, path, err);
}

int ui_session_export(ui_session *s, const char *path, err_t *err)
{
    sbuf md = {0};
    ui_session_fill_metadata(s, &s->chat.conv);
    conv_to_markdown(&s->chat.conv, &md);
    int rc = conv_write_private(path, md.s, md.len, err);
    sbuf_free(&md);
    return rc;
}

unsigned ui_session_load(ui_session *s, conversation *c, const char *name)
{
    if (s->unsaved)
        uis_autosave(s);
    /* Before the conversation takes the current metadata on its first save. */
    char extra[200] = "";
    const char *now = tmpl_name(s->chat.tmpl);
    if (c->tmpl && strcmp(c->tmpl, now) != 0 && tmpl_find(c->tmpl))
        snprintf(extra, sizeof extra, "\nIt was made with the %.40s template (now %s: /template %.40s switches).",
                 c->tmpl, now, c->tmpl);
    size_t n = c->n;
    conv_free(&s->chat.conv);
    s->chat.conv = *c;
    conv_init(c); /* moved */
    /* New turns go to a new file: the loaded one is never written to. */
    s->autosave_path[0] = 0;
    s->edit_index = -1;
    s->fe->new_conversation(s->fe->user);
    uis_conversation_changed(s);
    s->changed |= UI_CHANGED_SETTINGS | UI_CHANGED_STATE;
    ui_note(s->fe, UI_INFO, "Loaded %zu messages from %s. New turns are saved to a new file.%s", n, name, extra);
    return uis_take_changes(s);
}
