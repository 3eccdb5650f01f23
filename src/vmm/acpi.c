/*
 * acpi: the ACPI tables through which the guest finds its hardware. The
 * Debian kernel cannot take virtio-mmio devices from its command line, so
 * the DSDT announces each one as an LNRO0005 device with its MMIO window
 * and interrupt, as QEMU's microvm and Firecracker do. The FADT declares a
 * hardware-reduced platform (no legacy PIC/PIT timer checks, no PM1
 * blocks) with sleep and reset registers for power-off and reboot.
 *
 * Tables live in the reserved region at 0xe0000: RSDP first (where the
 * PVH start info points), then XSDT, FADT, MADT, DSDT.
 */
#include "vmm/aml.h"
#include "vmm/devices/serial.h"
#include "vmm/devices/virtio_mmio.h"
#include "vmm/vmm.h"
#include "common/strbuf.h"
#include "common/err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define OEM_ID       "KILN  "
#define OEM_TABLE_ID "KILNVMM "
#define CREATOR_ID   "KILN"

struct acpi_header {
	char signature[4];
	uint32_t length;
	uint8_t revision;
	uint8_t checksum;
	char oem_id[6];
	char oem_table_id[8];
	uint32_t oem_revision;
	char creator_id[4];
	uint32_t creator_revision;
} __attribute__((packed));

struct gas {
	uint8_t space_id;      /* 0 memory, 1 I/O port */
	uint8_t bit_width;
	uint8_t bit_offset;
	uint8_t access_size;   /* 1 = byte */
	uint64_t address;
} __attribute__((packed));

struct fadt {
	struct acpi_header h;
	uint32_t firmware_ctrl;
	uint32_t dsdt;
	uint8_t reserved0;
	uint8_t preferred_pm_profile;
	uint16_t sci_int;
	uint32_t smi_cmd;
	uint8_t acpi_enable, acpi_disable, s4bios_req, pstate_cnt;
	uint32_t pm1a_evt_blk, pm1b_evt_blk, pm1a_cnt_blk, pm1b_cnt_blk;
	uint32_t pm2_cnt_blk, pm_tmr_blk, gpe0_blk, gpe1_blk;
	uint8_t pm1_evt_len, pm1_cnt_len, pm2_cnt_len, pm_tmr_len;
	uint8_t gpe0_blk_len, gpe1_blk_len, gpe1_base, cst_cnt;
	uint16_t p_lvl2_lat, p_lvl3_lat, flush_size, flush_stride;
	uint8_t duty_offset, duty_width, day_alrm, mon_alrm, century;
	uint16_t iapc_boot_arch;
	uint8_t reserved1;
	uint32_t flags;
	struct gas reset_reg;
	uint8_t reset_value;
	uint16_t arm_boot_arch;
	uint8_t minor_version;
	uint64_t x_firmware_ctrl;
	uint64_t x_dsdt;
	struct gas x_pm1a_evt_blk, x_pm1b_evt_blk, x_pm1a_cnt_blk, x_pm1b_cnt_blk;
	struct gas x_pm2_cnt_blk, x_pm_tmr_blk, x_gpe0_blk, x_gpe1_blk;
	struct gas sleep_control_reg, sleep_status_reg;
	uint64_t hypervisor_vendor_id;
} __attribute__((packed));

_Static_assert(sizeof(struct fadt) == 276, "FADT is 276 bytes in ACPI 6.x");

#define FADT_F_PWR_BUTTON      (1u << 4)
#define FADT_F_SLP_BUTTON      (1u << 5)
#define FADT_F_RESET_REG_SUP   (1u << 10)
#define FADT_F_HW_REDUCED_ACPI (1u << 20)
#define IAPC_VGA_NOT_PRESENT   (1u << 2)
#define IAPC_MSI_NOT_SUPPORTED (1u << 3)
#define IAPC_CMOS_RTC_NOT_PRESENT (1u << 5)

static uint8_t checksum(const void *p, size_t n)
{
	uint8_t sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += ((const uint8_t *)p)[i];
	return (uint8_t)(0 - sum);
}

static void header(struct acpi_header *h, const char *sig, uint32_t len, uint8_t rev)
{
	memcpy(h->signature, sig, 4);
	h->length = len;
	h->revision = rev;
	memcpy(h->oem_id, OEM_ID, 6);
	memcpy(h->oem_table_id, OEM_TABLE_ID, 8);
	h->oem_revision = 1;
	memcpy(h->creator_id, CREATOR_ID, 4);
	h->creator_revision = 1;
}

