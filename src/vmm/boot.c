/*
 * boot: load the ELF vmlinux and write what the PVH boot protocol hands the
 * kernel: hvm_start_info (command line, initrd as module 0, memory map and
 * the ACPI RSDP address). PVH enters the kernel in 32-bit protected mode
 * without paging, so no page tables or boot_params are needed here; the
 * kernel builds boot_params itself from hvm_start_info.
 *
 * Layout (guest-physical): GDT 0x500, start_info 0x6000, module list
 * 0x6040, memory map 0x7000, command line 0x20000, ACPI 0xe0000, kernel
 * at its ELF physical addresses (16 MiB for Debian's), initrd at the top
 * of low memory.
 */
#include "vmm/vmm.h"
#include "common/err.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XEN_ELFNOTE_PHYS32_ENTRY 18
#define HVM_START_MAGIC 0x336ec578

struct hvm_start_info {
	uint32_t magic, version, flags, nr_modules;
	uint64_t modlist_paddr, cmdline_paddr, rsdp_paddr, memmap_paddr;
	uint32_t memmap_entries, reserved;
};
struct hvm_modlist_entry {
	uint64_t paddr, size, cmdline_paddr, reserved;
};
struct hvm_memmap_entry {
	uint64_t addr, size;
	uint32_t type, reserved;
};

#define E820_RAM      1
#define E820_RESERVED 2

#define DEFAULT_CMDLINE "console=ttyS0 reboot=k panic=1 pci=off " \
	"i8042.noaux i8042.nomux i8042.dumbkbd 8250.nr_uarts=1 quiet"

