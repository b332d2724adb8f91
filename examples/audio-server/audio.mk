# examples/audio-server/audio.mk - the streaming text-to-speech example.
# Included by the top Makefile (its B, CFLAGS, STLIB, LDLIBS_LULL, ...).
#
# make audio-deps      install espeak-ng, soxr, cJSON, http_parser, libsodium,
#                      gnuplot and chromium (scripts/deps.sh audio)
# make build/examples/audio-server        the server, and audio-worker
# make build/examples/audio-server-asan   the same under ASan + UBSan
# make build/examples/audio-loadgen       the load generator
# make audio-demo      A/B: poll versus park wake-ups under load, a table
# make audio-serve     run the server on port 8000 (open it in a browser)

AUDIO_DIR := examples/audio-server
AUDIO_GEN := $(B)/gen/audio-server
AUDIO_NAMES := main server http speech tts metrics buf
AUDIO_OBJ := $(AUDIO_NAMES:%=$(B)/obj/audio-server/%.o)
AUDIO_ASAN_OBJ := $(AUDIO_NAMES:%=$(B)/asan/audio-server/%.o)
# The worker process: the synthesis half, without the HTTP side.
WORKER_NAMES := worker tts
WORKER_OBJ := $(WORKER_NAMES:%=$(B)/obj/audio-server/%.o)
WORKER_ASAN_OBJ := $(WORKER_NAMES:%=$(B)/asan/audio-server/%.o)
AUDIO_BIN := $(B)/examples/audio-server
AUDIO_ASAN_BIN := $(B)/examples/audio-server-asan
WORKER_BIN := $(B)/examples/audio-worker
WORKER_ASAN_BIN := $(B)/examples/audio-worker-asan
AUDIO_LOADGEN := $(B)/examples/audio-loadgen

AUDIO_PKGS := espeak-ng soxr libcjson libsodium
# Recursive: pkg-config runs only when an audio target is built.
AUDIO_CFLAGS = $(shell pkg-config --cflags $(AUDIO_PKGS) liburing) \
	-I$(AUDIO_GEN) -I$(AUDIO_DIR)
AUDIO_LIBS = $(shell pkg-config --libs $(AUDIO_PKGS)) -lhttp_parser -lm

.PHONY: audio audio-deps audio-demo audio-serve

audio: $(AUDIO_BIN) $(AUDIO_LOADGEN)

audio-deps:
	$(Q)sh scripts/deps.sh audio

# The page, as a C array: od(1) is everywhere, xxd is not.
$(AUDIO_GEN)/page.h: $(AUDIO_DIR)/index.html $(AUDIO_DIR)/audio.mk
	@mkdir -p $(@D)
	$(call say,GEN,$@) { \
		echo '/* Generated from index.html by audio.mk: do not edit. */'; \
		echo 'static const unsigned char page_html[] = {'; \
		od -An -v -tx1 $< | \
			sed -e 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g' -e 's/^/\t/'; \
		echo '};'; \
	} > $@.tmp && mv $@.tmp $@

$(B)/obj/audio-server/server.o $(B)/asan/audio-server/server.o: \
	$(AUDIO_GEN)/page.h

$(B)/obj/audio-server/%.o: $(AUDIO_DIR)/%.c
	@mkdir -p $(@D)
	$(call say,CC,$@) $(CC) $(CFLAGS) $(AUDIO_CFLAGS) -c $< -o $@

# The server starts the worker beside it: building one builds both.
$(AUDIO_BIN): $(AUDIO_OBJ) $(STLIB) | $(WORKER_BIN)
	@mkdir -p $(@D)
	$(call say,LD,$@) $(CC) $(CFLAGS) $(LDFLAGS) $(AUDIO_OBJ) $(STLIB) \
		-o $@ $(AUDIO_LIBS) $(LDLIBS_LULL)