/* finish: set the table's checksum once its body is complete. */
static void finish(struct strbuf *t)
{
	struct acpi_header *h = (struct acpi_header *)t->data;
	h->length = (uint32_t)t->len;
	h->checksum = 0;
	h->checksum = checksum(t->data, t->len);
}

static void build_dsdt(struct vm *vm, struct strbuf *t)
{
	struct acpi_header h = { 0 };
	header(&h, "DSDT", 0, 2);
	strbuf_append(t, &h, sizeof h);

	struct strbuf sb, dev, res, tmp;
	strbuf_init(&sb);
	strbuf_init(&dev);
	strbuf_init(&res);
	strbuf_init(&tmp);

	/* COM1 */
	aml_name_eisaid(&dev, "_HID", "PNP0501");
	aml_name_int(&dev, "_UID", 1);
	aml_res_io(&res, 0x3f8, 8);
	aml_res_irq_noflags(&res, GSI_SERIAL);
	aml_resources(&tmp, &res);
	aml_name(&dev, "_CRS", &tmp);
	aml_device(&sb, "COM1", &dev);

	/* pvpanic, so a guest panic is reported as one */
	strbuf_reset(&dev); strbuf_reset(&res); strbuf_reset(&tmp);
	aml_name_str(&dev, "_HID", "QEMU0001");
	aml_name_int(&dev, "_UID", 0);
	aml_res_io(&res, PVPANIC_PORT, 1);
	aml_resources(&tmp, &res);
	aml_name(&dev, "_CRS", &tmp);
	aml_device(&sb, "PEVT", &dev);

	/* virtio-mmio devices */
	for (int i = 0; i < vm->nvirtio; i++) {
		struct virtio_dev *d = vm->virtio[i];
		char name[5];
		snprintf(name, sizeof name, "V%03d", i % 1000);
		strbuf_reset(&dev); strbuf_reset(&res); strbuf_reset(&tmp);
		aml_name_str(&dev, "_HID", "LNRO0005");
		aml_name_int(&dev, "_UID", (uint64_t)i);
		aml_name_int(&dev, "_CCA", 1);
		aml_res_memory32_fixed(&res, (uint32_t)d->base, VIRTIO_MMIO_SIZE);
		aml_res_interrupt(&res, (uint32_t)d->gsi, !virtio_irq_level(d));
		aml_resources(&tmp, &res);
		aml_name(&dev, "_CRS", &tmp);
		aml_device(&sb, name, &dev);
	}
	aml_scope(t, "\\_SB_", &sb);

	/* \_S5: SLP_TYP 5, what acpi_pm.c recognizes as power-off. */
	strbuf_reset(&tmp);
	struct strbuf pkg;
	strbuf_init(&pkg);
	strbuf_putc(&pkg, 4);
	aml_integer(&pkg, 5);
	aml_integer(&pkg, 0);
	aml_integer(&pkg, 0);
	aml_integer(&pkg, 0);
	static const uint8_t package_op[] = { 0x12 };
	aml_package_op(&tmp, package_op, 1, &pkg);
	aml_name(t, "_S5_", &tmp);

	strbuf_free(&pkg);
	strbuf_free(&sb);
	strbuf_free(&dev);
	strbuf_free(&res);
	strbuf_free(&tmp);
	finish(t);
}

static void build_fadt(struct strbuf *t, uint64_t dsdt)
{
	struct fadt f = { 0 };
	header(&f.h, "FACP", sizeof f, 6);
	f.minor_version = 5;
	f.flags = FADT_F_HW_REDUCED_ACPI | FADT_F_PWR_BUTTON | FADT_F_SLP_BUTTON | FADT_F_RESET_REG_SUP;
	f.iapc_boot_arch = IAPC_VGA_NOT_PRESENT | IAPC_CMOS_RTC_NOT_PRESENT;
	f.reset_reg = (struct gas){ 1, 8, 0, 1, PORT_ACPI_RESET };
	f.reset_value = ACPI_RESET_VALUE;
	f.sleep_control_reg = (struct gas){ 1, 8, 0, 1, PORT_ACPI_SLEEP_CTL };
	f.sleep_status_reg = (struct gas){ 1, 8, 0, 1, PORT_ACPI_SLEEP_STS };
	f.x_dsdt = dsdt;
	memcpy(&f.hypervisor_vendor_id, "KILNVMM", 8);
	strbuf_append(t, &f, sizeof f);
	finish(t);
}

