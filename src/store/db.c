/*
 * db: helpers shared by every driver (see db.h).
 */
#include "store/db.h"

#include <stdlib.h>

int64_t dbv_int(const struct dbv *v)
{
	switch (v->type) {
	case DBV_INT: return v->i;
	case DBV_REAL: return (int64_t)v->d;
	case DBV_TEXT: return strtoll(v->s, NULL, 10);
	default: return 0;
	}
}

double dbv_real(const struct dbv *v)
{
	switch (v->type) {
	case DBV_INT: return (double)v->i;
	case DBV_REAL: return v->d;
	case DBV_TEXT: return strtod(v->s, NULL);
	default: return 0;
	}
}

const char *dbv_text(const struct dbv *v)
{
	return v->type == DBV_TEXT ? v->s : "";
}
