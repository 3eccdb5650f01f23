/*
 * h_system: health, metrics, templates.
 */
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "common/metrics.h"
#include "api/render.h"
#include "ops/template.h"
#include "common/err.h"
#include "common/strbuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

int h_healthz(struct req *r)
{
	struct usage u;
	/* The store answering is what "healthy" means for the API. */
	if (store_usage_sum(r->api->store, "", &u) < 0)
		return reply_error(r, 503, "no_capacity", "the store does not answer: %s", errmsg());
	return reply_json(r, 200, json_pack("{s:s,s:s}", "status", "ok", "role", r->api->cfg->role));
}

int h_metrics(struct req *r)
{
	struct strbuf b;
	strbuf_init(&b);
	metrics_render(r->api->metrics, &b);
	/* This process's CPU, whatever its role: what an API replica costs
	 * per request shows here (bench/cluster). */
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		strbuf_printf(&b, "# HELP process_cpu_seconds_total CPU time of this kilnd, user and system.\n"
				  "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.6f\n",
			      ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
				      (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
	hostif_metrics(r->api->hostif, &b);
	if (strbuf_failed(&b)) {
		strbuf_free(&b);
		return reply_error(r, 500, "internal", "out of memory");
	}
	return reply_text(r, 200, "text/plain; version=0.0.4", b.data, b.len);
}

static int add_template(void *ctx, const struct hostif_template *t)
{
	json_t *j = render_template(t);
	return j ? json_array_append_new(ctx, j) : -1;
}

int templates_list(struct hostif *hi, const char *ws, json_t **out)
{
	json_t *a = json_array();
	if (!a || ops_templates_each(hi, ws, add_template, a) < 0) {
		json_decref(a);
		return errf(ENOMEM, "out of memory");
	}
	*out = json_pack("{s:o}", "templates", a);
	return 0;
}

int h_templates(struct req *r)
{
	json_t *j;
	if (templates_list(r->api->hostif, r->workspace, &j) < 0)
		return reply_error(r, 500, "internal", "%s", errmsg());
	return reply_json(r, 200, j);
}
