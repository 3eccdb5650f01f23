/*
 * aml: just enough of an ACPI Machine Language encoder to describe kiln's
 * devices in the DSDT: scopes, devices, named integers, strings, EISA IDs,
 * packages and resource templates (ACPI 6.5, chapter 20).
 */
#ifndef KILN_VMM_AML_H
#define KILN_VMM_AML_H

#include "common/buf.h"
#include <stdint.h>

/* Wrap body in op + PkgLength (Scope, Device, Buffer, Package). */
void aml_package_op(struct buf *out, const uint8_t *op, size_t oplen, const struct buf *body);
void aml_scope(struct buf *out, const char *path, const struct buf *body);
void aml_device(struct buf *out, const char *seg, const struct buf *body);
/* Name(seg, value): value is already-encoded AML. */
void aml_name(struct buf *out, const char *seg, const struct buf *value);
void aml_name_int(struct buf *out, const char *seg, uint64_t v);
void aml_name_str(struct buf *out, const char *seg, const char *s);
void aml_name_eisaid(struct buf *out, const char *seg, const char *id);

void aml_integer(struct buf *out, uint64_t v);
void aml_string(struct buf *out, const char *s);
/* aml_resources: Buffer() holding descriptors plus the end tag. */
void aml_resources(struct buf *out, const struct buf *descriptors);

/* Resource descriptors, appended to a descriptor list. */
void aml_res_io(struct buf *d, uint16_t base, uint8_t len);
void aml_res_irq_noflags(struct buf *d, int irq);
void aml_res_memory32_fixed(struct buf *d, uint32_t base, uint32_t len);
void aml_res_interrupt(struct buf *d, uint32_t gsi, int edge);

#endif