$(WORKER_BIN): $(WORKER_OBJ) $(STLIB)
	@mkdir -p $(@D)
	$(call say,LD,$@) $(CC) $(CFLAGS) $(LDFLAGS) $(WORKER_OBJ) $(STLIB) \
		-o $@ $(AUDIO_LIBS) $(LDLIBS_LULL)

# ASan + UBSan, with the library compiled in (as the ASan unit tests do).
$(B)/asan/audio-server/%.o: $(AUDIO_DIR)/%.c
	@mkdir -p $(@D)
	$(call say,CC,$@) $(CC) $(CFLAGS) $(ASAN_FLAGS) $(AUDIO_CFLAGS) \
		-c $< -o $@

$(AUDIO_ASAN_BIN): $(AUDIO_ASAN_OBJ) $(ASAN_LIB_OBJ) | $(WORKER_ASAN_BIN)
	@mkdir -p $(@D)
	$(call say,LD,$@) $(CC) $(CFLAGS) $(ASAN_FLAGS) $(LDFLAGS) \
		$(AUDIO_ASAN_OBJ) $(ASAN_LIB_OBJ) -o $@ $(AUDIO_LIBS) \
		$(LDLIBS_LULL)

$(WORKER_ASAN_BIN): $(WORKER_ASAN_OBJ) $(ASAN_LIB_OBJ)
	@mkdir -p $(@D)
	$(call say,LD,$@) $(CC) $(CFLAGS) $(ASAN_FLAGS) $(LDFLAGS) \
		$(WORKER_ASAN_OBJ) $(ASAN_LIB_OBJ) -o $@ $(AUDIO_LIBS) \
		$(LDLIBS_LULL)

# The load generator does not use lull itself: it is a plain client.
$(AUDIO_LOADGEN): $(AUDIO_DIR)/loadgen.c
	@mkdir -p $(@D)
	$(call say,CC,$@) $(CC) $(CFLAGS) \
		$(shell pkg-config --cflags libcjson libsodium) $< -o $@ \
		$(shell pkg-config --libs libcjson libsodium) -lhttp_parser \
		-lm -pthread

audio-demo: audio-deps
	$(Q)$(MAKE) --no-print-directory $(AUDIO_BIN) $(AUDIO_LOADGEN)
	$(Q)sh $(AUDIO_DIR)/demo.sh $(AUDIO_BIN) $(AUDIO_LOADGEN)

audio-serve: audio-deps
	$(Q)$(MAKE) --no-print-directory $(AUDIO_BIN)
	$(AUDIO_BIN) --port 8000

# --- fuzzers: the HTTP reader and the speech request, under libFuzzer -----
# Built with the top Makefile's FUZZ_CC and FUZZ_FLAGS; make fuzz runs them
# with the library's own (scripts/fuzz.sh), and make check too.
FUZZ_BIN := $(B)/fuzz/fuzz_http_reader $(B)/fuzz/fuzz_speech_request

$(B)/fuzz/fuzz_http_reader: test/fuzz/fuzz_http_reader.c \
	$(AUDIO_DIR)/http.c $(AUDIO_DIR)/buf.c
	@mkdir -p $(@D)
	$(call say,FUZZCC,$@) $(FUZZ_CC) $(FUZZ_FLAGS) -I$(AUDIO_DIR) $^ \
		-o $@ -lhttp_parser

$(B)/fuzz/fuzz_speech_request: test/fuzz/fuzz_speech_request.c \
	$(AUDIO_DIR)/speech.c $(AUDIO_DIR)/http.c $(AUDIO_DIR)/buf.c
	@mkdir -p $(@D)
	$(call say,FUZZCC,$@) $(FUZZ_CC) $(FUZZ_FLAGS) -I$(AUDIO_DIR) \
		$(shell pkg-config --cflags libcjson libsodium) $^ -o $@ \
		$(shell pkg-config --libs libcjson libsodium) -lhttp_parser -lm
