# outpost — hand-written Makefile.
#
#   make                      build build/outpost (static, stripped copy in build/outpost.stripped)
#   make ARCH=arm64|armhf     cross build into build/arm64/ or build/armhf/
#   make SANITIZE=address,undefined   ASan+UBSan build (clang) into build/san/ (dynamic: ASan cannot be static)
#   make test [ARCH=...]      deps, build, every test suite; last line "N passed, N failed"
#   make run                  deps, build, start an agent with ./run/ config and example jobs
#   make deps                 install every build and test dependency (apt-get; idempotent)
#   make vendor               copy nanopb + picojson into third_party/ for air-gapped builds
#   make fuzz                 build the libFuzzer targets (clang, on the build/san/ objects)
#   make fuzz-long [FUZZ_SECONDS=600]  run every fuzz target that long, print execs/coverage
#   make chaos [CYCLES=1000] [PARALLEL=4] [SEED=S]  random kill -9 of worker/keeper/agent, invariants checked
#   make power-cuts [CUTS=100] [ARCH=arm64]  power cuts at random moments of a churn, in the VM
#   make bench [BENCH_ARM64=1] [BENCH_ONLY=GLOB]  build and run tools/bench (BENCH_ARM64=1: VM benchmarks on aarch64 too)
#   make install [PREFIX=/usr/local] [DESTDIR=]  the stripped binary, its man page and bash completion
#   make size [ARCH=...]      bytes of the stripped binary per source folder, budget, delta (docs/benchmarks.md)
#   make test-fresh           (root) make run + make test in a pristine Debian 12 root (docs/testing.md)
#
# Two passes. The first (outer) pass computes nothing from the machine: it
# installs what the goals need (tools/deps.sh GROUP...) and then runs make
# again with OUTPOST_DEPS_CHECKED=1 for the real work, so every value below
# that asks the toolchain (the target triplet, library paths) is computed
# only once the toolchain exists. Sub-makes inherit the variable through
# MAKEFLAGS and go straight to the second pass.
#
# Layout of outputs: $(BUILD)/obj (objects), build/gen (nanopb output, shared
# by all architectures), $(BUILD)/outpost, $(BUILD)/unit_tests, $(BUILD)/test_helper.

ifeq ($(OUTPOST_DEPS_CHECKED),)

GOALS := $(or $(MAKECMDGOALS),all)
# Which dependency groups of tools/deps.sh the goals need; clean and help
# need none. Plain build goals (all, build/outpost, ...) need the toolchain
# of ARCH, and GoogleTest for the test binaries.
OWN_GOALS := deps vendor test test-fresh run bench fuzz fuzz-long chaos power-cuts clean help
BUILD_GOALS := $(filter-out $(OWN_GOALS),$(GOALS))
DEPS_GROUPS := $(sort \
  $(if $(BUILD_GOALS),build $(filter arm64 armhf,$(ARCH))) \
  $(if $(filter %unit_tests %test_helper,$(BUILD_GOALS)),test-build) \
  $(if $(filter deps test,$(GOALS)),all) \
  $(if $(filter vendor,$(GOALS)),vendor) \
  $(if $(filter run,$(GOALS)),build) \
  $(if $(filter bench chaos,$(GOALS)),bench) \
  $(if $(and $(filter bench,$(GOALS)),$(BENCH_ARM64)),arm64) \
  $(if $(filter power-cuts,$(GOALS)),build vm test-build $(filter arm64,$(ARCH))) \
  $(if $(or $(filter fuzz fuzz-long,$(GOALS)),$(SANITIZE)),fuzz) \
  $(if $(filter test-fresh,$(GOALS)),fresh))

.PHONY: $(GOALS) outpost-outer-pass
$(GOALS): outpost-outer-pass ; @:

outpost-outer-pass:
ifneq ($(strip $(DEPS_GROUPS)),)
	@echo "outpost: checking dependencies ($(strip $(DEPS_GROUPS))): tools/deps.sh"
	@tools/deps.sh $(DEPS_GROUPS)
endif
	@$(MAKE) --no-print-directory OUTPOST_DEPS_CHECKED=1 $(MAKECMDGOALS)

else  # second pass: the build itself

ARCH ?= native
SANITIZE ?=
# The sanitizer build's optimisation of the library (src/): -O1 by default;
# tools/test.sh uses -O0, which halves its compile time (the sanitized build
# is the longest path of make test on 2 cores).
SAN_OPT ?= -O1
V ?= 0

ifeq ($(V),0)
Q := @
else
Q :=
endif

ifeq ($(ARCH),native)
  # Safe to ask gcc now: the first pass installed it.
  TRIPLET := $(shell gcc -dumpmachine 2>/dev/null | sed 's/-pc-/-/')
  ifeq ($(TRIPLET),)
    ifeq ($(filter clean help vendor test-fresh,$(MAKECMDGOALS)),)
      $(error no native C compiler: `gcc -dumpmachine` printed nothing (install build-essential: tools/deps.sh build))
    endif
  endif
  CROSS :=
  BUILD := build
