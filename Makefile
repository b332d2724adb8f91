# lull - lock-free rings whose consumer parks and wakes through io_uring.
#
# make            the libraries, lull.pc and the examples, under build/
# make test       install what the tests need, then run the library's suites
# make check      make test, plus the examples' integration tests and the
#                 fuzzers (the hostile region's and the examples')
# make demo       install what the demo needs, then a 1 ms poll against
#                 lull parked: latency and idle cost (about 35 s)
# make tour       the same packages, then examples/ring_tour
# make bench      the benchmarks and their plots under results/ (never part
#                 of pass/fail)
# make install    PREFIX=/usr/local DESTDIR= (headers, libraries, lull.pc,
#                 man pages) ; make uninstall
# V=1 shows the commands.

VERSION := 0.1.0
SOVERSION := 0
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
MANDIR ?= $(PREFIX)/share/man

CFLAGS ?= -O2 -g
override CFLAGS += -std=c11 -D_GNU_SOURCE -pthread -Iinclude -MMD -MP \
	-Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wpointer-arith -Wvla
LDLIBS_LULL := -pthread $(shell pkg-config --libs liburing 2>/dev/null)
DEP_CFLAGS := $(shell pkg-config --cflags liburing ck 2>/dev/null)

ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=all
# TSan does not model fences; the park barrier orders no data (records are
# published by release/acquire pairs, which TSan checks), it only makes the
# park word visible, which the spin model and the stress runs check instead.
TSAN_FLAGS := -O1 -g -fsanitize=thread -Wno-tsan

CRITERION_LIBS = $(shell pkg-config --libs criterion 2>/dev/null)
CK_LIBS = $(shell pkg-config --libs ck 2>/dev/null)

ifeq ($(V),1)
Q :=
say :=
else
Q := @
say = @printf '  %-7s %s\n' $(1) $(2);
endif

