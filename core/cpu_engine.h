/* cpu_engine.h: what `glmchat bench` asks of the fast CPU backend beyond
 * the engine interface (core/engine.h, where cpu_engine_backend is).
 *
 * Promises: both take the backend's impl (engine.impl of an engine opened
 * on cpu_engine_backend), on the engine's thread, between evals. */
#ifndef GLM_CPU_ENGINE_H
#define GLM_CPU_ENGINE_H

#include "engine.h"

/* The per-step table of the multi-token evals (a prompt's), as get_stats
 * fills it for the single-token ones. */
void cpu_engine_prompt_stats(void *impl, engine_stats *st);
/* Forgets the step timings so far (a bench depth's table counts its own). */
void cpu_engine_reset_profile(void *impl);

#endif
