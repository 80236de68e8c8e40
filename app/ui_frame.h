/* ui_frame.h: drawing the chat screen. */
#ifndef GLM_UI_FRAME_H
#define GLM_UI_FRAME_H

#include "ui_app.h"

/* Lays the screen out (again, when its size or the input's height
 * changed) and draws every part. */
void ui_frame_draw(ui_app *a);

#endif