else ifeq ($(ARCH),arm64)
  TRIPLET := aarch64-linux-gnu
  CROSS := aarch64-linux-gnu-
  BUILD := build/arm64
  # GCC keeps aarch64's frame pointer (x29) by default: one more instruction
  # in every function that calls another, about 23 KB of the binary, used
  # by nothing in outpost (no backtraces; perf call graphs need it, or
  # unwind tables, which outpost has neither of now).
  ARCH_OPT := -fomit-frame-pointer
else ifeq ($(ARCH),armhf)
  TRIPLET := arm-linux-gnueabihf
  CROSS := arm-linux-gnueabihf-
  BUILD := build/armhf
  # GCC's note that the ARM ABI for some 64-bit types changed in GCC 7.1: it
  # only matters when linking objects from GCC < 7, which we never do.
  ARCH_WARN := -Wno-psabi
else
  $(error ARCH must be native, arm64 or armhf (got '$(ARCH)'))
endif

ifneq ($(SANITIZE),)
  ifneq ($(ARCH),native)
    $(error SANITIZE is only supported for the native build)
  endif
  # SAN_OPT=-O0 (make test's run) builds into build/san-O0/, apart from the
  # -O1 objects of build/san/ that `make fuzz-long` wants fast.
  BUILD := build/san$(if $(filter -O0,$(SAN_OPT)),-O0)
  SAN_FLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
  STATIC :=
else
  SAN_FLAGS :=
  STATIC := -static
  # The static binaries are not position-independent (gcc -static links an
  # ET_EXEC at a fixed address), so their code need not be either: Debian's
  # default -fPIE only cost size (about 44 KB on aarch64, 4% of every
  # folder; vtables and pointer tables move from .data.rel.ro to .rodata).
  # The sanitizer builds are dynamic PIEs and keep it.
  NOPIE := -fno-pie
endif

CXX := $(CROSS)g++
CC := $(CROSS)gcc
# The sanitizer build is clang's, at -O1 with line tables: its objects are
# also the fuzz targets' (the library carries libFuzzer's coverage
# instrumentation, FUZZ_COV), so make test compiles the library once for
# both, and clang -O1 compiles the tests about 3x faster than g++ -O2 with
# ASan. gcc's -Werror builds of every arch stay the warning gate.
# The tests' own objects (tests/) are compiled at -O0 there: 2.7x less
# compile time than -O1 with ASan (exec_driver_test: 8 s against 22 s),
# while the library they test stays at -O1.
# In the release builds (every arch) the tests' objects are plain -O1
# objects, not LTO ones: the unit tests' link then optimises only the
# library across units (as outpost's link does), not the tests' own code
# too (about 160 CPU-s of the x86_64 link); the library keeps its flags.
ifneq ($(SANITIZE),)
  CXX := clang++
  CC := clang
  FUZZ_COV := -fsanitize=fuzzer-no-link
  TEST_OPT := -O0
else
  TEST_OPT := -O1 -fno-lto
endif
STRIP := $(CROSS)strip
# Link-time optimisation keeps the static binary small (about 13% smaller
# here); sanitizer builds skip it to build faster.
ifeq ($(SANITIZE),)
  LTO := -flto=auto
  # GCC 12's -Wstringop-overread misfires on std::vector copies when LTO
  # inlines across units (armhf link of the tests); it is not a real overread.
  LTO_LINK_WARN := -Wno-stringop-overread
  AR := $(CROSS)gcc-ar
else
  LTO :=
  LTO_LINK_WARN :=
  AR := $(CROSS)ar
endif

# nanopb and picojson: from third_party/ when `make vendor` filled it,
# otherwise from the Debian packages.
ifneq ($(wildcard third_party/nanopb/include/pb.h),)
  NANOPB_INC := third_party/nanopb/include
  NANOPB_LIB := third_party/nanopb/lib/$(TRIPLET)/libprotobuf-nanopb.a
  NANOPB_GEN := /usr/bin/python3 third_party/nanopb/generator/nanopb_generator.py
else
  NANOPB_INC := $(BUILD)/deps/include
  NANOPB_LIB := /usr/lib/$(TRIPLET)/libprotobuf-nanopb.a
  NANOPB_GEN := /usr/bin/python3 /usr/bin/nanopb_generator.py
endif
ifneq ($(wildcard third_party/picojson/picojson.h),)
  PICOJSON_INC := third_party/picojson
else
  PICOJSON_INC := $(BUILD)/deps/include
endif

GTEST_DIR := /usr/src/googletest/googletest
GEN := build/gen

WARN := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wnon-virtual-dtor -Wpointer-arith -Wvla -Wundef $(ARCH_WARN)
# _FILE_OFFSET_BITS=64: 64-bit off_t and ino_t on armhf too (readdir fails with
# EOVERFLOW on large inode numbers otherwise, and logs may pass 2 GiB).
DEFS := -DPB_ENABLE_MALLOC=1 -DPICOJSON_USE_LOCALE=0 -DPICOJSON_USE_INT64 -D_FILE_OFFSET_BITS=64 \
        -DOUTPOST_VERSION='"$(shell cat VERSION 2>/dev/null || echo 0.0.0)"'
