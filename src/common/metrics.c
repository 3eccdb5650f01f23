#include "common/metrics.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const int statuses[] = { 101, 200, 201, 202, 204, 400, 401, 403, 404, 405, 409, 413,
				429, 500, 501, 502, 503, 504 };
#define NSTATUS (sizeof statuses / sizeof statuses[0])

/* The error codes kilnd answers with (http.c); anything else counts as "other". */
static const char *const codes[] = { "invalid_json", "invalid_request", "unauthorized",
	"forbidden", "not_found", "method_not_allowed", "conflict", "payload_too_large",
	"rate_limited", "internal", "not_implemented", "guest_error", "no_capacity",
	"timeout", "other" };
#define NCODES (sizeof codes / sizeof codes[0])

static const double buckets[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };
#define NBUCKETS (sizeof buckets / sizeof buckets[0])

struct metrics {
	pthread_mutex_t lock;
	uint64_t by_status[NSTATUS + 1];	/* last: other statuses */
	uint64_t by_code[NCODES];
	uint64_t create_bucket[NBUCKETS];	/* cumulative at render */
	uint64_t create_count, create_failed, start_retries;
	double create_sum;
};

struct metrics *metrics_new(void)
{
	struct metrics *m = calloc(1, sizeof *m);
	if (m)
		pthread_mutex_init(&m->lock, NULL);
	return m;
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->lock);
	free(m);
}

void metrics_http(struct metrics *m, int status, const char *error_code)
{
	size_t s = 0, c = NCODES - 1;
	while (s < NSTATUS && statuses[s] != status)
		s++;
	if (error_code)
		for (size_t i = 0; i < NCODES; i++)
			if (strcmp(codes[i], error_code) == 0) {
				c = i;
				break;
			}
	pthread_mutex_lock(&m->lock);
	m->by_status[s]++;
	if (error_code)
		m->by_code[c]++;
	pthread_mutex_unlock(&m->lock);
}

void metrics_start_retry(struct metrics *m)
{
	pthread_mutex_lock(&m->lock);
	m->start_retries++;
	pthread_mutex_unlock(&m->lock);
}

void metrics_create(struct metrics *m, double seconds, bool ok)
{
	pthread_mutex_lock(&m->lock);
	if (!ok) {
		m->create_failed++;
	} else {
		m->create_count++;
		m->create_sum += seconds;
		for (size_t i = 0; i < NBUCKETS; i++)
			if (seconds <= buckets[i]) {
				m->create_bucket[i]++;
				break;
			}
	}
	pthread_mutex_unlock(&m->lock);
}

void metrics_render(struct metrics *m, struct strbuf *b)
{
	pthread_mutex_lock(&m->lock);
	strbuf_printf(b, "# HELP kiln_http_requests_total HTTP requests answered, by status.\n"
		      "# TYPE kiln_http_requests_total counter\n");
	for (size_t i = 0; i <= NSTATUS; i++) {
		if (i < NSTATUS)
			strbuf_printf(b, "kiln_http_requests_total{status=\"%d\"} %llu\n", statuses[i],
				   (unsigned long long)m->by_status[i]);
		else
			strbuf_printf(b, "kiln_http_requests_total{status=\"other\"} %llu\n",
				   (unsigned long long)m->by_status[i]);
	}
	strbuf_printf(b, "# HELP kiln_errors_total Error responses, by error code.\n"
		      "# TYPE kiln_errors_total counter\n");
	for (size_t i = 0; i < NCODES; i++)
		strbuf_printf(b, "kiln_errors_total{code=\"%s\"} %llu\n", codes[i],
			   (unsigned long long)m->by_code[i]);
	strbuf_printf(b, "# HELP kiln_sandbox_create_seconds Time from a create request to the guest agent answering.\n"
		      "# TYPE kiln_sandbox_create_seconds histogram\n");
	uint64_t cum = 0;
	for (size_t i = 0; i < NBUCKETS; i++) {
		cum += m->create_bucket[i];
		strbuf_printf(b, "kiln_sandbox_create_seconds_bucket{le=\"%g\"} %llu\n", buckets[i],
			   (unsigned long long)cum);
	}
	strbuf_printf(b, "kiln_sandbox_create_seconds_bucket{le=\"+Inf\"} %llu\n",
		   (unsigned long long)m->create_count);
	strbuf_printf(b, "kiln_sandbox_create_seconds_sum %.6f\n", m->create_sum);
	strbuf_printf(b, "kiln_sandbox_create_seconds_count %llu\n", (unsigned long long)m->create_count);
	strbuf_printf(b, "# HELP kiln_sandbox_create_failures_total Creates that failed.\n"
		      "# TYPE kiln_sandbox_create_failures_total counter\n"
		      "kiln_sandbox_create_failures_total %llu\n", (unsigned long long)m->create_failed);
	strbuf_printf(b, "# HELP kiln_sandbox_start_retries_total Creates and forks made a second time because a new guest died before it was ready.\n"
		      "# TYPE kiln_sandbox_start_retries_total counter\n"
		      "kiln_sandbox_start_retries_total %llu\n", (unsigned long long)m->start_retries);
	pthread_mutex_unlock(&m->lock);
}
