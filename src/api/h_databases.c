/*
 * h_databases: managed databases (docs/databases.md, ops/database.h),
 * turned into HTTP.
 *
 *   POST   /v1/databases                         make one (or restore a backup)
 *   GET    /v1/databases                         the workspace's
 *   GET    /v1/databases/{database}              by id or name
 *   PATCH  /v1/databases/{database}              its backup schedule
 *   DELETE /v1/databases/{database}
 *   POST   /v1/databases/{database}/reset-password
 *   POST   /v1/databases/{database}/backups      a backup now
 *   GET    /v1/databases/{database}/backups
 *
 * The password is in the answers of create and reset-password only.
 */
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "api/render.h"
#include "ops/database.h"
#include "common/err.h"

#include <errno.h>
#include <string.h>

static int reply_db(struct req *r, const struct ops_caller *c, int rc, const struct db_row *d,
		    const char *password, int status)
{
	if (rc < 0)
		return reply_errno(r, rc);
	json_t *j = render_database(c, d, password);
	return j ? reply_json(r, status, j) : reply_error(r, 500, "internal", "out of memory");
}

int h_db_create(struct req *r)
{
	struct ops_caller c;
	struct ops_quota q;
	req_caller_quota(r, &c, &q);
	struct db_row d;
	char pw[DB_PASSWORD_LEN + 1] = "";
	json_t *empty = r->json ? NULL : json_object();
	int rc = ops_db_create(&c, r->json ? r->json : empty, &d, pw);
	json_decref(empty);
	int answered = rc == -EDQUOT ? reply_limit(r, &q) : reply_db(r, &c, rc, &d, pw, 201);
	explicit_bzero(pw, sizeof pw);
	return answered;
}

struct list_ctx {
	const struct ops_caller *c;
	json_t *a;
};

static int list_one(void *ctx, const struct db_row *d)
{
	struct list_ctx *l = ctx;
	json_t *j = render_database(l->c, d, NULL);
	return j && json_array_append_new(l->a, j) == 0 ? 0 : errf(ENOMEM, "out of memory");
}

int h_db_list(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	struct list_ctx l = { &c, json_array() };
	if (!l.a)
		return reply_error(r, 500, "internal", "out of memory");
	int rc = ops_db_each(&c, list_one, &l);
	if (rc < 0) {
		json_decref(l.a);
		return reply_errno(r, rc);
	}
	return reply_json(r, 200, json_pack("{s:o}", "databases", l.a));
}

int h_db_get(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	struct db_row d;
	return reply_db(r, &c, ops_db_get(&c, r->params[0], &d), &d, NULL, 200);
}

int h_db_update(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	struct db_row d;
	json_t *empty = r->json ? NULL : json_object();
	int rc = ops_db_update(&c, r->params[0], r->json ? r->json : empty, &d);
	json_decref(empty);
	return reply_db(r, &c, rc, &d, NULL, 200);
}

int h_db_delete(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	int rc = ops_db_delete(&c, r->params[0]);
	return rc < 0 ? reply_errno(r, rc) : reply_empty(r, 204);
}

int h_db_reset_password(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	struct db_row d;
	char pw[DB_PASSWORD_LEN + 1] = "";
	int rc = ops_db_reset_password(&c, r->params[0], &d, pw);
	int answered = reply_db(r, &c, rc, &d, pw, 200);
	explicit_bzero(pw, sizeof pw);
	return answered;
}

int h_db_backup(struct req *r)
{
	struct ops_caller c;
	struct ops_quota q;
	req_caller_quota(r, &c, &q);
	struct db_backup_row b;
	int rc = ops_db_backup(&c, r->params[0], &b);
	if (rc == -EDQUOT)
		return reply_limit(r, &q);
	if (rc < 0)
		return reply_errno(r, rc);
	json_t *j = ops_db_backup_json(&b);
	return j ? reply_json(r, 201, j) : reply_error(r, 500, "internal", "out of memory");
}

int h_db_backups(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	json_t *a;
	int rc = ops_db_backups(&c, r->params[0], &a);
	return rc < 0 ? reply_errno(r, rc) : reply_json(r, 200, json_pack("{s:o}", "backups", a));
}