static int read_full(int fd, void *dst, size_t len, off_t off, const char *path)
{
	uint8_t *p = dst;
	while (len) {
		ssize_t n = pread(fd, p, len, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errf_sys("%s: read", path);
		if (n == 0)
			return errf(EINVAL, "%s: file is truncated", path);
		p += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

/* find_pvh_entry: walk a PT_NOTE segment for Xen's PHYS32_ENTRY note. */
static int find_pvh_entry(int fd, const Elf64_Phdr *ph, const char *path, uint32_t *entry)
{
	if (ph->p_filesz > 1 << 20)
		return 0;
	uint8_t *notes = malloc(ph->p_filesz);
	if (!notes)
		return errf(ENOMEM, "out of memory");
	int rc = read_full(fd, notes, ph->p_filesz, (off_t)ph->p_offset, path);
	size_t off = 0;
	while (rc == 0 && off + sizeof(Elf64_Nhdr) <= ph->p_filesz) {
		Elf64_Nhdr nh;
		memcpy(&nh, notes + off, sizeof nh);
		size_t name_off = off + sizeof nh;
		size_t desc_off = name_off + ((nh.n_namesz + 3) & ~3u);
		size_t next = desc_off + ((nh.n_descsz + 3) & ~3u);
		if (next > ph->p_filesz || next <= off)
			break;
		if (nh.n_type == XEN_ELFNOTE_PHYS32_ENTRY && nh.n_namesz == 4 &&
		    memcmp(notes + name_off, "Xen", 4) == 0 &&
		    (nh.n_descsz == 4 || nh.n_descsz == 8)) {
			uint64_t e = 0;
			memcpy(&e, notes + desc_off, nh.n_descsz);
			*entry = (uint32_t)e;
			rc = 1;
			break;
		}
		off = next;
	}
	free(notes);
	return rc;
}

static int load_kernel(struct vm *vm, uint32_t *entry, uint64_t *kernel_end)
{
	char path[300];   /* "kernel PATH", for messages */
	snprintf(path, sizeof path, "kernel %s", vm->cfg->kernel);
	int fd = open(vm->cfg->kernel, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("%s", path);
	Elf64_Ehdr eh;
	int rc = read_full(fd, &eh, sizeof eh, 0, path);
	if (rc < 0)
		goto out;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_machine != EM_X86_64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    eh.e_phnum == 0 || eh.e_phnum > 64) {
		rc = errf(EINVAL, "%s is not an x86-64 ELF vmlinux (a bzImage? use images/extract-vmlinux)", path);
		goto out;
	}
	Elf64_Phdr ph[64];
	rc = read_full(fd, ph, eh.e_phnum * sizeof ph[0], (off_t)eh.e_phoff, path);
	if (rc < 0)
		goto out;

	bool found = false;
	*kernel_end = 0;
	for (int i = 0; i < eh.e_phnum; i++) {
		if (ph[i].p_type == PT_NOTE && !found) {
			rc = find_pvh_entry(fd, &ph[i], path, entry);
			if (rc < 0)
				goto out;
			found = rc == 1;
		}
		if (ph[i].p_type != PT_LOAD)
			continue;
		uint64_t pa = ph[i].p_paddr;
		if (ph[i].p_filesz > ph[i].p_memsz || pa < HIMEM_START) {
			rc = errf(EINVAL, "%s: bad segment at 0x%llx", path, (unsigned long long)pa);
			goto out;
		}
		uint8_t *dst = gpa_ptr(&vm->mem, pa, ph[i].p_memsz);
		if (!dst) {
			rc = errf(EINVAL, "%s does not fit in %llu MiB of guest memory",
				  path, (unsigned long long)vm->cfg->mem_mib);
			goto out;
		}
		rc = read_full(fd, dst, ph[i].p_filesz, (off_t)ph[i].p_offset, path);
		if (rc < 0)
			goto out;
		/* The rest (bss) is already zero: guest memory is fresh. */
		if (pa + ph[i].p_memsz > *kernel_end)
			*kernel_end = pa + ph[i].p_memsz;
	}
	rc = 0;
	if (!found)
		rc = errf(EINVAL, "%s has no PVH entry note (built without CONFIG_PVH?)", path);
out:
	close(fd);
	return rc;
}

static int load_initrd(struct vm *vm, uint64_t kernel_end, uint64_t *addr, uint64_t *size)
{
	char path[300];
	snprintf(path, sizeof path, "initrd %s", vm->cfg->initrd);
	int fd = open(vm->cfg->initrd, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("%s", path);
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st) < 0) {
		rc = errf_sys("%s", path);
		goto out;
	}
	*size = (uint64_t)st.st_size;
	if (*size == 0 || *size >= vm->mem.low_size) {
		rc = errf(EINVAL, "%s is %s", path, *size ? "larger than guest memory" : "empty");
		goto out;
	}
	/* At the top of low memory, page aligned, like Firecracker. */
	*addr = (vm->mem.low_size - *size) & ~0xfffULL;
	if (*addr < kernel_end) {
		rc = errf(EINVAL, "kernel and initrd do not fit in %llu MiB of guest memory",
			  (unsigned long long)vm->cfg->mem_mib);
		goto out;
	}
	rc = read_full(fd, gpa_ptr(&vm->mem, *addr, *size), *size, 0, path);
out:
	close(fd);
	return rc;
}

int boot_load(struct vm *vm, uint32_t *entry)
{
	uint64_t kernel_end, initrd_addr = 0, initrd_size = 0;
	int rc = load_kernel(vm, entry, &kernel_end);
	if (rc < 0)
		return rc;
	if (vm->cfg->initrd && (rc = load_initrd(vm, kernel_end, &initrd_addr, &initrd_size)) < 0)
		return rc;

	char *cmdline = gpa_ptr(&vm->mem, CMDLINE_ADDR, CMDLINE_MAX);
	int n = snprintf(cmdline, CMDLINE_MAX, "%s%s%s",
			 vm->cfg->cmdline ? vm->cfg->cmdline : DEFAULT_CMDLINE,
			 vm->cfg->cmdline_extra ? " " : "",
			 vm->cfg->cmdline_extra ? vm->cfg->cmdline_extra : "");
	if (n < 0 || n >= CMDLINE_MAX)
		return errf(E2BIG, "kernel command line is longer than %d bytes", CMDLINE_MAX - 1);

	struct hvm_memmap_entry map[4];
	uint32_t nmap = 0;
	map[nmap++] = (struct hvm_memmap_entry){ 0, LOW_RAM_END, E820_RAM, 0 };
	map[nmap++] = (struct hvm_memmap_entry){ LOW_RAM_END, HIMEM_START - LOW_RAM_END, E820_RESERVED, 0 };
	map[nmap++] = (struct hvm_memmap_entry){ HIMEM_START, vm->mem.low_size - HIMEM_START, E820_RAM, 0 };
	if (vm->mem.high_size)
		map[nmap++] = (struct hvm_memmap_entry){ MMIO_HOLE_END, vm->mem.high_size, E820_RAM, 0 };
	memcpy(gpa_ptr(&vm->mem, MEMMAP_ADDR, sizeof map), map, sizeof map);

	struct hvm_start_info si = {
		.magic = HVM_START_MAGIC,
		.version = 1,
		.cmdline_paddr = CMDLINE_ADDR,
		.rsdp_paddr = ACPI_BASE,
		.memmap_paddr = MEMMAP_ADDR,
		.memmap_entries = nmap,
	};
	if (initrd_size) {
		struct hvm_modlist_entry mod = { .paddr = initrd_addr, .size = initrd_size };
		memcpy(gpa_ptr(&vm->mem, MODLIST_ADDR, sizeof mod), &mod, sizeof mod);
		si.nr_modules = 1;
		si.modlist_paddr = MODLIST_ADDR;
	}
	memcpy(gpa_ptr(&vm->mem, START_INFO_ADDR, sizeof si), &si, sizeof si);
	return 0;
}