OPT := $(if $(SANITIZE),$(SAN_OPT) -gline-tables-only,-O2) -ffunction-sections -fdata-sections $(ARCH_OPT) $(LTO)
# src/base/compat holds an <iostream> stand-in so picojson does not drag the
# iostream static initialiser (and ~900 KiB of locale code) into the binary.
INCS := -Isrc -Iinclude -I$(GEN) -isystem $(NANOPB_INC) -isystem $(PICOJSON_INC)
CXXFLAGS_BASE := -std=c++17 $(OPT) $(WARN) $(DEFS) $(SAN_FLAGS) $(NOPIE)
# outpost never uses dynamic_cast or typeid: without RTTI the binary is ~20 KB
# smaller. Sanitized builds keep it (UBSan's vptr check needs the type info of
# every object, and the tests are built with it).
#
# outpost is built without exceptions and unwind tables: about 450 KB of the
# aarch64 binary (docs/benchmarks.md, "Size"). Nothing in it catches one; a
# C++ exception (bad_alloc, a library's out_of_range) ended the process
# before as it does now. picojson throws, so src/base/compat/picojson/picojson.h gives
# everything linked with outpost's objects (OUTPOST_PICOJSON_ABORTS: src,
# tools, the tests) a picojson that aborts instead, in a namespace of its
# own, and json::Parse refuses what would make it abort. The tests keep
# exceptions (GoogleTest); so do the examples (built as a vendor would, with
# the real picojson), the sanitizer builds and the fuzzers (where an
# overflowing number that got past json::Parse is an uncaught exception).
NO_EXCEPTIONS := $(if $(SANITIZE),,-fno-exceptions -fno-asynchronous-unwind-tables -fno-unwind-tables)
EXAMPLE_CXXFLAGS := $(CXXFLAGS_BASE) $(if $(SANITIZE),,-fno-rtti -fno-threadsafe-statics) -Isrc/base/compat -Isrc/base/compat/picojson $(INCS)
SRC_CXXFLAGS := $(EXAMPLE_CXXFLAGS) $(NO_EXCEPTIONS) -DOUTPOST_PICOJSON_ABORTS
TEST_CXXFLAGS := $(CXXFLAGS_BASE) -DOUTPOST_PICOJSON_ABORTS -Isrc/base/compat/picojson $(INCS) -isystem $(GTEST_DIR)/include -Itests
CFLAGS := -std=c11 $(OPT) $(NOPIE) -Wall -Wextra -Werror $(DEFS) $(SAN_FLAGS) $(if $(SANITIZE),,-fno-asynchronous-unwind-tables -fno-unwind-tables) -isystem $(NANOPB_INC)
LDFLAGS := $(STATIC) $(SAN_FLAGS) $(LTO) $(LTO_LINK_WARN) -O2 -Wl,--gc-sections -pthread
# Header dependencies go to a temporary file renamed once the compile
# succeeded: an interrupted compile never leaves a half-written .d for the
# next make to trip over.
DEPFLAGS = -MMD -MP -MF $(@:.o=.d.tmp)
DEPDONE = mv -f $(@:.o=.d.tmp) $(@:.o=.d)
# gtest's (unused) result streaming calls getaddrinfo, which makes glibc's
# static-link warning fire; it is about gtest, not outpost, so silence it there.
TEST_LDFLAGS := $(LDFLAGS) -Wl,--no-warnings
# The unit tests derive from the NRI plugin library's Stub with RTTI while
# the library is built without: the vtables differ by their typeinfo only,
# which LTO reports (-Wodr) though nothing uses it.
TEST_LDFLAGS += $(if $(SANITIZE),,-Wno-odr)