static void build_madt(struct vm *vm, struct strbuf *t)
{
	struct acpi_header h = { 0 };
	header(&h, "APIC", 0, 5);
	strbuf_append(t, &h, sizeof h);
	uint32_t lapic = LAPIC_ADDR, flags = 0;   /* no dual 8259 setup to mask */
	strbuf_append(t, &lapic, 4);
	strbuf_append(t, &flags, 4);
	for (int i = 0; i < vm->nvcpus; i++) {
		uint8_t e[8] = { 0, 8, (uint8_t)i, (uint8_t)i, 1, 0, 0, 0 };   /* enabled */
		strbuf_append(t, e, sizeof e);
	}
	uint8_t io[12] = { 1, 12, 0, 0 };                            /* IOAPIC id 0, GSI base 0 */
	uint32_t ioapic = IOAPIC_ADDR;
	memcpy(io + 4, &ioapic, 4);
	strbuf_append(t, io, sizeof io);
	finish(t);
}

int acpi_build(struct vm *vm)
{
	struct strbuf dsdt, fadt, madt, xsdt;
	strbuf_init(&dsdt);
	strbuf_init(&fadt);
	strbuf_init(&madt);
	strbuf_init(&xsdt);

	/* Addresses: RSDP (36 bytes) at the base, tables 64-byte aligned after. */
	uint64_t xsdt_addr = ACPI_BASE + 64;
	uint64_t fadt_addr = xsdt_addr + 64;            /* XSDT: 36 + 2 * 8 bytes */
	uint64_t madt_addr = fadt_addr + 320;
	uint64_t dsdt_addr = madt_addr + ((44 + 8 * MAX_VCPUS + 12 + 63) & ~63u);

	build_dsdt(vm, &dsdt);
	build_fadt(&fadt, dsdt_addr);
	build_madt(vm, &madt);
	struct acpi_header h = { 0 };
	header(&h, "XSDT", 0, 1);
	strbuf_append(&xsdt, &h, sizeof h);
	strbuf_append(&xsdt, &fadt_addr, 8);
	strbuf_append(&xsdt, &madt_addr, 8);
	finish(&xsdt);

	int rc = 0;
	if (strbuf_failed(&dsdt) || strbuf_failed(&fadt) || strbuf_failed(&madt) || strbuf_failed(&xsdt)) {
		rc = errf(ENOMEM, "out of memory building ACPI tables");
		goto out;
	}
	if (dsdt_addr + dsdt.len > ACPI_END) {
		rc = errf(E2BIG, "ACPI tables do not fit below 1 MiB");
		goto out;
	}
	struct {
		uint64_t addr;
		struct strbuf *b;
	} tables[] = { { xsdt_addr, &xsdt }, { fadt_addr, &fadt }, { madt_addr, &madt }, { dsdt_addr, &dsdt } };
	for (size_t i = 0; i < 4; i++)
		memcpy(gpa_ptr(&vm->mem, tables[i].addr, tables[i].b->len), tables[i].b->data, tables[i].b->len);

	struct {
		char signature[8];
		uint8_t checksum;
		char oem_id[6];
		uint8_t revision;
		uint32_t rsdt;
		uint32_t length;
		uint64_t xsdt;
		uint8_t ext_checksum;
		uint8_t reserved[3];
	} __attribute__((packed)) rsdp = { .revision = 2, .length = 36, .xsdt = xsdt_addr };
	memcpy(rsdp.signature, "RSD PTR ", 8);
	memcpy(rsdp.oem_id, OEM_ID, 6);
	rsdp.checksum = checksum(&rsdp, 20);
	rsdp.ext_checksum = checksum(&rsdp, 36);
	memcpy(gpa_ptr(&vm->mem, ACPI_BASE, sizeof rsdp), &rsdp, sizeof rsdp);
out:
	strbuf_free(&dsdt);
	strbuf_free(&fadt);
	strbuf_free(&madt);
	strbuf_free(&xsdt);
	return rc;
}
