/* conv_stress: helper of tests/t_crash_safety.sh.
 *
 *   conv_stress write FILE N     save two versions (A and B, N messages of
 *                                ~8 KiB each) into FILE, alternately, until
 *                                killed; the first save replaces what FILE
 *                                holds with the other version
 *   conv_stress once FILE N      one save of the other version, then exit
 *   conv_stress check FILE N     exit 0 when FILE parses and is exactly A or
 *                                B (prints which); 1 otherwise
 *   conv_stress count FILE       exit 0 and print the message count when
 *                                FILE parses; 1 otherwise
 *   conv_stress cleanup DIR      remove temporary files of dead writers;
 *                                print how many are left */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/conversation.h"

static void fill(conversation *c, char version, int n)
{
    conv_init(c);
    c->created = 1700000000.0;
    char text[8200];
    for (int i = 0; i < n; i++) {
        /* Distinct per message and version, so a mix would be caught. */
        int k = snprintf(text, sizeof text, "%c%d ", version, i);
        for (int j = k; j < (int)sizeof text - 1; j++)
            text[j] = (char)('a' + (i * 7 + j + version) % 26);
        text[sizeof text - 1] = 0;
        conv_msg *m = conv_add(c, i % 2 ? "assistant" : "user", text, NULL);
        m->n_tokens = (uint32_t)i;
    }
}

static int same(const conversation *a, const conversation *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->msgs[i].role, b->msgs[i].role) || strcmp(a->msgs[i].content, b->msgs[i].content) ||
            a->msgs[i].n_tokens != b->msgs[i].n_tokens)
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    err_t err;
    if (argc == 4 && (!strcmp(argv[1], "write") || !strcmp(argv[1], "once"))) {
        bool once = !strcmp(argv[1], "once");
        int n = atoi(argv[3]);
        conversation v[2];
        fill(&v[0], 'A', n);
        fill(&v[1], 'B', n);
        conversation cur;
        unsigned long first = 0;
        if (conv_load(&cur, argv[2], &err) == 0) {
            first = same(&cur, &v[0]) ? 1 : 0;
            conv_free(&cur);
        }
        for (unsigned long i = first;; i++) {
            /* Two writers taking turns on purpose: each save replaces the
             * other's file, which a conversation would otherwise refuse. */
            conv_forget_files(&v[i % 2]);
            int rc = conv_save(&v[i % 2], argv[2], &err) != 0;
            if (rc)
                fprintf(stderr, "conv_stress: %s\n", err.msg);
            if (rc || once) {
                /* Freed so that LeakSanitizer's exit status in the
                 * sanitizer round is the save's, not a leak report's. */
                conv_free(&v[0]);
                conv_free(&v[1]);
                return rc;
            }
        }
    }
    if (argc == 4 && !strcmp(argv[1], "check")) {
        conversation got, a, b;
        if (conv_load(&got, argv[2], &err) != 0) {
            printf("%s\n", err.msg);
            return 1;
        }
        fill(&a, 'A', atoi(argv[3]));
        fill(&b, 'B', atoi(argv[3]));
        int rc = same(&got, &a) ? (puts("A"), 0) : same(&got, &b) ? (puts("B"), 0) : (puts("neither A nor B"), 1);
        conv_free(&got);
        conv_free(&a);
        conv_free(&b);
        return rc;
    }
    if (argc == 3 && !strcmp(argv[1], "count")) {
        conversation got;
        if (conv_load(&got, argv[2], &err) != 0) {
            printf("%s\n", err.msg);
            return 1;
        }
        printf("%zu\n", got.n);
        conv_free(&got);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "cleanup")) {
        conv_cleanup_tmp(argv[2]);
        DIR *d = opendir(argv[2]);
        int left = 0;
        struct dirent *de;
        while (d && (de = readdir(d)))
            left += strstr(de->d_name, ".tmp.") != NULL;
        if (d)
            closedir(d);
        printf("%d\n", left);
        return 0;
    }
    fprintf(stderr, "usage: conv_stress write|check FILE N | count FILE | cleanup DIR\n");
    return 2;
}
