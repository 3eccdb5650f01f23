# kiln build. `make` builds every binary into build/; `make guest` builds
# the guest kernel, initramfs and root filesystem into build/guest/;
# `make host` builds the emulated KVM host into build/host/; `make test`
# runs everything. `make SAN=1` builds with ASan and UBSan into build/san/.

BUILD   := build
CC      ?= gcc
CFLAGS  := -std=gnu11 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE \
           -fno-strict-aliasing -Isrc $(EXTRA_CFLAGS)
LDFLAGS :=
LDLIBS  := -lpthread -lm -lseccomp

ifeq ($(SAN),1)
BUILD   := build/san
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif

OBJ := $(BUILD)/obj

COMMON_SRC := $(wildcard src/common/*.c)
VMM_SRC    := $(wildcard src/vmm/*.c src/vmm/devices/*.c)
GUEST_SRC  := $(wildcard src/guest/*.c)
# The agent without its main(), for unit tests that drive its parts.
GUEST_LIB  := $(filter-out src/guest/init.c,$(GUEST_SRC))
# The wire protocol codec, shared by kiln-init, the client and the fuzzer.
PROTO_SRC  := src/common/buf.c src/common/proto.c
# The host-side client library (kilnd links it too) and its debug CLI.
CLIENT_SRC := $(filter-out src/client/kiln-guest.c,$(wildcard src/client/*.c))
UNIT_SRC   := $(wildcard tests/unit/*.c)
# The unit loop's shell tests that start servers (below, "Shell tests").
UNIT_SH    := pg cluster cluster_volumes keys billing admin statements deploy runner context net seed interp
ITEST_SRC  := $(wildcard tests/integration/*.c)

obj = $(patsubst %.c,$(OBJ)/%.o,$(1))

BINS := $(if $(VMM_SRC),$(BUILD)/kiln-vmm) $(BUILD)/kiln-disk $(BUILD)/kiln-guest $(BUILD)/kiln-net \
        $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC)) \
        $(patsubst tests/integration/%.c,$(BUILD)/tests/%,$(ITEST_SRC))

# ---- kilnd (the sandbox service) and kiln (its command-line client) ------
# kilnd makes disk overlays itself with the VMM's overlay code (no kiln-disk
# process on the create path).
KILND_SRC     := $(wildcard src/api/*.c src/mcp/*.c src/proxy/*.c src/ops/*.c src/hostif/*.c src/host/*.c src/store/*.c src/kilnd/*.c src/net/*.c) src/vmm/overlay.c \
                 $(BUILD)/gen/interp_py.c
KILND_LIB_SRC := $(filter-out src/kilnd/main.c,$(KILND_SRC))
CLI_SRC       := $(wildcard src/cli/*.c)
# libarchive: the tar reader of OCI image layers (src/host/oci.c).
# libpq: the store's PostgreSQL driver (Debian's libpq-dev; its header is
# under /usr/include/postgresql).
# libnftables: src/net's rules, applied in process (src/net/netns.c;
# Debian's libnftables-dev).
NET_LIBS      := -lnftables
KILND_LIBS    := -lmicrohttpd -ljansson -lsqlite3 -lpq -lnettle -lcurl -larchive $(NET_LIBS)
PQ_CFLAGS     := $(shell pkg-config --cflags libpq 2>/dev/null || echo -I/usr/include/postgresql)
# libcurl: the CLI's HTTP and HTTPS (Debian's libcurl4-openssl-dev).
CLI_LIBS      := -ljansson -lnettle -lcurl
BINS += $(BUILD)/kilnd $(BUILD)/kiln build/docs/api.md $(BUILD)/tests/unit_layers $(BUILD)/tests/unit_docs \
        $(patsubst %,$(BUILD)/tests/unit_%,$(UNIT_SH))

.PHONY: all guest host test test-full unit fuzz clean distclean templates layers web
all: $(BINS) build/kiln-init build/web/index.html

# ---- the web dashboard (web/, docs/dashboard.md) ---------------------------
# TypeScript bundled by esbuild into build/web/, where kilnd (--web-dir,
# default the web/ beside it) serves it. npm ci installs the locked
# dependencies into web/node_modules once (again when the lock changes).
WEB_SRC := $(wildcard web/src/*) web/index.html web/build.mjs
web: build/web/index.html
web/node_modules/.package-lock.json: web/package.json web/package-lock.json
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { \
		echo "make: the dashboard (web/) needs node and npm: run scripts/setup (Debian's nodejs and npm)" >&2; exit 1; }
	cd web && npm ci --no-audit --no-fund --loglevel=error
	@touch $@
build/web/index.html: $(WEB_SRC) web/node_modules/.package-lock.json
	node web/build.mjs build/web

# The code interpreter kilnd installs in guests (src/api/code.h).
$(BUILD)/gen/interp_py.c: src/guest/interp/kiln_interp.py scripts/embed-text
	@mkdir -p $(dir $@)
	scripts/embed-text interp_py $< $@

$(OBJ)/src/store/db_pg.o: CFLAGS += $(PQ_CFLAGS)
$(OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/kiln-vmm: $(call obj,$(VMM_SRC) $(COMMON_SRC) $(CLIENT_SRC))
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# (netpolicy.c is the policy's JSON form, for kilnd: kiln-net takes it parsed.)
$(BUILD)/kiln-net: $(call obj,src/tools/kiln-net.c $(filter-out src/net/netpolicy.c,$(wildcard src/net/*.c)) $(COMMON_SRC))
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(NET_LIBS)

$(BUILD)/kiln-disk: $(call obj,src/tools/kiln-disk.c src/vmm/overlay.c $(COMMON_SRC))
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/kilnd: $(call obj,$(KILND_SRC) $(CLIENT_SRC) $(COMMON_SRC))
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(KILND_LIBS)

$(BUILD)/kiln: $(call obj,$(CLI_SRC) $(COMMON_SRC))
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(CLI_LIBS)

# The API document travels with build/ into the emulated host, where a test
# compares it with the routes kilnd serves.
build/docs/api.md: docs/api.md
	@mkdir -p $(dir $@)
	cp $< $@

$(BUILD)/kiln-guest: $(call obj,src/client/kiln-guest.c $(CLIENT_SRC) $(COMMON_SRC))
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Unit tests link the common code and one component without its main():
# the agent's (unit_agent*, unit_proto*) the guest agent and the client,
# kilnd's (unit_kilnd_*) kilnd and the client, the others the VMM.
VMM_LIB_SRC := $(filter-out src/vmm/main.c,$(VMM_SRC))
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
AGENT_UNIT_BINS := $(filter $(BUILD)/tests/unit_agent% $(BUILD)/tests/unit_proto%,$(UNIT_BINS))
KILND_UNIT_BINS := $(filter $(BUILD)/tests/unit_kilnd_%,$(UNIT_BINS))
$(KILND_UNIT_BINS): $(BUILD)/tests/%: $(OBJ)/tests/unit/%.o $(call obj,$(KILND_LIB_SRC) $(CLIENT_SRC) $(COMMON_SRC))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(KILND_LIBS)
# The fork's own uid: kilnd's half and the VMM's (own_uid, its filter).
$(BUILD)/tests/unit_kilnd_fork_uid: $(call obj,src/vmm/own_uid.c src/vmm/jail.c)
$(AGENT_UNIT_BINS): $(BUILD)/tests/%: $(OBJ)/tests/unit/%.o $(call obj,$(COMMON_SRC) $(CLIENT_SRC) $(GUEST_LIB))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(filter-out $(AGENT_UNIT_BINS) $(KILND_UNIT_BINS),$(UNIT_BINS)): $(BUILD)/tests/%: $(OBJ)/tests/unit/%.o $(call obj,$(COMMON_SRC) $(CLIENT_SRC) $(VMM_LIB_SRC))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: $(OBJ)/tests/integration/%.o $(call obj,$(COMMON_SRC))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# kiln-init runs as PID 1 from the initramfs, where there is no libc: it is
# always static, hence never sanitized (ASan cannot link statically).
INIT_OBJ := $(patsubst %.c,build/obj-static/%.o,$(GUEST_SRC) $(PROTO_SRC))
build/obj-static/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -fsanitize%,$(CFLAGS)) -MMD -MP -c -o $@ $<
build/kiln-init: $(INIT_OBJ)
	$(CC) -static -o $@ $^

# For native tests under the sanitizers, a SAN build also has a dynamic,
# sanitized agent; the unit tests pick the kiln-init next to them.
ifeq ($(SAN),1)
all: $(BUILD)/kiln-init
$(BUILD)/kiln-init: $(call obj,$(GUEST_SRC) $(PROTO_SRC))
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
endif

# Guest-side test helpers (static, put into the test initramfs).
GUEST_TEST_SRC := $(wildcard tests/guest/*.c)
GUEST_TEST_BINS := $(patsubst tests/guest/%.c,build/tests/guest/%,$(GUEST_TEST_SRC))
build/tests/guest/%: tests/guest/%.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -fsanitize%,$(CFLAGS)) -static -o $@ $<

# The layering check (DESIGN.md "Layers"): a script over src/, run by the
# unit loop as build/tests/unit_layers, or alone with `make layers`.
$(BUILD)/tests/unit_layers: tests/unit/layers.sh
	@mkdir -p $(dir $@)
	printf '#!/bin/sh\nexec "%s/tests/unit/layers.sh" "%s/src"\n' "$(CURDIR)" "$(CURDIR)" > $@
	chmod +x $@
# The documents against the tree (tests/unit/docs.sh), with the unit tests.
$(BUILD)/tests/unit_docs: tests/unit/docs.sh
	@mkdir -p $(dir $@)
	printf '#!/bin/sh\nexec "%s/tests/unit/docs.sh" "%s"\n' "$(CURDIR)" "$(CURDIR)" > $@
	chmod +x $@

# Shell tests in the unit loop that run real servers on this machine, no
# VM: tests/unit/NAME.sh REPO BUILD as build/tests/unit_NAME. pg: the
# store on a throwaway PostgreSQL; cluster: hosts joining a cluster
# (PostgreSQL, kilnd and agents); keys: API keys' scopes, expiry and the
# audit log; billing: usage by the hour, billing and the credit;
# statements: monthly statements and what prints them (kilnd on SQLite);
# seed: build-rootfs-debian's checks of a seed image (no server at all);
# interp: the sandboxes' code interpreter (a network namespace, no VM).
# UNIT_SH (above) names them.
$(patsubst %,$(BUILD)/tests/unit_%,$(UNIT_SH)): $(BUILD)/tests/unit_%: tests/unit/%.sh
	@mkdir -p $(dir $@)
	printf '#!/bin/sh\nexec "%s/tests/unit/$*.sh" "%s" "%s"\n' "$(CURDIR)" "$(CURDIR)" "$(CURDIR)/$(BUILD)" > $@
	chmod +x $@

layers:
	@tests/unit/layers.sh src

# ---- guest artifacts ----------------------------------------------------
GUEST_MODULES = $(shell grep -v "^\#" images/guest-modules)
KERNEL := build/kernel/version

guest: build/guest/vmlinux build/guest/initramfs.cpio build/guest/rootfs-minimal.ext4 \
       build/tests/test-initramfs.cpio

$(KERNEL):
	images/fetch-kernel build/kernel

build/guest/vmlinux: $(KERNEL) images/extract-vmlinux
	@mkdir -p $(dir $@)
	images/extract-vmlinux build/kernel/boot/vmlinuz-$$(cat $(KERNEL)) $@

build/guest/initramfs.cpio: build/kiln-init $(KERNEL) images/build-initramfs images/resolve-modules images/guest-modules
	@mkdir -p $(dir $@)
	images/build-initramfs $@ build/kiln-init build/kernel $(GUEST_MODULES)

# The VMM tests' initramfs: busybox, the same modules, test helpers.
build/tests/test-initramfs.cpio: tests/guest/test-init $(GUEST_TEST_BINS) $(KERNEL) \
		images/build-initramfs images/resolve-modules images/guest-modules
	@mkdir -p $(dir $@)
	images/build-initramfs --busybox $(foreach b,$(GUEST_TEST_BINS),--file $(b):/bin/$(notdir $(b))) \
		$@ tests/guest/test-init build/kernel $(GUEST_MODULES)

build/guest/rootfs-minimal.ext4: images/build-rootfs-minimal
	@mkdir -p $(dir $@)
	images/build-rootfs-minimal $@

# The `base` template's root image (Debian via mmdebstrap, through this
# machine's apt sources): not part of `make guest`, as it downloads.
templates: build/guest/rootfs-minimal.ext4 build/guest/rootfs-base.ext4 \
	build/guest/rootfs-code-interpreter.ext4 build/guest/rootfs-postgres.ext4
build/guest/rootfs-base.ext4: images/build-rootfs-base
	@mkdir -p $(dir $@)
	images/build-rootfs-base $@
# The `postgres` template's (managed databases): base and PostgreSQL.
build/guest/rootfs-postgres.ext4: images/build-rootfs-postgres images/postgres-setup images/build-rootfs-base
	@mkdir -p $(dir $@)
	images/build-rootfs-postgres $@

# `code-interpreter`: base and Debian's numpy, pandas, matplotlib and
# nodejs (images/code-interpreter.packages: javascript contexts), and
# the code interpreter (src/guest/interp) at /usr/lib/kiln/kiln_interp.py,
# root's, with the modules its python contexts import at start beside it
# (images/code-interpreter.preload, as kiln_interp.preload), which the
# template's warm-up starts so that it runs in the snapshot
# (src/host/template.c); kilnd restarts that copy if it dies. The
# packages are one image, kept (rootfs-code-interpreter.pkgs), so that a
# change to the interpreter only copies it and puts the new file in.
# images/code-interpreter-setup makes matplotlib's font cache there.
build/guest/rootfs-code-interpreter.pkgs: images/build-rootfs-base images/code-interpreter.packages \
		images/code-interpreter-setup
	@mkdir -p $(dir $@)
	images/build-rootfs-base $@ 4G "$$(paste -sd, images/code-interpreter.packages)" kiln-code \
		images/code-interpreter-setup
build/guest/rootfs-code-interpreter.ext4: build/guest/rootfs-code-interpreter.pkgs \
		src/guest/interp/kiln_interp.py images/code-interpreter.preload
	cp --sparse=always $< $@.tmp
	printf '%s\n' 'mkdir /usr/lib/kiln' 'sif /usr/lib/kiln uid 0' 'sif /usr/lib/kiln gid 0' \
		'write src/guest/interp/kiln_interp.py /usr/lib/kiln/kiln_interp.py' \
		'sif /usr/lib/kiln/kiln_interp.py uid 0' 'sif /usr/lib/kiln/kiln_interp.py gid 0' \
		'sif /usr/lib/kiln/kiln_interp.py mode 0100644' \
		'write images/code-interpreter.preload /usr/lib/kiln/kiln_interp.preload' \
		'sif /usr/lib/kiln/kiln_interp.preload uid 0' 'sif /usr/lib/kiln/kiln_interp.preload gid 0' \
		'sif /usr/lib/kiln/kiln_interp.preload mode 0100644' | debugfs -w -f - $@.tmp >/dev/null
	e2fsck -fn $@.tmp >/dev/null
	mv $@.tmp $@

# ---- the emulated KVM host ----------------------------------------------
host: build/host/rootfs.ext4 build/host/initrd.cpio build/host/heartbeat build/host/kvm-hold

build/host/heartbeat build/host/kvm-hold: build/host/%: tests/host/%.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -o $@ $<

build/host/rootfs.ext4: $(KERNEL) tests/host/packages tests/host/build-rootfs
	tests/host/build-rootfs $@ build/kernel

build/host/initrd.cpio: $(KERNEL) tests/host/initrd-init images/build-initramfs images/resolve-modules
	@mkdir -p $(dir $@)
	images/build-initramfs --busybox $@ tests/host/initrd-init build/kernel \
		virtio_mmio virtio_blk

# ---- tests ----------------------------------------------------------------
test: all guest host templates
	@tests/run $(BUILD)

# Everything, also the long forms and the larger sizes (tests/integration/run).
test-full: all guest host templates
	@KILN_TEST_FULL=1 tests/run $(BUILD)

unit: all
	@tests/run --unit-only $(BUILD)

# libFuzzer over the frame decoder and the message parsers (agent and
# client side), for a fixed number of runs from a seed corpus.
FUZZ_CC   ?= clang-14
FUZZ_RUNS ?= 1000000
FUZZ_SRC  := tests/fuzz/fuzz_proto.c $(PROTO_SRC) src/client/decode.c src/guest/cmdline.c
build/fuzz/fuzz_proto: $(FUZZ_SRC) $(wildcard src/common/*.h src/client/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -std=gnu11 -g -O1 -D_GNU_SOURCE -Isrc -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=undefined -o $@ $(FUZZ_SRC)
fuzz: build/fuzz/fuzz_proto
	@rm -rf build/fuzz/corpus && mkdir -p build/fuzz/corpus
	@python3 tests/fuzz/seeds.py build/fuzz/corpus
	build/fuzz/fuzz_proto -runs=$(FUZZ_RUNS) -seed=1 -max_len=4096 -artifact_prefix=build/fuzz/ build/fuzz/corpus

clean:
	rm -rf build/obj build/obj-static build/san build/tests build/fuzz build/kiln-* build/web

distclean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
