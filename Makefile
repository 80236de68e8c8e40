# glmchat build.
#
#   make                 ./glmchat
#   make test            every test; last line "N passed, N failed"
#   make test SANITIZE=1 the same suite under ASan + UBSan
#   make check           both, plus a short fuzz run (what CI runs)
#   make bench           benchmarks on the synthetic models (tests/bench/)
#   make demo-model      retrains the built-in demo model (app/tools/demo_train/README.md)
#   make fuzz            libFuzzer targets for a bounded time (FUZZ_SECONDS)
#   make install PREFIX=/usr/local
#
# Layout: core/ (no deps on gpu/ or app/), gpu/ (Vulkan backend, uses core/),
# app/ (CLI + UI), shaders/*.comp (GLSL -> SPIR-V, embedded; shaders/bench/*.comp
# only into the microbenchmark), tests/.  Sources are found by folder (a
# layer's files and those of its subfolders, core/text/ and so on): a new or
# moved file needs no edit here.  Each layer is compiled with the include
# paths of the layers it may use and no others, so an #include against the
# direction (core -> gpu, gpu -> app) does not compile; includes name the
# subfolder from the layer's root ("text/tokenizer.h", "ui/ui_session.h").

CC ?= cc
PKG_CONFIG ?= pkg-config
GLSLC ?= glslc
PREFIX ?= /usr/local
SANITIZE ?= 0
FUZZ_SECONDS ?= 60

# The sanitizer build's debug information is line tables (-g1): its reports'
# stacks keep every frame's file and line, inlined ones too, and the build
# takes 40 % less of the compiler's time than with -g (157 -> 96 CPU seconds
# for ./glmchat); no variables for a debugger, which the normal build has.
ifeq ($(SANITIZE),1)
BUILD := build/san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
OPT := -O1
DEBUG := -g1
else
BUILD := build/rel
SANFLAGS :=
OPT := -O2
DEBUG := -g
endif

PKGS := jansson libpcre2-8 md4c ncursesw vulkan
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)

WARN := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
CFLAGS ?= $(OPT) $(DEBUG)
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -pthread $(WARN) $(CFLAGS) $(SANFLAGS) $(PKG_CFLAGS) -MMD -MP
LDLIBS := $(PKG_LIBS) -lreadline -lm -pthread

# What each layer may include: core itself; gpu core and itself (with the
# shaders' push-constant headers and the generated SPIR-V table); app all
# three; tests and their tools everything, the tree's root included.
CORE_INC := -Icore
GPU_INC := $(CORE_INC) -Igpu -Ishaders -I$(BUILD)/gen
APP_INC := $(GPU_INC) -Iapp
TEST_INC := $(APP_INC) -Itests -I.