PROTOS := $(wildcard proto/*.proto)
GEN_C := $(patsubst proto/%.proto,$(GEN)/%.pb.c,$(PROTOS))
GEN_H := $(GEN_C:.c=.h)

LIB_SRCS := $(filter-out src/main.cc,$(shell find src -name '*.cc' | sort))
# The gRPC interop tests' messages (proto/grpc_interop.proto) are the tests'
# own: only build/grpc_peer links them.
TEST_PROTOS := grpc_interop
LIB_OBJS := $(patsubst %.cc,$(BUILD)/obj/%.o,$(LIB_SRCS)) \
            $(patsubst $(GEN)/%.c,$(BUILD)/obj/gen/%.o,$(filter-out $(patsubst %,$(GEN)/%.pb.c,$(TEST_PROTOS)),$(GEN_C)))
MAIN_OBJ := $(BUILD)/obj/src/main.o
UNIT_SRCS := $(sort $(wildcard tests/unit/*.cc))
# (+ the oci driver's spec builder and CDI, tested as units: tests/unit/oci_spec_test.cc, cdi_test.cc)
OCI_UNIT_OBJS := $(BUILD)/obj/examples/plugins/oci-driver/spec.o $(BUILD)/obj/examples/plugins/oci-driver/cdi.o
UNIT_OBJS := $(patsubst %.cc,$(BUILD)/obj/%.o,$(UNIT_SRCS)) $(OCI_UNIT_OBJS)
# They test the example's code, which uses the real picojson (EXAMPLE_CXXFLAGS).
$(BUILD)/obj/tests/unit/oci_spec_test.o $(BUILD)/obj/tests/unit/cdi_test.o: TEST_CXXFLAGS = $(CXXFLAGS_BASE) $(INCS) -isystem $(GTEST_DIR)/include -Itests
# (grpc_peer*.cc are a program of their own: build/grpc_peer)
HELPER_SRCS := $(filter-out tests/helpers/grpc_peer%.cc,$(sort $(wildcard tests/helpers/*.cc)))
HELPER_OBJS := $(patsubst %.cc,$(BUILD)/obj/%.o,$(HELPER_SRCS))
GTEST_OBJS := $(BUILD)/obj/gtest/gtest-all.o $(BUILD)/obj/gtest/gtest_main.o
DEP_HEADERS := $(if $(filter $(BUILD)/deps/include,$(NANOPB_INC) $(PICOJSON_INC)),$(BUILD)/deps/.stamp)

.PHONY: all outpost tests deps vendor test test-fresh run install fuzz fuzz-long chaos power-cuts bench bench-build bench-objs bench-arm64-build size clean unit help-make
.DEFAULT_GOAL := all

all: $(BUILD)/outpost $(BUILD)/outpost.stripped $(BUILD)/liboutpost-plugin.a oci-driver

outpost: all

tests: $(BUILD)/unit_tests $(BUILD)/test_helper $(BUILD)/test_plugin $(BUILD)/example_driver nri-plugins oci-driver \
       $(BUILD)/grpc_peer

# The oci task driver (examples/plugins/oci-driver/, docs/oci-driver.md): a
# binary of its own on the plugin library, shipped next to outpost.
OCI_DRIVER_OBJS := $(patsubst %.cc,$(BUILD)/obj/%.o,$(sort $(wildcard examples/plugins/oci-driver/*.cc)))
.PHONY: oci-driver
oci-driver: $(BUILD)/outpost-oci-driver $(BUILD)/outpost-oci-driver.stripped

# NRI plugins built with the C++ NRI plugin library: the examples
# (examples/plugins/nri-*/) and the test plugin (tests/helpers/nri/).
NRI_EXAMPLES := $(patsubst examples/plugins/%/main.cc,%,$(sort $(wildcard examples/plugins/nri-*/main.cc)))
NRI_PLUGIN_BINS := $(patsubst %,$(BUILD)/%,$(NRI_EXAMPLES)) $(BUILD)/test_nri_plugin
.PHONY: nri-plugins
nri-plugins: $(NRI_PLUGIN_BINS)

# Copies of the system headers we use, so a cross compiler (which must not
# see the host's /usr/include) finds them too.
$(BUILD)/deps/.stamp:
	$(Q)mkdir -p $(BUILD)/deps/include
	$(Q)cp /usr/include/pb.h /usr/include/pb_common.h /usr/include/pb_encode.h /usr/include/pb_decode.h \
	   /usr/include/picojson.h $(BUILD)/deps/include/
	$(Q)touch $@

# Not intermediate: make would delete them after each run, and the next run
# (of any architecture) would regenerate them, newer than every object.
.SECONDARY: $(GEN_C) $(GEN_H)

$(GEN)/%.pb.c $(GEN)/%.pb.h: proto/%.proto $(wildcard proto/*.options)
	@echo "  NANOPB  $<"
	$(Q)rm -rf $(GEN)/.tmp-$* && mkdir -p $(GEN)/.tmp-$*
	$(Q)$(NANOPB_GEN) -q -I proto -D $(GEN)/.tmp-$* $(if $(wildcard proto/$*.options),-f proto/$*.options) $(notdir $<)
	$(Q)mv -f $(GEN)/.tmp-$*/$*.pb.h $(GEN)/.tmp-$*/$*.pb.c $(GEN)/ && rmdir $(GEN)/.tmp-$*

$(BUILD)/obj/gen/%.o: $(GEN)/%.c $(GEN_H) $(DEP_HEADERS) Makefile
	@echo "  CC      $<"
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(FUZZ_COV) $(DEPFLAGS) -I$(GEN) -c $< -o $@ && $(DEPDONE)

# Everything under src/ is compiled for size (-Os; kept per function through
# LTO, about a fifth of the binary) except the data paths named here, which
# run per byte or per event: the loop, framing and the RPC server, log pipes.
# (Spawning, log rotation and the file helpers of base/sys run per start, per
# rotated file or per operation, where syscalls dominate: at -O2 they cost
# about 28 KB for nothing measurable.) A new folder needs no edit here.
# Mixing -Os and -O2 under LTO has one trap on ARM (GCC 12): string literals
# are word-aligned only in code not optimised for size, and a literal used by
# both kinds of code is emitted once, maybe unaligned, while the -O2 side may
# copy it with LDM, which faults (SIGBUS) on an unaligned address (qemu-arm
# and ARMv7 boards alike). Which literal lands where depends on the link, so
# no convention in the sources can rule it out: armhf is built at -Os
# throughout. (The one literal that did fault is also no longer shared:
# wire::DeadlineExceededError.) arm64 is -Os throughout too, for the size
# budget: 18 KB of aarch64 code, while on x86_64 the same objects at -Os
# log at the same speed and answer ttRPC calls 3% slower (p50) or 10% fewer
# per second (rpc_bench; docs/benchmarks.md "Size").
HOT_OBJS := loop/loop wire/frame wire/codec wire/rpc_server_conn \
            logs/log_pipe
ifneq ($(SANITIZE),)
$(BUILD)/obj/src/%.o: SPEED_OPT =
else ifneq ($(filter armhf arm64,$(ARCH)),)
$(BUILD)/obj/src/%.o: SPEED_OPT = -Os
else
$(BUILD)/obj/src/%.o: SPEED_OPT = $(if $(filter $(HOT_OBJS),$*),-O2,-Os)
endif

$(BUILD)/obj/src/%.o: src/%.cc $(GEN_H) $(DEP_HEADERS) Makefile
	@echo "  CXX     $<"
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CXX) $(SRC_CXXFLAGS) $(SPEED_OPT) $(FUZZ_COV) $(DEPFLAGS) -c $< -o $@ && $(DEPDONE)

