/*
 * Unit tests for the parts of kiln-vmm that need no KVM: guest address
 * checks, split-virtqueue parsing against hostile descriptor chains, the
 * AML encoder, and how a new VM's report is read.
 */
#include "vmm/aml.h"
#include "vmm/child.h"
#include "vmm/devices/virtio_mmio.h"
#include "vmm/vmm.h"
#include "test.h"

#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static void gpa_ptr_checks_bounds(void)
{
	struct guest_mem m;
	CHECK(guest_mem_alloc(&m, 64 << 20) == 0);
	CHECK(gpa_ptr(&m, 0, 4096) == m.host);
	CHECK(gpa_ptr(&m, (64 << 20) - 8, 8) != NULL);
	CHECK(gpa_ptr(&m, (64 << 20) - 8, 9) == NULL);
	CHECK(gpa_ptr(&m, 64 << 20, 1) == NULL);
	CHECK(gpa_ptr(&m, UINT64_MAX - 4, 8) == NULL);   /* wrap-around */
	CHECK(gpa_ptr(&m, 0x100000000ULL, 1) == NULL);   /* no high memory */
	CHECK(gpa_ptr(&m, 8, UINT64_MAX) == NULL);
	guest_mem_free(&m);

	/* 3.5 GiB: split around the MMIO hole (mapping is lazy, costs nothing). */
	CHECK(guest_mem_alloc(&m, 3584ULL << 20) == 0);
	CHECK(m.low_size == MMIO_HOLE && m.high_size == (512ULL << 20));
	CHECK(gpa_ptr(&m, MMIO_HOLE - 4, 4) != NULL);
	CHECK(gpa_ptr(&m, MMIO_HOLE - 4, 8) == NULL);    /* runs into the hole */
	CHECK(gpa_ptr(&m, MMIO_HOLE, 4) == NULL);
	CHECK(gpa_ptr(&m, MMIO_HOLE_END, 4) == m.host + MMIO_HOLE);
	CHECK(gpa_ptr(&m, MMIO_HOLE_END + (512ULL << 20) - 4, 8) == NULL);
	guest_mem_free(&m);
}

/* A queue of 8 entries laid out at fixed guest addresses. */
#define QN 8
#define DESC  0x1000
#define AVAIL 0x2000
#define USED  0x3000
#define DATA  0x10000

static struct vm vm;
static struct virtio_dev dev;
static const struct virtio_dev_ops ops = { .name = "test", .num_queues = 1, .queue_max = QN };

static struct virtq *setup_queue(void)
{
	static bool once;
	if (!once) {
		guest_mem_alloc(&vm.mem, 1 << 20);
		once = true;
	}
	memset(vm.mem.host, 0, 1 << 20);
	memset(&dev, 0, sizeof dev);
	dev.vm = &vm;
	dev.ops = &ops;
	dev.irq_fd = eventfd(0, EFD_NONBLOCK);
	dev.status = VIRTIO_STATUS_DRIVER_OK;
	struct virtq *q = &dev.q[0];
	q->num = QN;
	q->ready = true;
	q->desc = gpa_ptr(&vm.mem, DESC, 16 * QN);
	q->avail = gpa_ptr(&vm.mem, AVAIL, 6 + 2 * QN);
	q->used = gpa_ptr(&vm.mem, USED, 6 + 8 * QN);
	q->dev = &dev;
	return q;
}

static void put_desc(struct virtq *q, int i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	q->desc[i] = (struct virtq_desc){ addr, len, flags, next };
}

static void make_avail(struct virtq *q, uint16_t head)
{
	uint16_t idx = q->avail[1];
	((uint16_t *)q->avail)[2 + idx % QN] = head;
	((uint16_t *)q->avail)[1] = (uint16_t)(idx + 1);
}

