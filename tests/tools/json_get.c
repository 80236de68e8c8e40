/* json_get: prints one value of a JSON file, for shell tests.
 *
 *   json_get FILE PATH [--sep S]
 *
 * PATH is dotted: object keys and array indices ("greedy.f32",
 * "llamacpp_same_file_vs_this.rel_l2", "prompt.tokens.0"); "." is the
 * whole document.  Arrays print their elements joined by S (default a
 * space), objects their keys.  Exit 1 when the path does not exist. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_scalar(const json_t *v)
{
    if (json_is_integer(v))
        printf("%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        printf("%.17g", json_real_value(v));
    else if (json_is_string(v))
        printf("%s", json_string_value(v));
    else if (json_is_true(v))
        printf("true");
    else if (json_is_false(v))
        printf("false");
    else
        printf("null");
}

int main(int argc, char **argv)
{
    const char *sep = " ";
    if (argc == 5 && strcmp(argv[3], "--sep") == 0)
        sep = argv[4];
    else if (argc != 3) {
        fprintf(stderr, "usage: json_get FILE PATH [--sep S]\n");
        return 2;
    }
    json_error_t je;
    json_t *root = json_load_file(argv[1], 0, &je);
    if (!root) {
        fprintf(stderr, "json_get: %s:%d: %s\n", argv[1], je.line, je.text);
        return 2;
    }
    char *path = strdup(argv[2]);
    json_t *v = root;
    for (char *tok = strtok(path, "."); tok && v; tok = strtok(NULL, ".")) {
        if (json_is_object(v))
            v = json_object_get(v, tok);
        else if (json_is_array(v))
            v = json_array_get(v, strtoul(tok, NULL, 10));
        else
            v = NULL;
    }
    free(path);
    if (!v) {
        fprintf(stderr, "json_get: %s: no '%s'\n", argv[1], argv[2]);
        json_decref(root);
        return 1;
    }
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            printf("%s", i ? sep : "");
            print_scalar(json_array_get(v, i));
        }
    } else if (json_is_object(v)) {
        const char *key;
        json_t *val;
        int first = 1;
        json_object_foreach(v, key, val) {
            printf("%s%s", first ? "" : sep, key);
            first = 0;
        }
    } else {
        print_scalar(v);
    }
    printf("\n");
    json_decref(root);
    return 0;
}