CORE_SRC := $(sort $(wildcard core/*.c core/*/*.c))
GPU_SRC := $(sort $(wildcard gpu/*.c gpu/*/*.c))
# app/tools/ holds programs of their own (the demo model's recipe)
APP_SRC := $(sort $(filter-out app/tools/%,$(wildcard app/*.c app/*/*.c)))
SHADERS := $(sort $(wildcard shaders/*.comp))
BENCH_SHADERS := $(sort $(wildcard shaders/bench/*.comp))
SHADER_INC := $(wildcard shaders/*.glsl shaders/*.h shaders/bench/*.h)
TEST_SRC := $(sort $(wildcard tests/test_*.c))
TOOL_SRC := $(sort $(wildcard tests/tools/*.c))

CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
GPU_OBJ := $(GPU_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/spv_table.o
APP_OBJ := $(APP_SRC:%.c=$(BUILD)/%.o)
APP_OBJ += $(BUILD)/gen/demo_model.o
APP_LIB_OBJ := $(filter-out $(BUILD)/app/main.o,$(APP_OBJ))
# SPIR-V does not depend on the C build's flags: one set of shaders serves
# the normal and the sanitizer build (no second glslc pass in `make check`)
SPV_DIR := build/spv
SPV := $(SHADERS:shaders/%.comp=$(SPV_DIR)/%.spv)
# the kernels that read or write decode's tagged qkv and q (shaders/dep_flag.glsl "LL"),
# built a second time with -DLL as <name>_ll: one build with LL behind a specialization
# constant would hand the driver `coherent volatile` views of the plain kernels' buffers
# too, a form run 30 measured 1.2-3 % slower with LL off (gpu/perf/runs: 30, 32, 34)
LL_SHADERS := mv_xs kv_store
SPV += $(LL_SHADERS:%=$(SPV_DIR)/%_ll.spv)
# the decode matvecs by 8-bit integer dot products, built a third time with
# -DIDOT as <name>_id (and typed copies of those): their SPIR-V declares the
# DotProduct capabilities, which a device without
# VK_KHR_shader_integer_dot_product (core in 1.3) must never be handed
IDOT_SHADERS := mv_xs mv_glu_xs mv_moe_down_xs attn_vb_xs
SPV += $(IDOT_SHADERS:%=$(SPV_DIR)/%_id.spv)
# and mv_xs with both as mv_xs_ll_id: the decode's tagged q_a + kv_a, q_b and
# k_b must take the same integer arithmetic as the untagged calls a verify
# column makes, or drafting would change the greedy tokens (test_vk_spec)
LL_IDOT_SHADERS := mv_xs
SPV += $(LL_IDOT_SHADERS:%=$(SPV_DIR)/%_ll_id.spv)
# The kernels whose code branches on a weight type, compiled once more per
# type as <name>.t<T> (-DFIXED_TYPE=T; gpu/vk_spv.h): the generic module is
# 250-450 KB, which lavapipe parses whole for every pipeline (~0.3 s), a
# copy 15-30 KB.  The types are quant.glsl's.  mm_coop and the mv family stay
# generic: no CPU implementation has cooperative matrices, and the mv family
# is the fallback where the x-stationary kernels do not apply.
TYPED_SHADERS := mv_xs mv_xs_ll mv_glu_xs mv_moe_down_xs router_xs attn_vb_xs mm embed mv_xs_id mv_glu_xs_id \
                 mv_moe_down_xs_id mv_xs_ll_id attn_vb_xs_id
WEIGHT_TYPES := $(shell sed -n 's/^const uint T_[A-Z0-9_]* = \([0-9]*\)u;$$/\1/p' shaders/quant.glsl)
# the -DIDOT builds' copies: only for the types with integer units (IDOT_ON
# in mv_xs_common.glsl; the C side's list, vk_idot_type, is checked against
# the copies by test_vk_spv), the others never take those modules
IDOT_TYPE_NAMES := $(shell sed -n '/^const bool IDOT_ON = /,/;/p' shaders/mv_xs_common.glsl | grep -o '\<T_[A-Z0-9_]*')
IDOT_TYPES := $(foreach n,$(IDOT_TYPE_NAMES),$(shell sed -n 's/^const uint $(n) = \([0-9]*\)u;$$/\1/p' shaders/quant.glsl))
types_of = $(if $(filter %_id,$(1)),$(IDOT_TYPES),$(WEIGHT_TYPES))
SPV_TYPED := $(foreach s,$(TYPED_SHADERS),$(foreach t,$(call types_of,$(s)),$(SPV_DIR)/typed/$(s).t$(t).spv))
SPV_BENCH := $(BENCH_SHADERS:shaders/%.comp=$(SPV_DIR)/%.spv)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TOOL_BIN := $(TOOL_SRC:tests/tools/%.c=$(BUILD)/tools/%)

LIB := $(BUILD)/libglm.a

.PHONY: all test check bench fuzz install clean demo-model FORCE
all: glmchat

# The binary at the root is always the one of the last build flavour.
glmchat: $(BUILD)/glmchat FORCE
	@cmp -s $< $@ || cp $< $@
FORCE:

$(BUILD)/glmchat: $(APP_OBJ) $(LIB)
	$(CC) $(ALL_CFLAGS) -o $@ $(APP_OBJ) $(LIB) $(LDLIBS)

$(LIB): $(CORE_OBJ) $(GPU_OBJ)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/core/%.o: core/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CORE_INC) -c -o $@ $<

$(BUILD)/gpu/%.o: gpu/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(GPU_INC) -c -o $@ $<

$(BUILD)/app/%.o: app/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(APP_INC) -c -o $@ $<

# The layout of a host layer's experts runs for every prompt batch that
# streams them to the GPU (gpu/vk_hostmoe_stream.c): its per-block loops want
# the unrolling -O2 does not do (Q3_K's blocks 3.6x faster at -O3 on one core,
# gpu/perf/runs/44).  The sanitizer build keeps its -O1.
ifneq ($(SANITIZE),1)
$(BUILD)/gpu/vk_layout.o: ALL_CFLAGS += -O3
endif

# The CPU backend's SIMD kernels (core/cpu/cpu_dot_*.c: every kernel
# unrolled for every type) are most of the compiler's time: 4 x 16 CPU
# seconds of the normal build with -g, 4 x 40 of the sanitizer build at -O1.
# The normal build gives them line tables only (-g1: 9 s each; their
# variables are vectors in registers, which -g shows no better at -O2), the
# sanitizer build -Og (30 s each: the same instrumentation of every load and
# every integer operation; the CPU tests under ASan ran as fast, within 5 %).
CPU_SIMD_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard core/cpu/cpu_dot_avx*.c))
ifeq ($(SANITIZE),1)
$(CPU_SIMD_OBJ): ALL_CFLAGS += -Og
else
$(CPU_SIMD_OBJ): ALL_CFLAGS += -g1
endif

# GPU sources include the generated SPIR-V table header.
$(GPU_SRC:%.c=$(BUILD)/%.o): $(BUILD)/gen/spv_table.h

# ---- shaders: GLSL -> SPIR-V -> C table embedded in the binary ----------
$(SPV_DIR)/%.spv: shaders/%.comp $(SHADER_INC)
	@mkdir -p $(@D)
	$(GLSLC) --target-env=vulkan1.2 -O -Ishaders -o $@ $<

$(SPV_DIR)/%_ll.spv: shaders/%.comp $(SHADER_INC)
	@mkdir -p $(@D)
	$(GLSLC) --target-env=vulkan1.2 -O -DLL -Ishaders -o $@ $<

$(SPV_DIR)/%_id.spv: shaders/%.comp $(SHADER_INC)
	@mkdir -p $(@D)
	$(GLSLC) --target-env=vulkan1.2 -O -DIDOT -Ishaders -o $@ $<

$(SPV_DIR)/%_ll_id.spv: shaders/%.comp $(SHADER_INC)
	@mkdir -p $(@D)
	$(GLSLC) --target-env=vulkan1.2 -O -DLL -DIDOT -Ishaders -o $@ $<

# typed/<name>.t<T>.spv; a name ending in _ll is <name>.comp with -DLL, in _id with -DIDOT, in
# _ll_id with both
define typed_rule
$(SPV_DIR)/typed/$(1).t$(2).spv: shaders/$(patsubst %_ll,%,$(patsubst %_id,%,$(1))).comp $(SHADER_INC)
	@mkdir -p $$(@D)
	@$(GLSLC) --target-env=vulkan1.2 -O $(if $(filter %_ll %_ll_id,$(1)),-DLL) $(if $(filter %_id,$(1)),-DIDOT) \
	    -DFIXED_TYPE=$(2) -Ishaders -o $$@ $$<
endef
$(foreach s,$(TYPED_SHADERS),$(foreach t,$(call types_of,$(s)),$(eval $(call typed_rule,$(s),$(t)))))

$(BUILD)/embed_spv: shaders/tools/embed_spv.c
	@mkdir -p $(@D)
	$(CC) -std=c11 -O2 -Wall -Wextra -Werror -o $@ $<

# (and the Makefile: the lists of modules and copies live here)
$(BUILD)/gen/spv_table.c $(BUILD)/gen/spv_table.h &: $(SPV) $(SPV_TYPED) $(BUILD)/embed_spv Makefile
	@mkdir -p $(BUILD)/gen
	@echo "embed_spv: $(words $(SPV)) shaders, $(words $(SPV_TYPED)) typed copies"
	@$(BUILD)/embed_spv $(BUILD)/gen/spv_table spv $(SPV) $(SPV_TYPED)

$(BUILD)/gen/spv_table.o: $(BUILD)/gen/spv_table.c
	$(CC) $(ALL_CFLAGS) $(GPU_INC) -c -o $@ $<

# the microbenchmark's own shaders (shaders/bench/): a second table, linked
# into vk_microbench only
$(BUILD)/gen/spv_tool_table.c $(BUILD)/gen/spv_tool_table.h: $(SPV_BENCH) $(BUILD)/embed_spv
	@mkdir -p $(BUILD)/gen
	$(BUILD)/embed_spv $(BUILD)/gen/spv_tool_table spv_tool $(SPV_BENCH)

$(BUILD)/gen/spv_tool_table.o: $(BUILD)/gen/spv_tool_table.c
	$(CC) $(ALL_CFLAGS) $(GPU_INC) -c -o $@ $<

# ---- tests ---------------------------------------------------------------
$(BUILD)/tests/%: tests/%.c $(LIB) $(APP_LIB_OBJ) tests/testlib.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(TEST_INC) -o $@ $< $(APP_LIB_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tools/%: tests/tools/%.c $(LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(TEST_INC) -o $@ $< $(LIB) $(LDLIBS)

# the Markdown renderer's benchmark: the renderer (app/md/) with what it uses
$(BUILD)/tools/md_bench: tests/tools/md_bench.c $(LIB) $(APP_LIB_OBJ)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(TEST_INC) -o $@ $< $(APP_LIB_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tools/vk_microbench: tests/tools/vk_microbench.c $(LIB) $(BUILD)/gen/spv_tool_table.o
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(TEST_INC) -o $@ $< $(BUILD)/gen/spv_tool_table.o $(LIB) $(LDLIBS)

# ---- the built-in demo model: trained by app/tools/demo_train (`make demo-model`),
# committed as app/demo/glm-demo.gguf, embedded by .incbin ----
DEMO_GGUF := app/demo/glm-demo.gguf
DEMO_S := $(firstword $(wildcard app/demo_model.S app/*/demo_model.S))
$(BUILD)/gen/demo_model.o: $(DEMO_S) $(DEMO_GGUF)
	@mkdir -p $(@D)
	$(CC) -c -DDEMO_GGUF='"$(DEMO_GGUF)"' -o $@ $<