static void virtq_pops_valid_chain(void)
{
	struct virtq *q = setup_queue();
	struct virtq_chain c;
	CHECK(virtq_pop(&dev, q, &c) == 0);                 /* empty */
	put_desc(q, 3, DATA, 16, VIRTQ_DESC_F_NEXT, 5);
	put_desc(q, 5, DATA + 100, 512, VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_WRITE, 6);
	put_desc(q, 6, DATA + 1000, 1, VIRTQ_DESC_F_WRITE, 0);
	make_avail(q, 3);
	CHECK(virtq_pop(&dev, q, &c) == 1);
	CHECK(c.head == 3 && c.n_out == 1 && c.n_in == 2);
	CHECK(c.out_len == 16 && c.in_len == 513);
	CHECK(c.iov[1].iov_base == vm.mem.host + DATA + 100);
	virtq_push(&dev, q, c.head, 513);
	uint32_t id, len;
	memcpy(&id, (void *)(q->used + 4), 4);
	memcpy(&len, (void *)(q->used + 8), 4);
	CHECK(id == 3 && len == 513 && ((uint16_t *)q->used)[1] == 1);
	CHECK(virtq_pop(&dev, q, &c) == 0);
	CHECK(!(dev.status & VIRTIO_STATUS_NEEDS_RESET));
}

static void expect_broken(struct virtq *q, const char *what)
{
	struct virtq_chain c;
	int rc = virtq_pop(&dev, q, &c);
	if (rc != -1)
		printf("  %s: virtq_pop returned %d\n", what, rc);
	CHECK(rc == -1);
	CHECK(dev.status & VIRTIO_STATUS_NEEDS_RESET);
	CHECK(virtq_pop(&dev, q, &c) == 0);                 /* the queue stays stopped */
}

static void virtq_rejects_hostile_chains(void)
{
	struct virtq *q = setup_queue();
	put_desc(q, 0, DATA, 16, VIRTQ_DESC_F_NEXT, 1);     /* 0 -> 1 -> 0 -> ... */
	put_desc(q, 1, DATA, 16, VIRTQ_DESC_F_NEXT, 0);
	make_avail(q, 0);
	expect_broken(q, "loop");

	q = setup_queue();
	put_desc(q, 0, DATA, 16, VIRTQ_DESC_F_NEXT, 200);   /* next out of range */
	make_avail(q, 0);
	expect_broken(q, "next index");

	q = setup_queue();
	make_avail(q, 9);                                   /* head out of range */
	expect_broken(q, "head index");

	q = setup_queue();
	put_desc(q, 0, (1 << 20) - 8, 16, 0, 0);            /* past guest memory */
	make_avail(q, 0);
	expect_broken(q, "address");

	q = setup_queue();
	put_desc(q, 0, UINT64_MAX - 8, 16, 0, 0);           /* wrapping address */
	make_avail(q, 0);
	expect_broken(q, "wrapping address");

	q = setup_queue();
	put_desc(q, 0, DATA, 16, VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_WRITE, 1);
	put_desc(q, 1, DATA, 16, 0, 0);                     /* readable after writable */
	make_avail(q, 0);
	expect_broken(q, "order");

	q = setup_queue();
	put_desc(q, 0, DATA, 16, VIRTQ_DESC_F_INDIRECT, 0);
	make_avail(q, 0);
	expect_broken(q, "indirect");

	q = setup_queue();
	((uint16_t *)q->avail)[1] = QN + 1;                 /* more entries than the ring */
	expect_broken(q, "avail index");
}

