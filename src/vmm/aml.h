/*
 * aml: just enough of an ACPI Machine Language encoder to describe kiln's
 * devices in the DSDT: scopes, devices, named integers, strings, EISA IDs,
 * packages and resource templates (ACPI 6.5, chapter 20).
 */
#ifndef KILN_VMM_AML_H
#define KILN_VMM_AML_H

#include "common/strbuf.h"
#include <stdint.h>

/* Wrap body in op + PkgLength (Scope, Device, Buffer, Package). */
void aml_package_op(struct strbuf *out, const uint8_t *op, size_t oplen, const struct strbuf *body);
void aml_scope(struct strbuf *out, const char *path, const struct strbuf *body);
void aml_device(struct strbuf *out, const char *seg, const struct strbuf *body);
/* Name(seg, value): value is already-encoded AML. */
void aml_name(struct strbuf *out, const char *seg, const struct strbuf *value);
void aml_name_int(struct strbuf *out, const char *seg, uint64_t v);
void aml_name_str(struct strbuf *out, const char *seg, const char *s);
void aml_name_eisaid(struct strbuf *out, const char *seg, const char *id);

void aml_integer(struct strbuf *out, uint64_t v);
void aml_string(struct strbuf *out, const char *s);
/* aml_resources: Buffer() holding descriptors plus the end tag. */
void aml_resources(struct strbuf *out, const struct strbuf *descriptors);

/* Resource descriptors, appended to a descriptor list. */
void aml_res_io(struct strbuf *d, uint16_t base, uint8_t len);
void aml_res_irq_noflags(struct strbuf *d, int irq);
void aml_res_memory32_fixed(struct strbuf *d, uint32_t base, uint32_t len);
void aml_res_interrupt(struct strbuf *d, uint32_t gsi, int edge);

#endif