$(BUILD)/obj/tests/%.o: tests/%.cc $(GEN_H) $(DEP_HEADERS) Makefile
	@echo "  CXX     $<"
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CXX) $(TEST_CXXFLAGS) $(TEST_OPT) $(DEPFLAGS) -c $< -o $@ && $(DEPDONE)

$(BUILD)/obj/tools/%.o: tools/%.cc $(GEN_H) $(DEP_HEADERS) Makefile
	@echo "  CXX     $<"
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CXX) $(SRC_CXXFLAGS) $(DEPFLAGS) -c $< -o $@ && $(DEPDONE)

$(BUILD)/obj/gtest/%.o: $(GTEST_DIR)/src/%.cc
	@echo "  CXX     $<"
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CXX) -std=c++17 -O1 $(SAN_FLAGS) -w -isystem $(GTEST_DIR)/include -I$(GTEST_DIR) -c $< -o $@

$(BUILD)/liboutpost.a: $(LIB_OBJS)
	$(Q)rm -f $@
	$(Q)$(AR) rcs $@ $^

# outpost carries no unwind tables of glibc's and nanopb's code: nothing in
# it catches an exception (tools/ld/no-unwind-tables.ld says why that changes
# nothing; about 50 KB on aarch64).
OUTPOST_LD_SCRIPT := tools/ld/no-unwind-tables.ld
OUTPOST_LDFLAGS := $(if $(SANITIZE),,-Wl,-T,$(OUTPOST_LD_SCRIPT))
# aarch64: the linker works around Cortex-A53 erratum 843419 (on by default)
# by rewriting an affected ADRP to ADR where the target is in ADR's range,
# else by a branch to a veneer; the veneers' section put a 4 KiB hole in the
# code, enough to push the binary over a 64 KiB step of the file. `=adr`
# keeps the same fix without veneers and fails the link if some sequence
# cannot be fixed that way: then it is linked again with both workarounds.
A53_FIX := $(if $(filter arm64,$(ARCH)),$(if $(SANITIZE),,-Wl,--fix-cortex-a53-843419=adr))
# aarch64 without RELRO: ld aligns the end of the RELRO region to the 64 KiB
# maximum page size (kept so the binary loads on kernels with 64 KiB pages),
# which pads the file by up to 64 KiB: a quarter of the size budget's room.
# In a static binary RELRO only makes .got, .init_array and .data.rel.ro
# read-only after start; without it they stay writable like .data
# (docs/benchmarks.md#size).
OUTPOST_LDFLAGS += $(if $(filter arm64,$(ARCH)),$(if $(SANITIZE),,-Wl,-z,norelro))
$(BUILD)/outpost: $(MAIN_OBJ) $(BUILD)/liboutpost.a $(OUTPOST_LD_SCRIPT)
	@echo "  LINK    $@"
	$(Q)$(CXX) $(LDFLAGS) $(OUTPOST_LDFLAGS) $(A53_FIX) -o $@ $(MAIN_OBJ) $(BUILD)/liboutpost.a $(NANOPB_LIB) \
	  $(if $(A53_FIX),|| { echo "  LINK    $@ again: erratum 843419 needs veneers (the binary grows)"; \
	    $(CXX) $(LDFLAGS) $(OUTPOST_LDFLAGS) -o $@ $(MAIN_OBJ) $(BUILD)/liboutpost.a $(NANOPB_LIB); })

$(BUILD)/outpost.stripped: $(BUILD)/outpost
	$(Q)$(STRIP) -o $@ $<

$(BUILD)/unit_tests: $(UNIT_OBJS) $(BUILD)/liboutpost.a $(GTEST_OBJS)
	@echo "  LINK    $@"
	$(Q)$(CXX) $(TEST_LDFLAGS) -o $@ $(UNIT_OBJS) $(BUILD)/liboutpost.a $(GTEST_OBJS) $(NANOPB_LIB)

$(BUILD)/test_helper: $(HELPER_OBJS)
	@echo "  LINK    $@"
	$(Q)$(CXX) $(LDFLAGS) -o $@ $^

