#!/bin/sh
# t_ui_markdown.sh: answers rendered from their Markdown in tmux (bold,
# italic, code, headings, lists, quotes, tables, links, fenced code with its
# number and language), in the theme's styles; F5 shows them as written.
# Screens are kept in build/artifacts/ (text, not compared).
. tests/lib.sh
if ! command -v tmux >/dev/null 2>&1; then
    fail ui_markdown "tmux is not installed"
    done_tests
fi
. tests/tmux_lib.sh
trap 'tm_stop; rm -rf "$TMP"' EXIT
. tests/ui_lib.sh

C="$TMP/md.json"
printf '%s' '{"messages": [
 {"role": "user", "content": "show me **markdown**"},
 {"role": "assistant", "content": "# Title\n\nSome **bold** and *italic* and `code` text, see [docs](https://x.org).\n\n- item one\n- item two\n  1. nested\n\n> quoted line\n\n| name | value |\n|------|------:|\n| a    | 1     |\n| bb   | 22    |\n\n```python\nprint(\"hi\")\n```\n\n```\nsecond block\n```"}]}' >"$C"
esc=$(printf '\033')

start_app -C "$C"
app_ready
tm_snap markdown
missing=
for pat in '^Title *│' '^Some bold and italic and code text, see docs \(https://x\.org\)\.' '^• item one' '^• item two' \
           '^  1\. nested' '^│ quoted line' '^name │ value' '^a    │     1' '^bb   │    22' '^\[1\] python' \
           '^print\("hi"\)' '^\[2\] code' '^second block' '^show me \*\*markdown\*\*'; do
    grep -qE -- "$pat" "$TMP/screen" || missing="$missing [$pat]"
done
if [ -z "$missing" ] && ! grep -qE '^# Title|\*\*bold\*\*|`code`|```' "$TMP/screen"; then
    ok ui_markdown_rendered
else
    fail ui_markdown_rendered "missing:$missing"
fi
# The styles reach the terminal: bold, italic, the code colours, an underlined link.
tm capture-pane -p -e -t ui >"$TMP/attrs"
if grep -q "${esc}\[1mbold" "$TMP/attrs" && grep -q "${esc}\[3mitalic" "$TMP/attrs" &&
   grep -q "${esc}\[48;5;236mcode" "$TMP/attrs" && grep -q "${esc}\[4m.*docs" "$TMP/attrs"; then
    ok ui_markdown_styles
else
    fail ui_markdown_styles "$(grep -a 'Some' "$TMP/attrs" | od -c | head -5)"
fi
# F5: as written, and back.
tm_keys F5
if tm_wait 10 '^# Title' && grep -q 'Some \*\*bold\*\* and \*italic\* and `code` text' "$TMP/screen" &&
   grep -q '^  ```python' "$TMP/screen" && tm_wait 5 "Answers as written"; then
    tm_keys F5
    if tm_wait 10 '^Title *│' && ! grep -q '^# Title' "$TMP/screen"; then ok ui_markdown_raw_toggle; else fail ui_markdown_raw_toggle "F5 did not render again"; fi
else
    fail ui_markdown_raw_toggle "$(tm_screen | head -8)"
fi
# /help and the man page name the key.
tm_line "/help"
if tm_wait 10 "F5 answers as written or rendered"; then ok ui_markdown_key_in_help; else fail ui_markdown_key_in_help "$(tm_screen | grep F1)"; fi
quit_app
tm_stop
done_tests
