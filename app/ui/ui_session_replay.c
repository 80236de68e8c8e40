/* ui_session_replay.c: /replay: the user messages of a saved conversation
 * asked again, one turn at a time, each new answer shown beside the
 * recorded one.  The replayed conversation is a chat of its own; the
 * session's conversation is not touched. */
#include "ui_session_internal.h"

#include <string.h>

static int count_user_turns(const conversation *c)
{
    int n = 0;
    for (size_t i = 0; i < c->n; i++)
        n += !strcmp(c->msgs[i].role, "user");
    return n;
}

/* The recorded answer to the current question, NULL when there is none. */
static const conv_msg *recorded_answer(const ui_session *s)
{
    const conversation *c = &s->replay.conv;
    size_t a = s->replay_question + 1;
    return a < c->n && !strcmp(c->msgs[a].role, "assistant") ? &c->msgs[a] : NULL;
}

/* Shows the current turn (a new one, or its new answer so far). */
static void show_turn(ui_session *s, bool is_new, const char *new_answer)
{
    const conv_msg *old = recorded_answer(s);
    ui_replay_turn t = {
        .turn = s->replay_turn,
        .n_turns = s->replay_turns,
        .user = s->replay.conv.msgs[s->replay_question].content,
        .old_answer = old ? old->content : "(no recorded answer)",
        .old_tps = old ? old->tps : 0,
        .new_answer = new_answer,
        .new_tps = s->replay_new_tps,
        .done = s->replay_done,
        .stopped = s->replay_stopped,
    };
    s->fe->replay_turn(s->fe->user, &t, is_new);
}

void uis_replay_end(ui_session *s)
{
    if (!s->replay_active)
        return;
    chat_free(&s->replay);
    s->replay_active = false;
    s->changed |= UI_CHANGED_STATE;
}

/* Asks the next question, or ends the replay with a summary. */
static void replay_step(ui_session *s)
{
    const conversation *c = &s->replay.conv;
    size_t u = s->replay_next;
    while (u < c->n && strcmp(c->msgs[u].role, "user") != 0)
        u++;
    if (u >= c->n) {
        int t = s->replay_turn;
        ui_note(s->fe, UI_INFO, "Replay done: %d turn%s; new %.1f tok/s on average, recorded %.1f.", t,
                t == 1 ? "" : "s", t ? s->replay_new_sum / t : 0.0, t ? s->replay_old_sum / t : 0.0);
        uis_replay_end(s);
        return;
    }
    s->replay_turn++;
    s->replay_next = u + 1;
    s->replay_question = u;
    s->replay_new_tps = 0;
    s->replay_done = s->replay_stopped = false;
    s->changed |= UI_CHANGED_STATE;
    show_turn(s, true, "");
    /* The recorded answer's own seed, unless the user set one: with the
     * same model the replay then reproduces it. */
    const conv_msg *old = recorded_answer(s);
    bool own_seed = old && old->has_seed && !s->cfg.has_seed;
    uint64_t seed = own_seed ? old->seed : uis_answer_seed(s);
    sampler_params sp;
    ui_session_sampling(s, &sp);
    /* greedy answers do not depend on the draw's order; sampled ones do */
    if (own_seed && sp.temp > 0 && strcmp(conv_msg_draw(old), SAMPLER_DRAW) != 0)
        ui_note(s->fe, UI_INFO,
                "Turn %d: another glmchat drew the recorded answer (its draw: %.15s; this one's: " SAMPLER_DRAW
                "): with its seed the new answer differs.",
                s->replay_turn, conv_msg_draw(old));
    if (uis_submit(s, &s->replay, u + 1, GEN_REPLAY, seed) != 0) {
        s->replay_done = true;
        show_turn(s, false, "");
        uis_replay_end(s);
    }
}

void uis_replay_text(ui_session *s)
{
    show_turn(s, false, sbuf_str(&s->stream.content));
}

void uis_replay_done(ui_session *s, const dec_event *ev)
{
    chat_stream_finish(&s->stream);
    const conv_msg *old = recorded_answer(s);
    s->replay_new_tps = ev->decode_tps;
    s->replay_done = true;
    s->replay_stopped = ev->stop == DEC_STOP_CANCEL;
    s->replay_new_sum += ev->decode_tps;
    s->replay_old_sum += old ? old->tps : 0;
    show_turn(s, false, sbuf_str(&s->stream.content));
    uis_end_generation(s);
    if (ev->stop == DEC_STOP_CANCEL) {
        ui_note(s->fe, UI_INFO, "Replay stopped after %d of %d turns.", s->replay_turn, s->replay_turns);
        uis_replay_end(s);
        return;
    }
    replay_step(s);
}

unsigned ui_session_start_replay(ui_session *s, conversation *c, const char *name)
{
    int turns = count_user_turns(c);
    if (turns == 0) {
        ui_note(s->fe, UI_ERROR, "/replay: %s has no user messages to replay", name);
        conv_free(c);
        return uis_take_changes(s);
    }
    if (!s->ready) {
        ui_note(s->fe, UI_ERROR, "/replay: the model is not loaded");
        conv_free(c);
        return uis_take_changes(s);
    }
    uis_replay_end(s);
    chat_init(&s->replay, s->c.tok, s->chat.tmpl, s->chat.thinking);
    conv_free(&s->replay.conv);
    s->replay.conv = *c;
    conv_init(c); /* moved */
    s->replay_active = true;
    s->replay_next = 0;
    s->replay_turn = 0;
    s->replay_turns = turns;
    s->replay_old_sum = s->replay_new_sum = 0;
    ui_note(s->fe, UI_INFO, "Replaying the %d question%s of %s with the current model and settings (Esc stops).",
            turns, turns == 1 ? "" : "s", name);
    replay_step(s);
    return uis_take_changes(s);
}