# The plugin library (include/outpost/): the SDK over base, loop, wire and
# driverproto (the Driver messages, shared with the agent), with the
# messages those use. Plugins link it and nanopb's runtime.
PLUGIN_LIB_OBJS := $(filter $(BUILD)/obj/src/base/% $(BUILD)/obj/src/loop/% $(BUILD)/obj/src/wire/% \
                     $(BUILD)/obj/src/driverproto/% $(BUILD)/obj/src/nriproto/% $(BUILD)/obj/src/sdk/%,$(LIB_OBJS)) \
                   $(patsubst %,$(BUILD)/obj/gen/%.pb.o,ttrpc status pluginregistration driver nri)

$(BUILD)/liboutpost-plugin.a: $(PLUGIN_LIB_OBJS)
	$(Q)rm -f $@
	$(Q)$(AR) rcs $@ $^

# The gRPC interop tests' peer (tests/helpers/grpc_peer*.cc): outpost's gRPC
# server or client on the Interop service of proto/grpc_interop.proto, run
# against Python's grpcio by tests/integration/test_grpc.sh.
GRPC_PEER_OBJS := $(patsubst %.cc,$(BUILD)/obj/%.o,$(sort $(wildcard tests/helpers/grpc_peer*.cc))) \
                  $(BUILD)/obj/gen/grpc_interop.pb.o
$(BUILD)/grpc_peer: $(GRPC_PEER_OBJS) $(BUILD)/liboutpost.a
	@echo "  LINK    $@"
	$(Q)$(CXX) $(LDFLAGS) -o $@ $^ $(NANOPB_LIB)

# Peers on grpc-go, the gRPC stack of stock kubelet and Nomad plugins
# (tests/helpers/go/: a device plugin, and a Nomad driver served by
# hashicorp/go-plugin), built from Debian's Go packages in GOPATH mode (no
# module proxy) when `go` is there: test_devices.sh and test_nomad.sh skip
# their tests, saying so, without them.
GO_PEERS := $(BUILD)/go/device_plugin $(BUILD)/go/nomad_driver
GO_ENV := GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$(abspath $(BUILD))/go/cache GOFLAGS=
.PHONY: go-peers
go-peers:
	$(Q)if command -v go >/dev/null; then $(MAKE) --no-print-directory $(GO_PEERS); \
	else echo "  SKIP    go-peers: no go (tools/deps.sh test installs golang-go)"; fi
# The Go Nomad driver's -check mode (cty_check.go) compares outpost's
# encoding of task configs with Nomad's libraries: hcl/v2, go-cty and
# hashicorp/go-msgpack, from Debian too.
$(BUILD)/go/nomad_driver: tests/helpers/go/cty_check.go
$(BUILD)/go/%: tests/helpers/go/%.go tests/helpers/go/wire.go
	@echo "  GO      $@"
	$(Q)mkdir -p $(@D)
	$(Q)$(GO_ENV) go build -o $@ $^

# A Nomad task-driver plugin in C++ (go-plugin over outpost's gRPC server)
# doing what test_plugin's TaskDriver does: nomad_bench's plugin.
$(BUILD)/nomad_exec_driver: $(BUILD)/obj/tests/helpers/nomad/nomad_exec_driver.o $(BUILD)/liboutpost.a
	@echo "  LINK    $@"
	$(Q)$(CXX) $(LDFLAGS) -o $@ $^ $(NANOPB_LIB)

# A plugin built with the library, as a vendor would (tests/helpers/plugin/).
$(BUILD)/test_plugin: $(BUILD)/obj/tests/helpers/plugin/test_plugin.o $(BUILD)/liboutpost-plugin.a
	@echo "  LINK    $@"
	$(Q)$(CXX) $(LDFLAGS) -o $@ $^ $(NANOPB_LIB)

# The example task driver (examples/plugin-driver/), built as a vendor
# would: its own source against the library, never part of outpost.
$(BUILD)/obj/examples/%.o: examples/%.cc $(GEN_H) $(DEP_HEADERS) Makefile
	@mkdir -p $(dir $@)
	@echo "  CXX     $<"
	$(Q)$(CXX) $(EXAMPLE_CXXFLAGS) $(FUZZ_COV) -Iinclude $(DEPFLAGS) -c -o $@ $< && $(DEPDONE)

$(BUILD)/example_driver: $(BUILD)/obj/examples/plugin-driver/example_driver.o $(BUILD)/liboutpost-plugin.a
	@echo "  LINK    $@"
	$(Q)$(CXX) $(LDFLAGS) -o $@ $^ $(NANOPB_LIB)

$(BUILD)/outpost-oci-driver: $(OCI_DRIVER_OBJS) $(BUILD)/liboutpost-plugin.a
	@echo "  LINK    $@"
	$(Q)$(CXX) $(LDFLAGS) -o $@ $^ $(NANOPB_LIB)

$(BUILD)/outpost-oci-driver.stripped: $(BUILD)/outpost-oci-driver
	$(Q)$(STRIP) -o $@ $<

