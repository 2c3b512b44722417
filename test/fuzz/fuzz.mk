# fuzz.mk - builds the libFuzzer targets of test/fuzz/ with clang (libFuzzer, ASan, UBSan).
# GNU make, run from the top of a configured tree (autoconf.h) by test/fuzz/run:
#   make -f test/fuzz/fuzz.mk [-j2] [FUZZ_CC=clang-14]
# The modules the targets call are compiled again with coverage instrumentation into
# test/fuzz/build/libneki_fuzz.a (objects under test/fuzz/build/obj/, rebuilt when a source
# or header changes); each target links its fuzz_<area>.o against it. Nothing here is part
# of the automake build.

FUZZ_CC ?= clang
B := test/fuzz/build
TARGETS := client server auth ini topology keyexpr copy merge router

PKGS := libevent_core libcares libssl libcrypto libpq libxxhash libcjson icu-uc
DEP_CFLAGS := $(shell pkg-config --cflags $(PKGS))
DEP_LIBS := $(shell pkg-config --libs $(PKGS)) -lpg_query -lpthread -lm
SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
CFLAGS := -std=gnu11 -g -O1 -D_GNU_SOURCE -Iinclude -I. $(DEP_CFLAGS) $(SAN) \
	-Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wstrict-prototypes \
	-Wmissing-prototypes -Wpointer-arith -MMD -MP

# The modules the targets reach (the linker takes from the archive what each one needs).
LIB_SRCS := $(addprefix src/common/,error.c log.c hash.c image_area.c memstream.c rarena.c sqlscan.c) \
	$(wildcard src/proto/*.c) \
	$(addprefix src/config/,cfg.c ini.c sections.c settings.c shards.c shard_servers.c) \
	$(wildcard src/topology/*.c src/router/*.c src/merge/*.c) \
	src/exec/route_copy_row.c src/shm/shm_gsi_cost.c
LIB_OBJS := $(patsubst %.c,$(B)/obj/%.o,$(LIB_SRCS))
BINS := $(addprefix $(B)/fuzz_,$(TARGETS))

all: $(BINS)

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  FUZZCC   $<"
	@$(FUZZ_CC) $(CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(B)/libneki_fuzz.a: $(LIB_OBJS)
	@rm -f $@
	@echo "  AR       $@"
	@ar rcs $@ $^

$(B)/fuzz_%: $(B)/obj/test/fuzz/fuzz_%.o $(B)/libneki_fuzz.a
	@echo "  FUZZLD   $@"
	@$(FUZZ_CC) $(SAN) -fsanitize=fuzzer $< $(B)/libneki_fuzz.a $(DEP_LIBS) -o $@

-include $(LIB_OBJS:.o=.d) $(patsubst %,$(B)/obj/test/fuzz/fuzz_%.d,$(TARGETS))

.PHONY: all
.SECONDARY:
