/* md_source.c: what md4c does not report, read from the source around the
 * text it hands out (its text pointers point into the source): where lines
 * begin and end, blank lines between blocks, fence and rule lines, a setext
 * heading's underline, a table's delimiter row still being written, and
 * whether a marker run left as text may still open emphasis or code.
 *
 * Container markers ('>' of quotes, list item markers, indentation) are
 * skipped without parsing the containers again: md4c has already decided
 * what the blocks are; these only find the lines they were on. */
#include <string.h>

#include "md_internal.h"

bool mds_holds(const md_src *s, const char *p)
{
    return p >= s->s && p < s->s + s->n;
}

size_t mds_line_end(const md_src *s, size_t p)
{
    const char *nl = p < s->n ? memchr(s->s + p, '\n', s->n - p) : NULL;
    return nl ? (size_t)(nl - s->s) : s->n;
}

size_t mds_line_start(const md_src *s, size_t p)
{
    while (p > 0 && s->s[p - 1] != '\n')
        p--;
    return p;
}

/* After quote markers and indentation from p. */
static size_t skip_markers(const md_src *s, size_t p, size_t end)
{
    while (p < end && (s->s[p] == ' ' || s->s[p] == '\t' || s->s[p] == '>'))
        p++;
    return p;
}

static bool blank_from(const md_src *s, size_t p, size_t end)
{
    for (; p < end; p++)
        if (s->s[p] != ' ' && s->s[p] != '\t' && s->s[p] != '\r' && s->s[p] != '>')
            return false;
    return true;
}

/* After a list item's marker ("-", "*", "+", "12.", "3)" and a space) at p,
 * or p when there is none. */
static size_t skip_item_marker(const md_src *s, size_t p, size_t le)
{
    size_t q = p;
    while (q < le && q - p < 9 && s->s[q] >= '0' && s->s[q] <= '9')
        q++;
    bool marker = q < le && (q > p ? s->s[q] == '.' || s->s[q] == ')' : s->s[q] == '-' || s->s[q] == '*' || s->s[q] == '+');
    if (marker && q + 1 < le && (s->s[q + 1] == ' ' || s->s[q + 1] == '\t'))
        return q + 1;
    return p;
}

bool mds_blank_line_between(const md_src *s, size_t from, size_t to)
{
    for (size_t ls = mds_line_end(s, from) + 1; ls < to && ls <= s->n;) {
        size_t le = mds_line_end(s, ls);
        if (le >= to)
            return false;
        if (blank_from(s, ls, le))
            return true;
        ls = le + 1;
    }
    return false;
}

bool mds_fence_line(const md_src *s, size_t ls, char ch)
{
    size_t le = mds_line_end(s, ls), p = skip_markers(s, ls, le);
    for (size_t q; (q = skip_item_marker(s, p, le)) != p;)
        p = skip_markers(s, q, le);
    size_t k = p;
    while (k < le && s->s[k] == ch)
        k++;
    return k - p >= 3 && blank_from(s, k, le);
}

bool mds_rule_line(const md_src *s, size_t ls, char unused)
{
    size_t le = mds_line_end(s, ls);
    for (int tries = 0; tries < 8; tries++) {
        size_t p = skip_markers(s, ls, le);
        char c = 0;
        int count = 0;
        bool ok = true;
        for (size_t i = p; i < le && ok; i++) {
            char x = s->s[i];
            if (x == ' ' || x == '\t' || x == '\r')
                continue;
            ok = (x == '-' || x == '*' || x == '_') && (!c || x == c);
            c = x;
            count++;
        }
        if (ok && count >= 3)
            return true;
        size_t q = skip_item_marker(s, p, le); /* "- ---": an item's marker first */
        if (q == p)
            return false;
        ls = q;
    }
    return false;
}

size_t mds_first_line(const md_src *s, size_t ls, bool (*is)(const md_src *, size_t, char), char ch)
{
    for (; ls < s->n; ls = mds_line_end(s, ls) + 1) {
        if (is(s, ls, ch))
            return ls;
        if (!blank_from(s, ls, mds_line_end(s, ls)))
            return MDS_NONE;
    }
    return MDS_NONE;
}

size_t mds_heading_end(const md_src *s, size_t start, size_t end)
{
    size_t ls = mds_line_start(s, start), p = skip_markers(s, ls, end);
    size_t next = mds_line_end(s, end) + 1;
    if ((p < s->n && s->s[p] == '#') || next >= s->n)
        return end; /* "# heading": all on its line */
    size_t le = mds_line_end(s, next), k;
    p = skip_markers(s, next, le);
    for (k = p; k < le && (s->s[k] == '=' || s->s[k] == '-'); k++)
        ;
    return k > p && blank_from(s, k, le) ? le : end;
}

bool mds_delimiter_row(const md_src *s, size_t ls)
{
    size_t le = mds_line_end(s, ls);
    bool bar = false;
    for (size_t p = ls; p < le; p++) {
        char c = s->s[p];
        if (c != '|' && c != '-' && c != ':' && c != ' ' && c != '\t' && c != '>')
            return false;
        bar |= c == '|';
    }
    if (!bar || ls == 0)
        return false;
    size_t ps = mds_line_start(s, ls - 1);
    return memchr(s->s + ps, '|', ls - 1 - ps) != NULL;
}

void mds_indent(const md_src *s, size_t p, size_t cols, sbuf *out)
{
    size_t ls = mds_line_start(s, p), col = 0;
    for (size_t i = ls; i < p; i++)
        col = s->s[i] == '\t' ? (col / 4 + 1) * 4 : col + 1;
    size_t from = col >= cols ? col - cols : 0, at = 0;
    for (size_t i = ls; i < p; i++) {
        char c = s->s[i];
        size_t next = c == '\t' ? (at / 4 + 1) * 4 : at + 1;
        if (at >= from && (c == ' ' || c == '\t'))
            sbuf_addc(out, c);
        else if (next > from) /* part of a tab, or (never expected) not blank */
            for (size_t k = at > from ? at : from; k < next; k++)
                sbuf_addc(out, ' ');
        at = next;
    }
}

/* ---- a streaming answer's open markers ----------------------------------------------------- */

static bool ascii_punct(unsigned char c)
{
    return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
}

static bool white(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool mds_may_open(const md_src *s, size_t at, size_t len, char ch)
{
    size_t bs = 0;
    while (bs < at && s->s[at - 1 - bs] == '\\')
        bs++;
    if (bs % 2)
        return false; /* escaped */
    char prev = at ? s->s[at - 1] : ' ';
    bool prev_ws = at == 0 || white(prev), prev_p = !prev_ws && ascii_punct((unsigned char)prev);
    if (at + len >= s->n) /* at the very end: it may open what comes next */
        return ch == '`' || prev_ws || prev_p;
    if (ch == '`')
        return true;
    char next = s->s[at + len];
    bool next_ws = white(next), next_p = !next_ws && ascii_punct((unsigned char)next);
    bool left = !next_ws && (!next_p || prev_ws || prev_p);
    if (ch == '~')
        return left && len <= 2;
    if (ch == '_')
        return left && (prev_ws || prev_p);
    return left;
}

bool mds_reaches_end(const md_src *s, size_t p)
{
    for (; p < s->n; p++)
        if (!white(s->s[p]) && s->s[p] != '|' && s->s[p] != '>')
            return false;
    return true;
}