$(BUILD)/nri-%: $(BUILD)/obj/examples/plugins/nri-%/main.o $(BUILD)/liboutpost-plugin.a
	@echo "  LINK    $@"
	$(Q)$(CXX) $(LDFLAGS) -o $@ $^ $(NANOPB_LIB)

# Built like the library it links (no RTTI), as a vendor's plugin would be:
# mixing the two makes the linker warn about Stub's vtable (-Wodr).
$(BUILD)/obj/tests/helpers/nri/%.o: TEST_CXXFLAGS = $(SRC_CXXFLAGS)
$(BUILD)/test_nri_plugin: $(BUILD)/obj/tests/helpers/nri/test_nri_plugin.o $(BUILD)/liboutpost-plugin.a
	@echo "  LINK    $@"
	$(Q)$(CXX) $(LDFLAGS) -o $@ $^ $(NANOPB_LIB)

# ---- fuzzing (clang + libFuzzer, native only) -------------------------------
# The targets link the sanitizer build's library (build/san/, clang, with
# coverage instrumentation): `make fuzz` builds it with SANITIZE=address,undefined.
FUZZ_SRCS := $(sort $(wildcard tests/fuzz/*_fuzzer.cc))
FUZZ_BINS := $(patsubst tests/fuzz/%.cc,build/fuzz/%,$(FUZZ_SRCS))
FUZZ_CXXFLAGS := -std=c++17 -O1 -gline-tables-only -fsanitize=fuzzer,address,undefined $(DEFS) \
                 -Isrc/base/compat -Isrc/base/compat/picojson $(INCS)
# Each target is built like the code it drives: the library's picojson
# aborts (OUTPOST_PICOJSON_ABORTS, as in src/), the oci driver's spec
# builder uses the real one (as the examples do).
FUZZ_PICOJSON = -DOUTPOST_PICOJSON_ABORTS
build/fuzz/oci_spec_fuzzer build/fuzz/cdi_spec_fuzzer: FUZZ_PICOJSON =

ifeq ($(SANITIZE),)
fuzz:
	$(Q)$(MAKE) --no-print-directory SANITIZE=address,undefined fuzz
else ifeq ($(SANITIZE),address,undefined)
fuzz: $(FUZZ_BINS)
else
fuzz:
	$(error make fuzz needs the SANITIZE=address,undefined objects (got SANITIZE=$(SANITIZE)))
endif

build/fuzz/%: tests/fuzz/%.cc $(BUILD)/liboutpost.a $(OCI_UNIT_OBJS)
	@echo "  FUZZ    $@"
	$(Q)mkdir -p build/fuzz
	$(Q)$(CXX) $(FUZZ_CXXFLAGS) $(FUZZ_PICOJSON) -o $@ $< $(OCI_UNIT_OBJS) \
	  $(BUILD)/liboutpost.a $(NANOPB_LIB)

# ---- benchmarks -------------------------------------------------------------
# One binary per tools/bench/*.cc, except peer_bench: its main is in
# peer_bench.cc, the rest in peer_bench_*.cc, which are parts of it, not
# benchmarks of their own.
PEER_BENCH_PARTS := $(sort $(wildcard tools/bench/peer_bench_*.cc))
BENCH_SRCS := $(filter-out $(PEER_BENCH_PARTS),$(sort $(wildcard tools/bench/*.cc)))
BENCH_BINS := $(patsubst tools/bench/%.cc,$(BUILD)/bench/%,$(BENCH_SRCS))
BENCH_OBJS := $(patsubst tools/bench/%.cc,$(BUILD)/obj/tools/bench/%.o,$(BENCH_SRCS) $(PEER_BENCH_PARTS))
.SECONDARY: $(BENCH_OBJS)

$(BUILD)/bench/%: $(BUILD)/obj/tools/bench/%.o $(BUILD)/liboutpost.a
	@echo "  LINK    $@"
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CXX) $(LDFLAGS) -o $@ $^ $(NANOPB_LIB)

$(BUILD)/bench/peer_bench: $(BUILD)/obj/tools/bench/peer_bench.o \
                           $(patsubst tools/bench/%.cc,$(BUILD)/obj/tools/bench/%.o,$(PEER_BENCH_PARTS)) \
                           $(BUILD)/liboutpost.a
	@echo "  LINK    $@"
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CXX) $(LDFLAGS) -o $@ $^ $(NANOPB_LIB)

# BENCH_ARM64=1 (native builds only): also build build/arm64/ (outpost,
# test_helper, the bench binaries) and run the VM benchmarks a second time
# in the aarch64 VM (docs/benchmarks.md). BENCH_ONLY=GLOB: only the
# benchmarks whose name matches (e.g. BENCH_ONLY=boot_bench).
BENCH_ARM64_ON := $(if $(and $(BENCH_ARM64),$(filter native,$(ARCH))),1)
bench: all $(BENCH_BINS) $(BUILD)/test_helper $(BUILD)/test_plugin $(BUILD)/nomad_exec_driver $(BUILD)/test_nri_plugin $(BUILD)/outpost-oci-driver $(BUILD)/example_driver $(if $(BENCH_ARM64_ON),bench-arm64-build)
	$(Q)BENCH_ONLY='$(BENCH_ONLY)' tools/bench/run.sh $(BUILD) $(if $(BENCH_ARM64_ON),--vm-also build/arm64)

bench-arm64-build:
	$(Q)$(MAKE) --no-print-directory ARCH=arm64 all build/arm64/test_helper bench-build

# The benchmark binaries only.
bench-build: $(BENCH_BINS) $(BUILD)/nomad_exec_driver
# Their objects only: make test compiles them (every warning an error) so
# they keep compiling; linking each (an LTO link, 5-12 CPU-s apiece) is left
# to make bench.
bench-objs: $(BENCH_OBJS) $(BUILD)/obj/tests/helpers/nomad/nomad_exec_driver.o

# Bytes of the stripped binary per source folder, against the 1.75 MiB budget
# and tools/size-baseline.txt (SIZE_RECORD=1 rewrites this arch's lines).
SIZE_ARCH := $(if $(filter native,$(ARCH)),$(shell uname -m),$(if $(filter arm64,$(ARCH)),aarch64,$(ARCH)))
size: $(BUILD)/outpost.stripped
	$(Q)NM=$(CROSS)nm READELF=$(CROSS)readelf tools/size-report.sh $(BUILD)/outpost $(BUILD)/outpost.stripped $(SIZE_ARCH)

# ---- set-up, tests, run -----------------------------------------------------
# The first pass installed what the goals need; `make deps` installs all.
deps:
	$(Q)tools/deps.sh all

vendor:
	$(Q)tools/vendor.sh

test:
	$(Q)tools/test.sh $(if $(filter-out native,$(ARCH)),--arch $(ARCH))

# The chaos suite (docs/testing.md): CYCLES (default 1000) random kills of
# the worker, keeper or whole agent, split over PARALLEL agents (default 4);
# SEED replays a run's choices.
chaos: all $(BUILD)/test_helper
	$(Q)tests/chaos/chaos.sh $(BUILD)/outpost $(BUILD)/test_helper --cycles $(or $(CYCLES),1000) \
	  --parallel $(or $(PARALLEL),4) $(if $(SEED),--seed $(SEED))

# Power cuts in the VM (docs/testing.md): one VM run chains CUTS (default
# 100) boots, each killed (QEMU SIGKILLed) at a random moment of a churn
# workload; every boot checks that the agent brought every job back.
power-cuts: all $(BUILD)/test_helper
	$(Q)tools/vmtest $(if $(filter arm64,$(ARCH)),--arch arm64) --binary $(BUILD)/outpost \
	  --helper $(BUILD)/test_helper --filter power_cut_churn --power-cuts $(or $(CUTS),100) --timeout 900

# Every libFuzzer target for FUZZ_SECONDS each (default 600), from the
# checked-in seeds; prints executions, coverage and crashes per target.
fuzz-long: fuzz
	$(Q)tools/fuzz-long.sh $(or $(FUZZ_SECONDS),600)

run: all
	$(Q)tools/run.sh $(BUILD)/outpost

# A pristine Debian 12 root: make run, make test (twice, and after a Ctrl-C),
# and an air-gapped build (root; not part of make test: docs/testing.md).
test-fresh:
	$(Q)tools/test-fresh.sh

# PREFIX/bin/outpost (the stripped binary), the man page outpost(1) and
# the bash completion (share/bash-completion/completions/outpost, where
# bash-completion loads it from on demand), under DESTDIR when set (staged
# installs, packages). The binary prints both (`outpost help --man`,
# `outpost completion bash`) from its command table and help texts, so
# they need a binary that runs here: a cross build takes them from the
# native build/outpost (the text is the same on every architecture).
PREFIX ?= /usr/local
ifeq ($(ARCH),native)
DOC_OUTPOST := $(BUILD)/outpost
else
DOC_OUTPOST := build/outpost
.PHONY: native-outpost
native-outpost:
	$(Q)$(MAKE) --no-print-directory ARCH=native build/outpost
build/outpost: native-outpost ; @:
endif

$(BUILD)/share/outpost.1: $(DOC_OUTPOST)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(DOC_OUTPOST) help --man >$@.tmp && mv -f $@.tmp $@

$(BUILD)/share/outpost.bash-completion: $(DOC_OUTPOST)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(DOC_OUTPOST) completion bash >$@.tmp && mv -f $@.tmp $@

install: $(BUILD)/outpost.stripped $(BUILD)/share/outpost.1 $(BUILD)/share/outpost.bash-completion
	$(Q)install -D -m 0755 $(BUILD)/outpost.stripped $(DESTDIR)$(PREFIX)/bin/outpost
	$(Q)install -D -m 0644 $(BUILD)/share/outpost.1 $(DESTDIR)$(PREFIX)/share/man/man1/outpost.1
	$(Q)install -D -m 0644 $(BUILD)/share/outpost.bash-completion \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions/outpost
	@echo "  INSTALL $(DESTDIR)$(PREFIX)/bin/outpost, share/man/man1/outpost.1, share/bash-completion/completions/outpost"

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

endif  # second pass
