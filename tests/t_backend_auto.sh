#!/bin/sh
# t_backend_auto.sh: what `--backend auto` picks and says.  Where the only
# Vulkan device runs on the CPU (lavapipe, as in CI), the CPU backend is
# estimated faster for every model and is chosen; -p says so on stderr, and
# `glmchat devices` names the choice; --backend vulkan still runs the
# Vulkan core (and says nothing).
. tests/lib.sh
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data" XDG_STATE_HOME="$TMP/state"
unset GLMCHAT_MODEL
MODEL=tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf

kind=$("$GLMCHAT" devices 2>/dev/null | grep -- '<- default' | sed -n 's/.*\[\([a-z]*\)\].*/\1/p')
"$GLMCHAT" -m "$MODEL" --temp 0 -n 2 -p hi >/dev/null 2>"$TMP/err"
rc=$?
note=$(grep 'note: backend:' "$TMP/err")
if [ $rc -ne 0 ]; then fail auto_note "exit $rc: $(head -c 300 "$TMP/err")"
elif [ -z "$note" ]; then fail auto_note "no backend note on stderr: $(head -c 300 "$TMP/err")"
elif [ "$(grep -c 'note: backend:' "$TMP/err")" -ne 1 ]; then fail auto_note "more than one note"
else ok auto_note
fi
case $kind in
cpu)
    if echo "$note" | grep -q "backend: the CPU -- the only Vulkan device .* runs on the CPU" &&
        echo "$note" | grep -qE "about [0-9.]+ against [0-9.]+ ms a token"; then
        ok auto_cpu_device_takes_the_cpu_backend
    else
        fail auto_cpu_device_takes_the_cpu_backend "$note"
    fi ;;
"") if echo "$note" | grep -q "no usable Vulkan device"; then ok auto_without_vulkan; else fail auto_without_vulkan "$note"; fi ;;
*) if echo "$note" | grep -q "Vulkan on"; then ok auto_gpu; else fail auto_gpu "$note"; fi ;;
esac

# a forced backend: no note; Vulkan answers (when there is a device)
if [ -n "$kind" ]; then
    "$GLMCHAT" -m "$MODEL" --backend vulkan --temp 0 -n 2 -p hi >/dev/null 2>"$TMP/err2"
    rc=$?
    if [ $rc -eq 0 ] && ! grep -q 'note: backend' "$TMP/err2"; then ok forced_vulkan
    else fail forced_vulkan "exit $rc: $(head -c 300 "$TMP/err2")"
    fi
fi
done_tests
