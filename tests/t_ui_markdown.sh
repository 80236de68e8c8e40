#!/bin/sh
# t_ui_markdown.sh: answers rendered from their Markdown in tmux (bold,
# italic, code, headings, lists, quotes, tables, links, fenced code with its
# number and language), in the theme's styles; F5 shows them as written;
# /copy and /copy code N reach the terminal's clipboard (tmux's buffer);
# answers that open with emphasis render (they once killed the chat).
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
if tm_wait_all 10 '^# Title' 'Some \*\*bold\*\* and \*italic\* and `code` text' '^  ```python' "Answers as written"; then
    tm_keys F5
    if tm_wait 10 '^Title *│' && ! grep -q '^# Title' "$TMP/screen"; then ok ui_markdown_raw_toggle; else fail ui_markdown_raw_toggle "F5 did not render again"; fi
else
    fail ui_markdown_raw_toggle "missing:$TM_MISSING; screen: $(head -n 30 "$TMP/screen" | sed 's/ *│.*//' | grep -v '^$' | tr '\n' '|' | head -c 900)"
fi
# ---- /copy: the bytes reach the terminal (tmux, with set-clipboard on,
# takes OSC 52 into its paste buffer)
tm set -s set-clipboard on
# until_buffer TEXT: until tmux's newest paste buffer holds exactly TEXT.
until_buffer() {
    _end=$(($(date +%s) + 10))
    until [ "$(tm show-buffer 2>/dev/null)" = "$1" ]; do
        [ "$(date +%s)" -ge $_end ] && return 1
        sleep 0.05
    done
}
tm_line "/copy code 1"
if until_buffer 'print("hi")' && tm_wait 5 "Copied code block 1 of 2, python \(1 line\)"; then
    ok ui_copy_code
else
    fail ui_copy_code "buffer '$(tm show-buffer 2>&1 | head -c 100)'; $(tail -n 1 "$TMP/screen")"
fi
tm_line "/copy"
if until_buffer "$("$BUILD/tools/json_get" "$C" messages.1.content)"; then
    ok ui_copy_answer
else
    fail ui_copy_answer "buffer '$(tm show-buffer 2>&1 | head -c 100)'"
fi
tm_line "/copy code 3"
if tm_wait 10 "/copy code: the answer has 2 code blocks: /copy code 1-2"; then ok ui_copy_bad_block; else fail ui_copy_bad_block "$(tail -n 3 "$TMP/screen")"; fi

# Too large for a terminal to take: refused with the reason.
awk 'BEGIN { printf "{\"messages\": [{\"role\": \"user\", \"content\": \"big\"}, {\"role\": \"assistant\", \"content\": \""; for (i = 0; i < 3000; i++) printf "line %04d of a very long answer.\\n", i; print "\"}]}" }' >"$TMP/big.json"
tm_line "/load $TMP/big.json"
tm_wait 10 "Loaded 2 messages"
tm_line "/copy"
if tm_wait 10 "/copy: the last answer: too large to copy: [0-9]+ KB of text"; then ok ui_copy_too_large; else fail ui_copy_too_large "$(tail -n 3 "$TMP/screen")"; fi

# /help and the man page name the key.
tm_line "/help"
if tm_wait 10 "F5 answers as written or rendered"; then ok ui_markdown_key_in_help; else fail ui_markdown_key_in_help "$(tm_screen | grep F1)"; fi
quit_app

# ---- answers whose first inline token is emphasis (models open with **...**
# all the time): the old parser took a pointer into its token array before
# growing it, so the first such answer killed the chat (exit 139) and a long
# one wrote through a stale pointer.  Through -C, /load and --resume.
printf '%s' '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "*hi* there"}]}' >"$TMP/emph.json"
grow=$(awk 'BEGIN { printf "x _ "; for (i = 0; i < 40; i++) printf "*a"; printf " **end**" }')
printf '{"messages": [{"role": "user", "content": "grow"}, {"role": "assistant", "content": "%s"}]}' "$grow" >"$TMP/grow.json"
start_app -C "$TMP/emph.json"
if app_ready && grep -q '^hi there' "$TMP/screen" && tm capture-pane -p -e -t ui | grep -qE "${esc}\[3m(${esc}\[[0-9;]*m)*hi"; then
    ok ui_markdown_opening_emphasis
else
    fail ui_markdown_opening_emphasis "$(tm_screen | grep -v '^ *│\? *$' | tail -4)"
fi
tm_line "/load $TMP/grow.json"
if tm_wait 10 "Loaded 2 messages" && tm_wait 5 '^x _ (a){40} end' && quit_app ui_markdown_growing_tokens; then
    ok ui_markdown_growing_tokens
else
    fail ui_markdown_growing_tokens "$(tm_screen | grep -v '^ *│\? *$' | tail -4)"
fi
mkdir -p "$CONV_DIR"
cp "$TMP/emph.json" "$CONV_DIR/emph.json"
start_app --resume
if app_ready && grep -q '^hi there' "$TMP/screen" && quit_app ui_markdown_opening_emphasis_resume; then
    ok ui_markdown_opening_emphasis_resume
else
    fail ui_markdown_opening_emphasis_resume "$(tm_screen | grep -v '^ *│\? *$' | tail -4)"
fi
tm_stop
done_tests
