/* gen_demo.c: build-time tool that writes the built-in demo model.
 *
 * `glmchat` without a model runs on a small random model in the real
 * deepseek2 / GLM-4.7-Flash layout, generated here by the project's own
 * generator (core/synth.c, preset "demo") and embedded into the binary by
 * app/demo_model.S.  A fixed seed and one thread make the file, and so the
 * binary, reproducible. */
#include <stdio.h>

#include "synth.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_demo OUT.gguf\n");
        return 2;
    }
    synth_config cfg;
    err_t err;
    if (synth_preset("demo", &cfg, &err) != 0) {
        fprintf(stderr, "gen_demo: %s\n", err.msg);
        return 1;
    }
    cfg.ftype = SYNTH_FT_Q4_K_M; /* the type most real GLM-4.7-Flash downloads use */
    cfg.seed = 4747;
    synth_options opt = {.n_threads = 1};
    synth_stats st;
    if (synth_write(&cfg, argv[1], &opt, &st, &err) != 0) {
        fprintf(stderr, "gen_demo: %s\n", err.msg);
        return 1;
    }
    return 0;
}
