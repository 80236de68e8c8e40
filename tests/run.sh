#!/bin/bash
# Runs every test program ($BUILD/tests/test_*) and every shell test
# (tests/t_*.sh), counts their "ok - " / "FAIL - " lines, and prints
# "N passed, N failed" last.  A program that dies or exits non-zero without
# reporting a failure counts as one failure of its own.
#
# JOBS tests run at a time (default: the number of cores).  Each test has
# its own temporary directory, tmux server and artifacts, so they do not
# meet; each one's lines are printed together when it ends.  bash, for
# `wait -n -p` (which of the running tests ended).
BUILD=${BUILD:-build/rel}
export BUILD GLMCHAT=./glmchat
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
pass=0
fail=0
wall_sum=0
cpu_sum=0
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# Sanitizer runs: LeakSanitizer ignores the Vulkan loader's and drivers'
# own leaks (tests/lsan.supp says which libraries, and why), and libraries
# stay loaded so it can see and name them (tests/lsan_keep_loaded.c).  Our
# own leaks still fail.
if [ "${SANITIZE:-0}" = 1 ]; then
    LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
    export LSAN_OPTIONS
    keep="$BUILD/lsan_keep_loaded.so"
    case $keep in /*) ;; *) keep="$PWD/$keep" ;; esac
    if [ ! -f "$keep" ] || [ tests/lsan_keep_loaded.c -nt "$keep" ]; then
        ${CC:-cc} -shared -fPIC -O2 -o "$keep" tests/lsan_keep_loaded.c ||
            echo "run.sh: cannot build $keep; driver leaks may be reported as unknown modules"
    fi
    if [ -f "$keep" ]; then
        # The preloaded library comes before ASan's runtime: allowed, as it
        # only defines dlclose.
        LD_PRELOAD="$keep${LD_PRELOAD:+:$LD_PRELOAD}"
        ASAN_OPTIONS="verify_asan_link_order=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
        export LD_PRELOAD ASAN_OPTIONS
    fi
fi

# The sanitizer run looks for memory and undefined-behaviour errors in our
# host code, which any case of a kernel family reaches: there the long
# kernel-case programs run every 4th case (testlib.h's TEST_SAMPLE) and the
# other long tests their quick forms (TEST_QUICK: a subset of their models,
# fewer draws or rounds, the tmux UI tests on the CPU backend); the normal
# run keeps every case.  TEST_FULL=1 runs everything under the sanitizers too.
# (Before the quick forms were trimmed to one model a case, `make check`
# took 35 minutes on 2 cores: tests' own seconds 1461 normal, 1981 under
# the sanitizers; trimmed, 24 minutes from a clean clone: 1212 wall seconds
# of tests in the normal run.  With the UI on the CPU backend and the quick
# forms of t_spec_cli, t_vk_typed_spv, test_cpu_moe_host, test_vk_sampler,
# test_sampler and t_crash_safety, the sanitizer run's tests took 515 CPU
# seconds, 686 before; the normal run's 466.)
QUICK=0
[ "${SANITIZE:-0}" = 1 ] && [ "${TEST_FULL:-0}" != 1 ] && QUICK=1
sampled=" test_vk_types test_vk_attn test_vk_matvec test_vk_prefill "
# every other case: programs whose cases are one host path on several
# backends or settings (the clean-clone `make check` had reached 15 min 20 s)
halved=" test_spec test_vk_sampler test_cpu_moe_host test_vk_spec "
# not in the sanitizer run: the drafting and sampler programs once more at
# lavapipe's subgroup 16, whose host code is test_vk_spec's and
# test_vk_sampler's (both run under the sanitizers); what they add is the
# kernels' other team sizes, which the normal run checks.  (31 of the
# sanitizer run's CPU seconds.)  The same for the router's and the
# sampler's cases at subgroup 4 (t_vk_sg4).
san_skip=" t_vk_spec_sg16 t_vk_sampler_sg16 t_vk_sg4 "

# start_one NAME COMMAND...: runs a test in the background, its output and
# its times into $logs/NAME.*.
declare -A name_of
start_one() {
    name=$1
    shift
    (
        if [ $QUICK = 1 ]; then
            export TEST_QUICK=1
            case $sampled in *" $name "*) export TEST_SAMPLE=4 ;; esac
            case $halved in *" $name "*) export TEST_SAMPLE=2 ;; esac
        fi
        start=$(date +%s)
        # stdin from /dev/null: `glmchat -p` reads piped stdin, and a test
        # must not wait on whatever stdin the runner was started with.
        "$@" </dev/null >"$logs/$name.log" 2>&1
        rc=$?
        # the CPU seconds the test and its children used (user + system,
        # from bash's `times`: a measure that other load on the machine
        # inflates far less than the wall time; it leaves out what runs
        # under a tmux server, which is no child of the test's)
        # (into a file: in a pipe or $(...) `times` would run in a fork,
        # whose counts start at zero)
        times >"$logs/$name.times"
        cpu=$(awk 'END { t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%d", t + 0.5 }' \
            "$logs/$name.times")
        echo "$rc $(($(date +%s) - start)) $cpu" >"$logs/$name.rc"
    ) &
    name_of[$!]=$name
}

# finish_one NAME: prints a finished test's lines and adds them up.
finish_one() {
    name=$1
    log="$logs/$name.log"
    read -r rc secs cpu <"$logs/$name.rc" || { rc=1 secs=0 cpu=0; }
    p=$(grep -c '^ok - ' "$log")
    f=$(grep -c '^FAIL - ' "$log")
    grep -E '^(ok|FAIL) - ' "$log" | sed "s|^|[$name] |"
    if [ "$f" -gt 0 ] || [ "$rc" -ne 0 ]; then
        # Show the program's other output when something failed.
        grep -vE '^(ok) - ' "$log" | tail -n 40 | sed 's/^/    /'
    fi
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "[$name] FAIL - exited with status $rc without reporting a failure"
        f=1
    fi
    echo "[$name] $p ok, $f failed (${secs}s, CPU ${cpu}s)"
    wall_sum=$((wall_sum + secs))
    cpu_sum=$((cpu_sum + cpu))
    pass=$((pass + p))
    fail=$((fail + f))
}

# wait_one: waits for one running test to end and reports it.
wait_one() {
    local pid
    wait -n -p pid
    finish_one "${name_of[$pid]}"
    unset "name_of[$pid]"
}

# The tests, the longest first (the Vulkan ones on lavapipe, the UI
# sessions) so that the last to start are short ones; then the rest in
# name order.  Each run has its own order, from a clean clone's times: in
# the sanitizer run, with its quick forms and the UI on the CPU backend, the
# longest are others (the quantizers and the CPU kernels under ASan).  On a
# clean machine lavapipe's shader cache is empty, and most of a kernel
# program's time is compiling its pipelines: test_vk_matvec took 167-180
# CPU seconds there (18 with the cache warm), test_vk_types 122-133 (28),
# t_vk_types_sg16 46-63 (7) -- so those lead the normal run's list, and the
# times measured on a machine that has run the tests before are no guide.
tests=()
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] && tests+=("$t")
done
for t in tests/t_*.sh; do
    [ -f "$t" ] && tests+=("$t")
done
if [ $QUICK = 1 ]; then
    slow="test_cpu_forward test_spec t_vk_fixtures t_vk_hostmoe t_mkmodel test_vk_attn test_vk_types t_crash_safety test_vk_sampler test_cpu_moe_host t_bench_prompt test_vk_matvec t_vk_memory test_vk_spec t_ui_tmux test_sampler t_spec_cli t_vk_lowbit t_vk_typed_spv t_vk_spec_sg16 t_oneshot test_decoder test_vk_deps test_cpu_spec t_cli_run test_ui_session test_vk_prefill test_quant_iq t_vk_types_sg16"
else
    # (the first ten as a clean clone's run measured them, wall seconds:
    # test_vk_types 158, test_vk_matvec 236 -- 133 alone on a cold cache
    # once its lavapipe variants were trimmed, 250 before --, test_spec 74, t_vk_spec_sg16 71 (listed near
    # the end before: a long test started late runs on alone), t_vk_hostmoe 69,
    # test_vk_attn 63, t_vk_types_sg16 61, t_vk_fixtures 54, t_vk_lowbit 53,
    # test_vk_spec 42)
    # (t_vk_sampler_sg16, 21 s, and t_vk_sync_sg16, 11 s, came last in name
    # order, the one running alone at the end; t_shapes, ~20 s from an
    # empty shader cache, would too)
    slow="test_vk_types test_vk_matvec test_spec t_vk_spec_sg16 t_vk_hostmoe test_vk_attn t_vk_types_sg16 t_vk_fixtures t_vk_lowbit test_vk_spec t_ui_tmux test_vk_sampler t_spec_cli t_vk_sampler_sg16 t_vk_sg4 t_ui_screen t_vk_typed_spv t_ui_files test_cpu_moe_host test_sampler test_vk_prefill t_ui_input t_vk_sync_sg16 t_shapes t_ui_context t_crash_safety t_ui_profile t_bench_prompt t_vk_memory t_mkmodel test_decoder"
fi
ordered=()
for s in $slow; do
    for t in "${tests[@]}"; do
        case $t in */"$s" | */"$s".sh) ordered+=("$t") ;; esac
    done
done
for t in "${tests[@]}"; do
    n=$(basename "$t" .sh)
    case " $slow " in *" $n "*) ;; *) ordered+=("$t") ;; esac
done

for t in "${ordered[@]}"; do
    if [ $QUICK = 1 ]; then
        case $san_skip in *" $(basename "$t" .sh) "*) continue ;; esac
    fi
    [ "${#name_of[@]}" -ge "$JOBS" ] && wait_one
    case $t in
    *.sh) start_one "$(basename "$t" .sh)" sh "$t" ;;
    *) start_one "$(basename "$t")" "$t" ;;
    esac
done
while [ "${#name_of[@]}" -gt 0 ]; do
    wait_one
done
echo "tests' own seconds: ${wall_sum}s wall, ${cpu_sum}s CPU (${JOBS} at a time)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
