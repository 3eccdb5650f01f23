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
UNIT_SRC   := $(wildcard tests/unit/*.c)
ITEST_SRC  := $(wildcard tests/integration/*.c)

obj = $(patsubst %.c,$(OBJ)/%.o,$(1))

BINS := $(if $(VMM_SRC),$(BUILD)/kiln-vmm) $(BUILD)/kiln-disk $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC)) \
        $(patsubst tests/integration/%.c,$(BUILD)/tests/%,$(ITEST_SRC))

.PHONY: all guest host test unit fuzz clean distclean
all: $(BINS) build/kiln-init

$(OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/kiln-vmm: $(call obj,$(VMM_SRC) $(COMMON_SRC))
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/kiln-disk: $(call obj,src/tools/kiln-disk.c src/vmm/overlay.c $(COMMON_SRC))
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Unit tests link the VMM's objects (without its main) and the common code.
VMM_LIB_SRC := $(filter-out src/vmm/main.c,$(VMM_SRC))
$(BUILD)/tests/%: $(OBJ)/tests/unit/%.o $(call obj,$(COMMON_SRC) $(VMM_LIB_SRC))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: $(OBJ)/tests/integration/%.o $(call obj,$(COMMON_SRC))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# kiln-init runs as PID 1 from the initramfs, where there is no libc: it is
# always static, hence never sanitized (ASan cannot link statically).
INIT_OBJ := $(patsubst %.c,build/obj-static/%.o,$(GUEST_SRC))
build/obj-static/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -fsanitize%,$(CFLAGS)) -MMD -MP -c -o $@ $<
build/kiln-init: $(INIT_OBJ)
	$(CC) -static -o $@ $^

# Guest-side test helpers (static, put into the test initramfs).
GUEST_TEST_SRC := $(wildcard tests/guest/*.c)
GUEST_TEST_BINS := $(patsubst tests/guest/%.c,build/tests/guest/%,$(GUEST_TEST_SRC))
build/tests/guest/%: tests/guest/%.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -fsanitize%,$(CFLAGS)) -static -o $@ $<

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

# ---- the emulated KVM host ----------------------------------------------
host: build/host/rootfs.ext4 build/host/initrd.cpio

build/host/rootfs.ext4: $(KERNEL) tests/host/packages tests/host/build-rootfs
	tests/host/build-rootfs $@ build/kernel

build/host/initrd.cpio: $(KERNEL) tests/host/initrd-init images/build-initramfs images/resolve-modules
	@mkdir -p $(dir $@)
	images/build-initramfs --busybox $@ tests/host/initrd-init build/kernel \
		virtio_mmio virtio_blk

# ---- tests ----------------------------------------------------------------
test: all guest host
	@tests/run $(BUILD)

unit: all
	@tests/run --unit-only $(BUILD)

clean:
	rm -rf build/obj build/obj-static build/san build/tests build/kiln-*

distclean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