# the recipe's GGUF writer (raw tensors + manifest -> GGUF through core's writer)
$(BUILD)/gen/demo_gguf: app/tools/demo_train/demo_gguf.c $(LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CORE_INC) -o $@ $< $(LIB) $(LDLIBS)

demo-model: glmchat $(BUILD)/gen/demo_gguf
	BUILD=$(BUILD) sh app/tools/demo_train/run.sh

test: glmchat $(TEST_BIN) $(TOOL_BIN)
	@BUILD=$(BUILD) SANITIZE=$(SANITIZE) bash tests/run.sh

# The suite as CI runs it: tests, tests under sanitizers, a short fuzz run.
check:
	@sh tests/check.sh

bench: glmchat
	sh tests/bench/bench.sh

# libFuzzer targets (clang): tests/fuzz/fuzz_*.c, each run FUZZ_SECONDS.  The
# core and the app's readers of untrusted text (Markdown, settings, themes,
# and what they use) are compiled once (with the fuzzer's coverage but not
# its main) and linked into every target; `make -jN fuzz` runs N targets at
# a time.
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=build/fuzz/%)
# Layer by layer as above, without gpu/ (no target reaches the GPU): core
# with core's include path only, the app's readers with core's and the app's.
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=address,undefined $(PKG_CFLAGS)
FUZZ_APP_INC := $(CORE_INC) -Iapp
FUZZ_TEST_INC := $(FUZZ_APP_INC) -Itests
FUZZ_APP_SRC := $(sort $(wildcard app/md_*.c app/*/md_*.c) \
                $(foreach n,ui_text settings theme paths,$(wildcard app/$(n).c app/*/$(n).c)))
