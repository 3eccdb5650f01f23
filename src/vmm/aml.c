#include "vmm/aml.h"

#include <string.h>

static void pkglength(struct strbuf *out, size_t body_len)
{
	/* PkgLength counts itself: 1 to 4 bytes (ACPI 6.5 §20.2.4). */
	size_t total;
	if (body_len + 1 < 0x40) {
		strbuf_putc(out, (char)(body_len + 1));
		return;
	}
	if (body_len + 2 < 0x1000) {
		total = body_len + 2;
		strbuf_putc(out, (char)(0x40 | (total & 0xf)));
		strbuf_putc(out, (char)(total >> 4));
		return;
	}
	if (body_len + 3 < 0x100000) {
		total = body_len + 3;
		strbuf_putc(out, (char)(0x80 | (total & 0xf)));
		strbuf_putc(out, (char)((total >> 4) & 0xff));
		strbuf_putc(out, (char)(total >> 12));
		return;
	}
	total = body_len + 4;
	strbuf_putc(out, (char)(0xc0 | (total & 0xf)));
	strbuf_putc(out, (char)((total >> 4) & 0xff));
	strbuf_putc(out, (char)((total >> 12) & 0xff));
	strbuf_putc(out, (char)(total >> 20));
}

void aml_package_op(struct strbuf *out, const uint8_t *op, size_t oplen, const struct strbuf *body)
{
	strbuf_append(out, op, oplen);
	pkglength(out, body->len);
	strbuf_append(out, body->data, body->len);
}

/* A NameSeg is 4 characters, padded with '_'. */
static void name_seg(struct strbuf *out, const char *seg)
{
	char s[4] = { '_', '_', '_', '_' };
	for (int i = 0; i < 4 && seg[i]; i++)
		s[i] = seg[i];
	strbuf_append(out, s, 4);
}

void aml_scope(struct strbuf *out, const char *path, const struct strbuf *body)
{
	struct strbuf b;
	strbuf_init(&b);
	if (path[0] == '\\') {
		strbuf_putc(&b, '\\');
		path++;
	}
	name_seg(&b, path);
	strbuf_append(&b, body->data, body->len);
	static const uint8_t op[] = { 0x10 };
	aml_package_op(out, op, 1, &b);
	strbuf_free(&b);
}

void aml_device(struct strbuf *out, const char *seg, const struct strbuf *body)
{
	struct strbuf b;
	strbuf_init(&b);
	name_seg(&b, seg);
	strbuf_append(&b, body->data, body->len);
	static const uint8_t op[] = { 0x5b, 0x82 };
	aml_package_op(out, op, 2, &b);
	strbuf_free(&b);
}

void aml_integer(struct strbuf *out, uint64_t v)
{
	if (v == 0) {
		strbuf_putc(out, 0x00);          /* ZeroOp */
	} else if (v == 1) {
		strbuf_putc(out, 0x01);          /* OneOp */
	} else if (v <= 0xff) {
		strbuf_putc(out, 0x0a);
		strbuf_putc(out, (char)v);
	} else if (v <= 0xffff) {
		strbuf_putc(out, 0x0b);
		uint16_t w = (uint16_t)v;
		strbuf_append(out, &w, 2);
	} else if (v <= 0xffffffff) {
		strbuf_putc(out, 0x0c);
		uint32_t d = (uint32_t)v;
		strbuf_append(out, &d, 4);
	} else {
		strbuf_putc(out, 0x0e);
		strbuf_append(out, &v, 8);
	}
}

void aml_string(struct strbuf *out, const char *s)
{
	strbuf_putc(out, 0x0d);
	strbuf_append(out, s, strlen(s) + 1);
}

void aml_name(struct strbuf *out, const char *seg, const struct strbuf *value)
{
	strbuf_putc(out, 0x08);
	name_seg(out, seg);
	strbuf_append(out, value->data, value->len);
}

void aml_name_int(struct strbuf *out, const char *seg, uint64_t v)
{
	strbuf_putc(out, 0x08);
	name_seg(out, seg);
	aml_integer(out, v);
}

void aml_name_str(struct strbuf *out, const char *seg, const char *s)
{
	strbuf_putc(out, 0x08);
	name_seg(out, seg);
	aml_string(out, s);
}

static unsigned hexval(char c)
{
	return (unsigned)(c >= 'A' ? c - 'A' + 10 : c - '0') & 0xf;
}

void aml_name_eisaid(struct strbuf *out, const char *seg, const char *id)
{
	/* "PNP0501": three 5-bit letters and four hex digits, stored big-endian. */
	uint32_t v = ((uint32_t)(id[0] - 0x40) & 0x1f) << 26 | ((uint32_t)(id[1] - 0x40) & 0x1f) << 21 |
		     ((uint32_t)(id[2] - 0x40) & 0x1f) << 16 | hexval(id[3]) << 12 |
		     hexval(id[4]) << 8 | hexval(id[5]) << 4 | hexval(id[6]);
	v = __builtin_bswap32(v);
	strbuf_putc(out, 0x08);
	name_seg(out, seg);
	strbuf_putc(out, 0x0c);
	strbuf_append(out, &v, 4);
}

void aml_resources(struct strbuf *out, const struct strbuf *descriptors)
{
	struct strbuf b;
	strbuf_init(&b);
	aml_integer(&b, descriptors->len + 2);
	strbuf_append(&b, descriptors->data, descriptors->len);
	strbuf_putc(&b, 0x79);                   /* End tag; checksum 0 = "ignore" */
	strbuf_putc(&b, 0x00);
	static const uint8_t op[] = { 0x11 };
	aml_package_op(out, op, 1, &b);
	strbuf_free(&b);
}

void aml_res_io(struct strbuf *d, uint16_t base, uint8_t len)
{
	uint8_t r[8] = { 0x47, 0x01, (uint8_t)base, (uint8_t)(base >> 8),
			 (uint8_t)base, (uint8_t)(base >> 8), 0x01, len };
	strbuf_append(d, r, sizeof r);
}

void aml_res_irq_noflags(struct strbuf *d, int irq)
{
	uint16_t mask = (uint16_t)(1u << irq);
	uint8_t r[3] = { 0x22, (uint8_t)mask, (uint8_t)(mask >> 8) };
	strbuf_append(d, r, sizeof r);
}

void aml_res_memory32_fixed(struct strbuf *d, uint32_t base, uint32_t len)
{
	uint8_t r[12] = { 0x86, 0x09, 0x00, 0x01 };   /* read-write */
	memcpy(r + 4, &base, 4);
	memcpy(r + 8, &len, 4);
	strbuf_append(d, r, sizeof r);
}

void aml_res_interrupt(struct strbuf *d, uint32_t gsi, int edge)
{
	/* Extended interrupt: consumer, active-high, exclusive, one GSI. */
	uint8_t r[9] = { 0x89, 0x06, 0x00, (uint8_t)(0x01 | (edge ? 0x02 : 0)), 0x01 };
	memcpy(r + 5, &gsi, 4);
	strbuf_append(d, r, sizeof r);
}