static void aml_encodes(void)
{
	struct strbuf b, body;
	strbuf_init(&b);
	strbuf_init(&body);
	aml_integer(&b, 0);
	aml_integer(&b, 1);
	aml_integer(&b, 0x2a);
	aml_integer(&b, 0x1234);
	aml_integer(&b, 0xd0000000);
	static const uint8_t ints[] = { 0x00, 0x01, 0x0a, 0x2a, 0x0b, 0x34, 0x12,
					0x0c, 0x00, 0x00, 0x00, 0xd0 };
	CHECK(b.len == sizeof ints && memcmp(b.data, ints, sizeof ints) == 0);

	/* EISAID("PNP0501") is 0x0105D041, stored little-endian. */
	strbuf_reset(&b);
	aml_name_eisaid(&b, "_HID", "PNP0501");
	static const uint8_t hid[] = { 0x08, '_', 'H', 'I', 'D', 0x0c, 0x41, 0xd0, 0x05, 0x01 };
	CHECK(b.len == sizeof hid && memcmp(b.data, hid, sizeof hid) == 0);

	/* PkgLength: one byte below 63, two bytes (0x4N) up to 4095. */
	strbuf_reset(&b);
	for (int i = 0; i < 10; i++)
		strbuf_putc(&body, 'x');
	aml_device(&b, "DEV0", &body);
	CHECK((uint8_t)b.data[0] == 0x5b && (uint8_t)b.data[1] == 0x82 && b.data[2] == 1 + 4 + 10);
	strbuf_reset(&b);
	strbuf_reset(&body);
	for (int i = 0; i < 100; i++)
		strbuf_putc(&body, 'x');
	aml_device(&b, "DEV0", &body);
	size_t total = 2 + 4 + 100;   /* pkglength bytes + name + body */
	CHECK(((uint8_t)b.data[2] >> 6) == 1 && ((uint8_t)b.data[2] & 0x0f) == (total & 0x0f) &&
	      (uint8_t)b.data[3] == (total >> 4));
	CHECK(b.len == 2 + total);
	strbuf_free(&b);
	strbuf_free(&body);
}

/* child_parse: the intermediate's "pid" and the VM's "ready" share one
 * pipe and may come in either order (20-snapshot's six spawns at once
 * in a one-CPU host had "ready" first); either way it waits for both,
 * and the buffer it was given still parses the same when more comes. */
static int parse(const char *text, bool eof, struct child_result *r)
{
	char buf[CHILD_REPORT_MAX];
	snprintf(buf, sizeof buf, "%s", text);
	return child_parse(buf, strlen(buf), eof, r);
}

static void child_report_in_any_order(void)
{
	struct child_result r;
	CHECK(parse("pid 41\nready 7 12.5\n", false, &r) == 1 && r.pid == 41 && r.ready_ms == 12.5);
	CHECK(parse("ready 7 12.5\npid 41\n", false, &r) == 1 && r.pid == 41 && r.ready_ms == 12.5);
	CHECK(parse("ready 7 12.5\n", false, &r) == 0);                 /* its pid still to come */
	CHECK(parse("ready 7 12.5\npid 4", false, &r) == 0);            /* half a line */
	CHECK(parse("pid 41\n", false, &r) == 0 && r.pid == 41);
	CHECK(parse("pid 41\nready 7 1", false, &r) == 0);
	CHECK(parse("ready 7 12.5\n", true, &r) < 0);                   /* the pid never came */
	CHECK(parse("pid 41\n", true, &r) < 0 && r.pid == 41);           /* ended before ready */
	CHECK(parse("pid 41\nerror no memory\n", false, &r) < 0 && r.pid == 41);
	CHECK(parse("died triple fault\n", false, &r) < 0);
	CHECK(parse("pid 41\nhello\n", false, &r) < 0);                 /* anything else */

	/* Fed as it arrives, into one buffer, ready first. */
	char buf[CHILD_REPORT_MAX] = "ready 9 3.25\n";
	size_t n = strlen(buf);
	CHECK(child_parse(buf, n, false, &r) == 0);
	memcpy(buf + n, "pid 77\n", 7);
	n += 7;
	CHECK(child_parse(buf, n, false, &r) == 1 && r.pid == 77 && r.ready_ms == 3.25);
}

int main(void)
{
	int failures = 0;
	RUN(gpa_ptr_checks_bounds);
	RUN(virtq_pops_valid_chain);
	RUN(virtq_rejects_hostile_chains);
	RUN(aml_encodes);
	RUN(child_report_in_any_order);
	return failures ? 1 : 0;
}
