/* dep_cycles: finds circles in a graph of files, for tests/t_layers.sh.
 *
 *   dep_cycles < EDGES       each line "FROM TO [WHY]": FROM uses TO (calls a
 *                            function TO defines, or includes it); WHY, one
 *                            word, says how (the symbol or "#include")
 *
 * Prints one line per circle (a strongly connected group of two or more
 * files), as one concrete path round it with the reason of each step:
 *   cycle: a.c -> b.c (b_open) -> a.c (a_free)
 * followed by "(all of: ...)" when the group is larger than that path,
 * and exits 1 when there is any, 0 when there is none.  Edges from a file to
 * itself are no circle.  Bad input (a line without two names) is a one-line
 * error and exit status 2.
 *
 * Why a tool and not a script: Tarjan's algorithm and a path search are a
 * few dozen lines of C and the same on every machine; CI has no Python. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NODES 4096
#define MAX_EDGES 65536
#define NAME_MAX_LEN 256

typedef struct {
    int to;
    char why[NAME_MAX_LEN];
} edge;

static char names[MAX_NODES][NAME_MAX_LEN];
static int n_nodes;
static edge edges[MAX_EDGES];
static int edge_from[MAX_EDGES];
static int n_edges;

/* Tarjan's state per node. */
static int index_of[MAX_NODES], low[MAX_NODES], on_stack[MAX_NODES], comp[MAX_NODES];
static int stack[MAX_NODES], sp, next_index, n_comps;

static int node_id(const char *name)
{
    for (int i = 0; i < n_nodes; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    if (n_nodes == MAX_NODES)
        return -1;
    snprintf(names[n_nodes], NAME_MAX_LEN, "%s", name);
    return n_nodes++;
}

static void strongconnect(int v)
{
    index_of[v] = low[v] = next_index++;
    stack[sp++] = v;
    on_stack[v] = 1;
    for (int e = 0; e < n_edges; e++) {
        if (edge_from[e] != v)
            continue;
        int w = edges[e].to;
        if (index_of[w] < 0) {
            strongconnect(w);
            if (low[w] < low[v])
                low[v] = low[w];
        } else if (on_stack[w] && index_of[w] < low[v]) {
            low[v] = index_of[w];
        }
    }
    if (low[v] == index_of[v]) {
        int w;
        do {
            w = stack[--sp];
            on_stack[w] = 0;
            comp[w] = n_comps;
        } while (w != v);
        n_comps++;
    }
}

/* Prints the shortest way from `start` back to itself inside its group
 * (breadth first over the group's edges). */
static void print_cycle(int start)
{
    static int via_edge[MAX_NODES];
    static int queue[MAX_NODES];
    for (int i = 0; i < n_nodes; i++)
        via_edge[i] = -1;
    int head = 0, tail = 0, found = -1;
    queue[tail++] = start;
    while (head < tail && found < 0) {
        int v = queue[head++];
        for (int e = 0; e < n_edges; e++) {
            int w = edges[e].to;
            if (edge_from[e] != v || comp[w] != comp[start])
                continue;
            if (w == start) {
                found = e;
                break;
            }
            if (via_edge[w] < 0) {
                via_edge[w] = e;
                queue[tail++] = w;
            }
        }
    }
    /* walk back from the closing edge, then print forwards */
    int path[MAX_NODES], n = 0;
    for (int e = found; e >= 0; e = edge_from[e] == start ? -1 : via_edge[edge_from[e]])
        path[n++] = e;
    printf("cycle: %s", names[start]);
    for (int i = n - 1; i >= 0; i--)
        printf(" -> %s (%s)", names[edges[path[i]].to], edges[path[i]].why);
    /* and the whole group, when the path does not pass every member */
    int size = 0;
    for (int i = 0; i < n_nodes; i++)
        size += comp[i] == comp[start];
    if (size > n) {
        printf("  (all of:");
        for (int i = 0; i < n_nodes; i++)
            if (comp[i] == comp[start])
                printf(" %s", names[i]);
        printf(")");
    }
    printf("\n");
}

int main(void)
{
    char line[3 * NAME_MAX_LEN];
    int lineno = 0;
    while (fgets(line, sizeof line, stdin)) {
        lineno++;
        char from[NAME_MAX_LEN], to[NAME_MAX_LEN], why[NAME_MAX_LEN] = "uses";
        int got = sscanf(line, "%255s %255s %255s", from, to, why);
        if (got < 2) {
            fprintf(stderr, "dep_cycles: line %d: expected \"FROM TO [WHY]\"\n", lineno);
            return 2;
        }
        int a = node_id(from), b = node_id(to);
        if (a < 0 || b < 0 || n_edges == MAX_EDGES) {
            fprintf(stderr, "dep_cycles: line %d: more than %d files or %d edges\n", lineno,
                    MAX_NODES, MAX_EDGES);
            return 2;
        }
        if (a == b)
            continue;
        int dup = 0;
        for (int e = 0; e < n_edges && !dup; e++)
            dup = edge_from[e] == a && edges[e].to == b;
        if (dup)
            continue;
        edge_from[n_edges] = a;
        edges[n_edges].to = b;
        snprintf(edges[n_edges].why, NAME_MAX_LEN, "%s", why);
        n_edges++;
    }
    for (int i = 0; i < n_nodes; i++)
        index_of[i] = -1;
    for (int i = 0; i < n_nodes; i++)
        if (index_of[i] < 0)
            strongconnect(i);

    int circles = 0;
    static int printed[MAX_NODES];
    for (int i = 0; i < n_nodes; i++) {
        int size = 0;
        for (int j = 0; j < n_nodes; j++)
            size += comp[j] == comp[i];
        if (size < 2 || printed[comp[i]])
            continue;
        printed[comp[i]] = 1;
        print_cycle(i);
        circles++;
    }
    return circles ? 1 : 0;
}
