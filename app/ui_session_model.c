/* ui_session_model.c: /model: another model file in place of the one in
 * use, without leaving the chat.  The new file is opened (header,
 * tokenizer, template) before anything is let go, so a file that does not
 * open changes nothing; then the decode thread ends (which frees the
 * engine and its device memory), the old model is closed, and a new decode
 * thread loads the new one with the usual progress. */
#include "ui_session_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ui_session_config_set_model(ui_session_config *c, const chat_model *cm)
{
    c->m = &cm->m;
    c->tok = cm->tok;
    c->tmpl = cm->tmpl;
    c->be = cm->be;
    c->fallback = cm->fallback;
    c->params = cm->params;
    snprintf(c->model_path, sizeof c->model_path, "%s", cm->path);
    snprintf(c->model_name, sizeof c->model_name, "%s", cm->name);
    snprintf(c->fingerprint, sizeof c->fingerprint, "%s", cm->fingerprint);
    c->model_size = cm->size;
    c->demo_note = cm->demo_note;
    c->backend_note = cm->backend_note[0] ? cm->backend_note : NULL;
    c->pick_note = cm->pick_note[0] ? cm->pick_note : NULL;
    for (int i = 0; i < 4; i++)
        c->model_lines[i] = cm->lines[i];
    c->n_model_lines = 4;
}

const char *ui_session_model_path(const ui_session *s)
{
    return s->c.demo_note ? "(built-in demo model)" : s->c.model_path;
}

const char *const *ui_session_model_lines(const ui_session *s, int *n)
{
    *n = s->c.n_model_lines;
    return s->c.model_lines;
}

unsigned ui_session_switch_model(ui_session *s, const char *path)
{
    if (s->job) {
        ui_status(s->fe, UI_ERROR, "/model: wait for the answer to finish, or stop it with Esc");
        return uis_take_changes(s);
    }
    if (!s->c.open_model) {
        ui_note(s->fe, UI_ERROR, "/model: switching models is not available here");
        return uis_take_changes(s);
    }
    chat_model *next = calloc(1, sizeof *next);
    err_t err;
    if (!next) {
        ui_note(s->fe, UI_ERROR, "/model: out of memory");
        return uis_take_changes(s);
    }
    if (s->c.open_model(s->c.open_model_user, path, next, &err) != 0) {
        ui_note(s->fe, UI_ERROR, "/model: %s (still using %s)", err.msg, ui_session_model_path(s));
        free(next);
        return uis_take_changes(s);
    }
    /* A template given on the command line (or in the settings file) stays;
     * else the new model's own. */
    const tmpl_preset *tmpl = s->cfg.tmpl[0] ? s->chat.tmpl : next->tmpl;
    const tmpl_preset *was = s->chat.tmpl;
    bool keep = tmpl == was;
    if (!keep && s->unsaved && ui_session_has_turns(s))
        uis_autosave(s);

    /* The old engine goes first: its device memory is free for the new one. */
    decoder_free(s->dec);
    s->dec = NULL;
    chat_model *old = s->own_model;
    uint32_t n_ctx = s->c.params.n_ctx;
    ui_session_config_set_model(&s->c, next);
    s->c.params.n_ctx = n_ctx; /* the context asked for (-c, /set ctx) stays */
    s->c.tmpl = tmpl;
    s->own_model = next;
    if (old) {
        chat_model_close(old);
        free(old);
    }
    s->chat.tok = next->tok;
    chat_set_template(&s->chat, tmpl);
    snprintf(s->backend, sizeof s->backend, "%s", s->c.be->name);
    s->ready = s->load_failed = s->loading = false;
    s->have_stats = false;
    s->last_seq = 0;
    s->prefill_sample = 0;
    uis_context_reset(s);
    if (keep) {
        ui_note(s->fe, UI_INFO, "Loading %s (%s); the conversation goes on with it (the %s template).", path,
                s->c.model_name, tmpl_name(tmpl));
    } else {
        char file[PATH_MAX];
        snprintf(file, sizeof file, "%s", s->autosave_path[0] && uis_worth_saving(&s->chat.conv) ? s->autosave_path : "");
        s->changed |= ui_session_clear(s);
        if (file[0])
            ui_note(s->fe, UI_INFO, "Loading %s (%s). Its template is %s, not the conversation's (%s): a new "
                    "conversation begins; the old one stays in %s (/resume brings it back).", path, s->c.model_name,
                    tmpl_name(tmpl), tmpl_name(was), file);
        else
            ui_note(s->fe, UI_INFO, "Loading %s (%s), with the %s template: a new conversation begins.", path,
                    s->c.model_name, tmpl_name(tmpl));
    }
    s->dec = decoder_start(s->c.be, s->c.m, s->c.tok, &s->c.params, &err);
    if (!s->dec) {
        ui_note(s->fe, UI_ERROR, "The model could not be started: %s", err.msg);
        s->load_failed = true;
    }
    s->changed |= UI_CHANGED_ENGINE | UI_CHANGED_STATE | UI_CHANGED_STATS | UI_CHANGED_SETTINGS;
    return uis_take_changes(s);
}