# The CPU backend's kernels (core/cpu/) stay out: no target reaches them, and
# their SIMD files took 4 of the 5 minutes of clang's time for the fuzz build.
FUZZ_CORE_SRC := $(filter-out core/cpu/%,$(CORE_SRC))
FUZZ_OBJ := $(FUZZ_CORE_SRC:%.c=build/fuzz/%.o) $(FUZZ_APP_SRC:%.c=build/fuzz/%.o)
build/fuzz/core/%.o: core/%.c
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) $(CORE_INC) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<
build/fuzz/app/%.o: app/%.c
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) $(FUZZ_APP_INC) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<
build/fuzz/%: tests/fuzz/%.c $(FUZZ_OBJ)
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) $(FUZZ_TEST_INC) -fsanitize=fuzzer -MMD -MP -o $@ $< $(FUZZ_OBJ) $(PKG_LIBS) -lm -pthread
fuzz: $(FUZZ_BIN:build/fuzz/%=fuzz-run-%)
fuzz-run-%: build/fuzz/%
	@n=$*; mkdir -p build/fuzz/corpus-$$n; \
	seeds=tests/fuzz/seeds/$${n#fuzz_}; [ -d $$seeds ] || seeds=; \
	echo "fuzz: $$n for $(FUZZ_SECONDS)s"; \
	build/fuzz/$$n -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=2048 \
	    build/fuzz/corpus-$$n $$seeds >build/fuzz/$$n.log 2>&1 \
	    || { tail -n 40 build/fuzz/$$n.log; exit 1; }; \
	echo "$$n: $$(tail -n 1 build/fuzz/$$n.log)"
# kept between runs (make would delete them as intermediate files)
.SECONDARY: $(FUZZ_BIN) $(FUZZ_OBJ)

install: glmchat
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/glmchat/themes
	install -m 755 glmchat $(DESTDIR)$(PREFIX)/bin/glmchat
	install -m 644 man/glmchat.1 $(DESTDIR)$(PREFIX)/share/man/man1/glmchat.1
	install -m 644 themes/*.theme $(DESTDIR)$(PREFIX)/share/glmchat/themes/

clean:
	rm -rf build glmchat

-include $(shell find build -name '*.d' 2>/dev/null)