B := build
LIB_SRC := $(wildcard lib/*.c)
LIB_OBJ := $(LIB_SRC:lib/%.c=$(B)/obj/lib/%.o)
ASAN_LIB_OBJ := $(LIB_SRC:lib/%.c=$(B)/asan/lib/%.o)
TSAN_LIB_OBJ := $(LIB_SRC:lib/%.c=$(B)/tsan/lib/%.o)
HEADERS := include/lull.h $(wildcard include/lull/*.h)

SHLIB := $(B)/lib/liblull.so.$(VERSION)
SONAME := liblull.so.$(SOVERSION)
STLIB := $(B)/lib/liblull.a
PCFILE := $(B)/lib/lull.pc

UNIT_SRC := $(wildcard test/test_*.c)
UNIT_BIN := $(UNIT_SRC:test/%.c=$(B)/test/%)
ASAN_UNIT_BIN := $(UNIT_SRC:test/%.c=$(B)/test/asan/%)
STRESS_SRC := $(wildcard test/stress/*.c)
STRESS_BIN := $(STRESS_SRC:test/stress/%.c=$(B)/test/stress/%)
TSAN_STRESS_BIN := $(STRESS_SRC:test/stress/%.c=$(B)/test/tsan/%)
# test/lib: helpers shared by every suite and stress program, compiled once
# per flavour and linked into each (it never uses Criterion).
TEST_LIB_SRC := $(wildcard test/lib/*.c)
TEST_LIB_OBJ := $(TEST_LIB_SRC:test/lib/%.c=$(B)/test/lib/plain/%.o)
ASAN_TEST_LIB_OBJ := $(TEST_LIB_SRC:test/lib/%.c=$(B)/test/lib/asan/%.o)
TSAN_TEST_LIB_OBJ := $(TEST_LIB_SRC:test/lib/%.c=$(B)/test/lib/tsan/%.o)
EXAMPLE_SRC := $(wildcard examples/*.c)
EXAMPLE_BIN := $(EXAMPLE_SRC:examples/%.c=$(B)/examples/%)
PERF_BIN := $(B)/perf/throughput $(B)/perf/handoff $(B)/perf/xproc \
	$(B)/perf/death $(B)/perf/barrier

.PHONY: all lib test test-build check check-build demo tour bench install \
	uninstall clean deps-test deps-check deps-demo deps-bench FORCE

all: lib $(EXAMPLE_BIN)
lib: $(SHLIB) $(STLIB) $(PCFILE)

# --- the library ---------------------------------------------------------
$(B)/obj/lib/%.o: lib/%.c
	@mkdir -p $(@D)
	$(call say,CC,$@) $(CC) $(CFLAGS) $(DEP_CFLAGS) -fPIC -fvisibility=hidden \
		-c $< -o $@

$(SHLIB): $(LIB_OBJ) lib/lull.map
	@mkdir -p $(@D)
	$(call say,LD,$@) $(CC) $(CFLAGS) $(LDFLAGS) -shared \
		-Wl,-soname,$(SONAME) -Wl,--version-script=lib/lull.map \
		-Wl,--no-undefined -o $@ $(LIB_OBJ) $(LDLIBS_LULL)
	$(Q)ln -sf liblull.so.$(VERSION) $(B)/lib/$(SONAME)
	$(Q)ln -sf $(SONAME) $(B)/lib/liblull.so

$(STLIB): $(LIB_OBJ)
	@mkdir -p $(@D)
	$(call say,AR,$@) rm -f $@ && $(AR) rcs $@ $^

# lull.pc for the PREFIX given; install writes it again for its own.
PC_SED = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	-e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|'

$(PCFILE): lull.pc.in Makefile
	@mkdir -p $(@D)
	$(call say,GEN,$@) $(PC_SED) $< > $@

# Sanitizer builds compile the library straight into each program.
$(B)/asan/lib/%.o: lib/%.c
	@mkdir -p $(@D)
	$(call say,CC,$@) $(CC) $(CFLAGS) $(DEP_CFLAGS) $(ASAN_FLAGS) -c $< -o $@
$(B)/tsan/lib/%.o: lib/%.c
	@mkdir -p $(@D)
	$(call say,CC,$@) $(CC) $(CFLAGS) $(DEP_CFLAGS) $(TSAN_FLAGS) -c $< -o $@

# --- tests ---------------------------------------------------------------
RPATH := -Wl,-rpath,$(abspath $(B)/lib)

$(B)/test/lib/plain/%.o: test/lib/%.c
	@mkdir -p $(@D)
	$(call say,CC,$@) $(CC) $(CFLAGS) $(DEP_CFLAGS) -Ilib -c $< -o $@
$(B)/test/lib/asan/%.o: test/lib/%.c
	@mkdir -p $(@D)
	$(call say,CC,$@) $(CC) $(CFLAGS) $(DEP_CFLAGS) $(ASAN_FLAGS) -Ilib \
		-c $< -o $@
$(B)/test/lib/tsan/%.o: test/lib/%.c
	@mkdir -p $(@D)
	$(call say,CC,$@) $(CC) $(CFLAGS) $(DEP_CFLAGS) $(TSAN_FLAGS) -Ilib \
		-c $< -o $@

$(B)/test/%: test/%.c $(SHLIB) $(TEST_LIB_OBJ)
	@mkdir -p $(@D)
	$(call say,CC,$@) $(CC) $(CFLAGS) $(DEP_CFLAGS) -Ilib $< \
		$(TEST_LIB_OBJ) -o $@ \
		-L$(B)/lib -llull $(RPATH) $(CRITERION_LIBS) $(LDLIBS_LULL)
$(B)/test/asan/%: test/%.c $(ASAN_LIB_OBJ) $(ASAN_TEST_LIB_OBJ)
	@mkdir -p $(@D)
	$(call say,CC,$@) $(CC) $(CFLAGS) $(ASAN_FLAGS) -Ilib $< \
		$(ASAN_TEST_LIB_OBJ) $(ASAN_LIB_OBJ) -o $@ $(CRITERION_LIBS) \
		$(LDLIBS_LULL)
$(B)/test/stress/%: test/stress/%.c $(STLIB) $(TEST_LIB_OBJ)
	@mkdir -p $(@D)
	$(call say,CC,$@) $(CC) $(CFLAGS) -Ilib $< $(TEST_LIB_OBJ) $(STLIB) \
		-o $@ $(LDLIBS_LULL)
$(B)/test/tsan/%: test/stress/%.c $(TSAN_LIB_OBJ) $(TSAN_TEST_LIB_OBJ)
	@mkdir -p $(@D)
	$(call say,CC,$@) $(CC) $(CFLAGS) $(TSAN_FLAGS) -Ilib $< \
		$(TSAN_TEST_LIB_OBJ) $(TSAN_LIB_OBJ) -o $@ $(LDLIBS_LULL)

# Everything make test runs, perf/check-peers.sh's throughput included.
test-build: lib $(UNIT_BIN) $(ASAN_UNIT_BIN) $(STRESS_BIN) $(TSAN_STRESS_BIN) \
	$(EXAMPLE_BIN) $(B)/perf/throughput

deps-test:
	$(Q)sh scripts/deps.sh test
deps-check:
	$(Q)sh scripts/deps.sh check

# make test and make check build a job per CPU, unless make was given -j:
# the sanitizer builds compile the library and test/lib twice more, and
# the suites, each its own program, are over a hundred compilations.
NPROC := $(shell getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
BUILD_JOBS = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(NPROC))

# The library's own checks: builds first (after installing what is
# missing), then runs every suite even when one fails, a suite per CPU at
# a time, and ends with one "N passed, N failed" line.  The stress
# programs and the model run a quick size of themselves here.
test: deps-test
	$(Q)$(MAKE) --no-print-directory $(BUILD_JOBS) test-build
	$(Q)sh scripts/run-tests.sh test

# make test with the stress programs' and the model's full runs, plus the
# examples' integration tests and fuzzers (the audio server and its page
# in headless Chromium): what CI runs.
check: deps-check
	$(Q)$(MAKE) --no-print-directory $(BUILD_JOBS) test-build check-build
	$(Q)sh scripts/run-tests.sh check

# --- fuzzers: the consumer of a region anyone may write, under libFuzzer --
# make fuzz            every libFuzzer target (these two and the audio
#                      example's, audio.mk) for FUZZ_SECONDS each (default 60)
#                      from its seed corpus; make check runs them for
#                      REGION_FUZZ_SECONDS (30) and FUZZ_SECONDS
# make fuzz FUZZ_SECONDS=3600   a long run; new inputs go to $(B)/fuzz/corpus
# The library is compiled into each target with the fuzzer's coverage, as
# clang must: $(B)/fuzz/lib.
FUZZ_CC ?= clang
FUZZ_SAN := address,undefined
FUZZ_FLAGS := -O1 -g -fsanitize=fuzzer,$(FUZZ_SAN) \
	-fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_SECONDS ?= 60
REGION_FUZZ_SECONDS ?= 30
FUZZ_LIB_OBJ := $(LIB_SRC:lib/%.c=$(B)/fuzz/lib/%.o)
REGION_FUZZ_BIN := $(B)/fuzz/fuzz_region_read $(B)/fuzz/fuzz_region_open

$(B)/fuzz/lib/%.o: lib/%.c
	@mkdir -p $(@D)
	$(call say,FUZZCC,$@) $(FUZZ_CC) $(CFLAGS) $(DEP_CFLAGS) -O1 \
		-fsanitize=fuzzer-no-link,$(FUZZ_SAN) -fno-sanitize-recover=all \
		-fno-omit-frame-pointer -c $< -o $@

$(B)/fuzz/fuzz_region_%: test/fuzz/fuzz_region_%.c test/fuzz/region_check.h \
	$(FUZZ_LIB_OBJ)
	@mkdir -p $(@D)
	$(call say,FUZZCC,$@) $(FUZZ_CC) $(CFLAGS) $(DEP_CFLAGS) $(FUZZ_FLAGS) \
		-Ilib $< $(FUZZ_LIB_OBJ) -o $@ $(LDLIBS_LULL)

# --- examples, demo, perf ------------------------------------------------
$(B)/examples/%: examples/%.c $(STLIB)
	@mkdir -p $(@D)
	$(call say,CC,$@) $(CC) $(CFLAGS) $< $(STLIB) -o $@ $(LDLIBS_LULL)

# The perf peers from other packages, each built where pkg-config finds
# it: DPDK's rte_ring (perf/peer_rte.c; its headers without the -march they
# ask for, so the benchmark targets what the library targets, and
# -lrte_ring), liburcu's wfcqueue (perf/peer_urcu.c, inline: nothing to
# link) and libuv (perf/handoff_uv.c); and the C++ ones, header-only, each
# built where the C++ compiler finds its header (perf/cxx-peers.probe):
# boost.lockfree (perf/peer_boost.cpp) and moodycamel's queues
# (perf/peer_moodycamel.cpp, perf/handoff_moodycamel.cpp).  A program with
# a C++ peer is linked by $(CXX).  $(PERF_PEERS) holds the list; every perf
# object depends on it, so installing or removing a package rebuilds the
# programs.
CXXFLAGS ?= -O2 -g
override CXXFLAGS += -std=c++23 -D_GNU_SOURCE -pthread -Iinclude -MMD -MP \
	-Wall -Wextra -Wpointer-arith -Wvla
PERF_PEER_PKGS := $(shell for m in libdpdk liburcu libuv; do \
	pkg-config --exists $$m 2>/dev/null && echo $$m; done) \
	$(shell $(CXX) -std=c++23 -E -P -x c++ perf/cxx-peers.probe \
		2>/dev/null)
PERF_PEERS := $(B)/perf/peers
DPDK_CFLAGS := $(if $(filter libdpdk,$(PERF_PEER_PKGS)),-DHAVE_RTE_RING \
	$(filter-out -march=%,$(shell pkg-config --cflags libdpdk 2>/dev/null)))
URCU_CFLAGS := $(if $(filter liburcu,$(PERF_PEER_PKGS)),-DHAVE_URCU_WFCQ \
	$(shell pkg-config --cflags liburcu 2>/dev/null))
UV_CFLAGS := $(if $(filter libuv,$(PERF_PEER_PKGS)),-DHAVE_UV \
	$(shell pkg-config --cflags libuv 2>/dev/null))
BOOST_CFLAGS := $(if $(filter boost-lockfree,$(PERF_PEER_PKGS)), \
	-DHAVE_BOOST_LOCKFREE)
MOODYCAMEL_CFLAGS := $(if $(filter concurrentqueue,$(PERF_PEER_PKGS)), \
	-DHAVE_MOODYCAMEL)
PERF_CFLAGS := $(DPDK_CFLAGS) $(URCU_CFLAGS) $(UV_CFLAGS) $(BOOST_CFLAGS) \
	$(MOODYCAMEL_CFLAGS)
PERF_LIBS := $(if $(DPDK_CFLAGS),-lrte_ring) \
	$(if $(UV_CFLAGS),$(shell pkg-config --libs libuv 2>/dev/null))

# Each program's files, named: a stray perf/*.c is never linked in.  The
# shared helpers (perf/bench_common.c) go into both.
PERF_COMMON_SRC := perf/bench_common.c
THROUGHPUT_SRC := perf/throughput.c perf/throughput_options.c \
	perf/throughput_report.c perf/peers.c perf/peer_lull.c perf/peer_ck.c \
	perf/peer_pipe.c perf/peer_eventfd.c \
	$(if $(DPDK_CFLAGS),perf/peer_rte.c) \
	$(if $(URCU_CFLAGS),perf/peer_urcu.c) \
	$(if $(BOOST_CFLAGS),perf/peer_boost.cpp) \
	$(if $(MOODYCAMEL_CFLAGS),perf/peer_moodycamel.cpp)
HANDOFF_SRC := perf/handoff.c perf/handoff_options.c perf/handoff_report.c \
	perf/handoff_mechanisms.c perf/handoff_floors.c \
	perf/handoff_msg_ring.c perf/handoff_xproc.c \
	$(if $(UV_CFLAGS),perf/handoff_uv.c) \
	$(if $(MOODYCAMEL_CFLAGS),perf/handoff_moodycamel.cpp)
# Across processes: a program each, of one file (perf/README.md).
XPROC_SRC := perf/xproc.c
DEATH_SRC := perf/death.c
BARRIER_SRC := perf/barrier.c
PERF_OBJ = $(patsubst perf/%.cpp,$(B)/obj/perf/%.o,$(patsubst \
	perf/%.c,$(B)/obj/perf/%.o,$(1) $(PERF_COMMON_SRC)))
# The linker driver: $(CXX) where a program has C++ objects.
PERF_LD = $(if $(filter %.cpp,$(1)),$(CXX),$(CC))

# Rewritten only when the list changes: its date is what make compares.
$(PERF_PEERS): FORCE
	@mkdir -p $(@D)
	$(Q)echo '$(PERF_PEER_PKGS)' | cmp -s - $@ || \
		echo '$(PERF_PEER_PKGS)' > $@

$(B)/obj/perf/%.o: perf/%.c $(PERF_PEERS)
	@mkdir -p $(@D)
	$(call say,CC,$@) $(CC) $(CFLAGS) $(DEP_CFLAGS) $(PERF_CFLAGS) -Ilib \
		-c $< -o $@
$(B)/obj/perf/%.o: perf/%.cpp $(PERF_PEERS)
	@mkdir -p $(@D)
	$(call say,CXX,$@) $(CXX) $(CXXFLAGS) $(DEP_CFLAGS) $(PERF_CFLAGS) \
		-Ilib -c $< -o $@

$(B)/perf/throughput: $(call PERF_OBJ,$(THROUGHPUT_SRC)) $(STLIB) $(PERF_PEERS)
$(B)/perf/throughput: LINK = $(call PERF_LD,$(THROUGHPUT_SRC))
$(B)/perf/handoff: $(call PERF_OBJ,$(HANDOFF_SRC)) $(STLIB) $(PERF_PEERS)
$(B)/perf/handoff: LINK = $(call PERF_LD,$(HANDOFF_SRC))
$(B)/perf/xproc: $(call PERF_OBJ,$(XPROC_SRC)) $(STLIB) $(PERF_PEERS)
$(B)/perf/xproc: LINK = $(CC)
$(B)/perf/death: $(call PERF_OBJ,$(DEATH_SRC)) $(STLIB) $(PERF_PEERS)
$(B)/perf/death: LINK = $(CC)
$(B)/perf/barrier: $(call PERF_OBJ,$(BARRIER_SRC)) $(STLIB) $(PERF_PEERS)
$(B)/perf/barrier: LINK = $(CC)
$(PERF_BIN):
	@mkdir -p $(@D)
	$(call say,LD,$@) $(LINK) $(CFLAGS) $(LDFLAGS) $(filter %.o,$^) \
		$(STLIB) -o $@ $(LDLIBS_LULL) $(CK_LIBS) $(PERF_LIBS) -lm

deps-demo:
	$(Q)sh scripts/deps.sh demo
# The headline: perf/handoff's poll (1 ms) against lull's default parked
# consumer, 3000 messages x 3 runs each; see perf/README.md.
demo: deps-demo
	$(Q)$(MAKE) --no-print-directory $(B)/perf/handoff
	$(Q)$(B)/perf/handoff --headline
# Records through an SPSC and an MPSC ring: the ways to write and read.
tour: deps-demo
	$(Q)$(MAKE) --no-print-directory $(B)/examples/ring_tour
	$(Q)$(B)/examples/ring_tour

deps-bench:
	$(Q)sh scripts/deps.sh bench
# Every benchmark with its defaults (about 9 minutes on 2 CPUs, estimated),
# their JSON in results/ and plots of throughput and handoff in
# results/plots/; tables on stderr.  Options for each: make bench
# THROUGHPUT_ARGS='--runs 1' HANDOFF_ARGS='--pin same' XPROC_ARGS='--pin'
# DEATH_ARGS='--rounds 50'
THROUGHPUT_ARGS ?=
HANDOFF_ARGS ?=
XPROC_ARGS ?=
DEATH_ARGS ?=
bench: deps-bench
	$(Q)$(MAKE) --no-print-directory $(PERF_BIN)
	$(Q)mkdir -p results
	$(Q)$(B)/perf/throughput --json $(THROUGHPUT_ARGS) > results/throughput.json
	$(Q)python3 perf/json2dat.py results/throughput.json results/plots
	$(Q)gnuplot -e "dir='results/plots'" perf/plot_throughput.gp && \
		echo "plots: results/plots/throughput_*.png"
	$(Q)$(B)/perf/handoff --json $(HANDOFF_ARGS) > results/handoff.json
	$(Q)python3 perf/json2dat.py results/handoff.json results/plots
	$(Q)gnuplot -e "dir='results/plots'" perf/plot_handoff.gp && \
		echo "plots: results/plots/handoff_*.png"
	$(Q)$(B)/perf/xproc --json $(XPROC_ARGS) > results/xproc.json
	$(Q)$(B)/perf/death --json $(DEATH_ARGS) > results/death.json
	$(Q)$(B)/perf/barrier --json > results/barrier.json

# --- install -------------------------------------------------------------
install: lib
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR)/lull \
		$(DESTDIR)$(PKGCONFIGDIR)
	install -m 644 include/lull.h $(DESTDIR)$(INCLUDEDIR)/lull.h
	install -m 644 include/lull/*.h $(DESTDIR)$(INCLUDEDIR)/lull/
	install -m 755 $(SHLIB) $(DESTDIR)$(LIBDIR)/
	ln -sf liblull.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/liblull.so
	install -m 644 $(STLIB) $(DESTDIR)$(LIBDIR)/
	$(PC_SED) lull.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/lull.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/lull.pc
	install -d $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man7
	install -m 644 docs/man/*.3 $(DESTDIR)$(MANDIR)/man3/
	install -m 644 docs/man/*.7 $(DESTDIR)$(MANDIR)/man7/

uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/lull.h
	rm -rf $(DESTDIR)$(INCLUDEDIR)/lull
	rm -f $(DESTDIR)$(LIBDIR)/liblull.so.$(VERSION) \
		$(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/liblull.so \
		$(DESTDIR)$(LIBDIR)/liblull.a $(DESTDIR)$(PKGCONFIGDIR)/lull.pc
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man3/,$(notdir $(wildcard docs/man/*.3))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man7/,$(notdir $(wildcard docs/man/*.7)))

clean:
	rm -rf $(B)

# The streaming text-to-speech example: its own rules and targets.
-include examples/audio-server/audio.mk
# make check also runs the audio example's integration test and fuzzers.
check-build: $(AUDIO_BIN) $(AUDIO_LOADGEN) $(AUDIO_ASAN_BIN) $(FUZZ_BIN) \
	$(REGION_FUZZ_BIN)

# Every fuzzer, side by side (scripts/fuzz.sh).
.PHONY: fuzz
fuzz: deps-check
	$(Q)$(MAKE) --no-print-directory $(FUZZ_BIN) $(REGION_FUZZ_BIN)
	$(Q)sh scripts/fuzz.sh $(FUZZ_SECONDS)

.SECONDARY:

-include $(shell find $(B) -name '*.d' 2>/dev/null)
