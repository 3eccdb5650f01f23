/*
 * h_dashboard: the web dashboard's files (web/, bundled by `make` into
 * build/web/; kilnd --web-dir says where they are).
 *
 *   GET /            -> 302 /dashboard/
 *   GET /dashboard/  index.html, never cached (it names the bundles)
 *   GET /dashboard/NAME  a bundle; its name carries a hash of its content,
 *                    so it is cached for a year as immutable
 *
 * Every answer carries a strict Content-Security-Policy: scripts, styles,
 * fonts and connections only from kilnd itself (no inline script, no
 * eval, no CDN), no framing. Names are one path segment of
 * [A-Za-z0-9._-], not starting with a dot, opened without following
 * links: nothing outside the web directory is reachable.
 */
#include "api/api.h"
#include "api/handlers.h"
#include "api/http.h"
#include "api/reply_buf.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ASSET_MAX (16 << 20)

/* style-src allows inline styles: xterm.js sizes its rows with a <style>
 * element it writes at run time. Scripts stay strictly 'self'. */
const char dashboard_csp[] =
	"default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
	"img-src 'self' data:; font-src 'self'; connect-src 'self'; manifest-src 'self'; "
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

static const char *content_type(const char *name)
{
	static const char *const types[][2] = {
		{ ".html", "text/html; charset=utf-8" }, { ".js", "text/javascript; charset=utf-8" },
		{ ".css", "text/css; charset=utf-8" },	 { ".svg", "image/svg+xml" },
		{ ".png", "image/png" },		 { ".ico", "image/x-icon" },
		{ ".json", "application/json" },	 { ".map", "application/json" },
		{ ".woff2", "font/woff2" },
	};
	const char *dot = strrchr(name, '.');
	for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
		if (!strcmp(dot, types[i][0]))
			return types[i][1];
	return NULL;
}

static bool safe_name(const char *s)
{
	if (!*s || *s == '.' || strlen(s) > 128)
		return false;
	for (; *s; s++)
		if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') && !(*s >= '0' && *s <= '9') &&
		    *s != '.' && *s != '_' && *s != '-')
			return false;
	return true;
}

static int read_asset(const char *dir, const char *name, char **out, size_t *len)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return errf(ENOENT, "the dashboard is not installed (no %s: build it with make, or "
			    "give kilnd --web-dir)", dir);
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return errf(ENOENT, "no dashboard file %s", name);
	struct stat st;
	char *buf = NULL;
	int rc = 0;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > ASSET_MAX) {
		rc = errf(ENOENT, "no dashboard file %s", name);
		goto out;
	}
	buf = malloc(st.st_size ? st.st_size : 1);
	if (!buf) {
		rc = errf(ENOMEM, "out of memory");
		goto out;
	}
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = errf_sys("reading %s/%s", dir, name);
			goto out;
		}
		got += n;
	}
	*out = buf, *len = got, buf = NULL;
out:
	free(buf);
	close(fd);
	return rc;
}

int h_dashboard_root(struct req *r)
{
	static const char *const h[][2] = { { "Location", "/dashboard/" }, { NULL, NULL } };
	return reply_headers(r, 302, h);
}

int h_dashboard(struct req *r)
{
	const char *name = r->params[0][0] ? r->params[0] : "index.html";
	const char *type = content_type(name);
	if (!safe_name(name) || !type)
		return reply_error(r, 404, "not_found", "no dashboard file %s", name);
	char *body = NULL;
	size_t len = 0;
	int rc = read_asset(r->api->cfg->web_dir, name, &body, &len);
	if (rc < 0)
		return reply_errno(r, rc);
	bool page = !strcmp(name, "index.html");
	const char *const h[][2] = {
		{ "Content-Type", type },
		{ "Cache-Control", page ? "no-cache" : "public, max-age=31536000, immutable" },
		{ "Content-Security-Policy", dashboard_csp },
		{ "X-Content-Type-Options", "nosniff" },
		{ "X-Frame-Options", "DENY" },
		{ "Referrer-Policy", "no-referrer" },
		{ "Cross-Origin-Opener-Policy", "same-origin" },
		{ "Cross-Origin-Resource-Policy", "same-origin" },
		{ NULL, NULL },
	};
	return reply_buf(r, 200, h, body, len);
}
