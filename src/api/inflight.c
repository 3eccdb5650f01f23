#include "api/inflight.h"
#include "store/store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 1024

struct slot {
	char key[ID_MAX];	/* "" : free */
	long long n;
};

struct inflight {
	pthread_mutex_t lock;
	long long cap;
	struct slot s[SLOTS];
};

struct inflight *inflight_new(long long cap)
{
	struct inflight *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	t->cap = cap;
	return t;
}

void inflight_free(struct inflight *t)
{
	if (!t)
		return;
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static struct slot *find(struct inflight *t, const char *key, struct slot **free_slot)
{
	*free_slot = NULL;
	for (int i = 0; i < SLOTS; i++) {
		struct slot *s = &t->s[i];
		if (!s->key[0]) {
			if (!*free_slot)
				*free_slot = s;
		} else if (strcmp(s->key, key) == 0) {
			return s;
		}
	}
	return NULL;
}

long long inflight_take(struct inflight *t, const char *key, long long n, bool *counted)
{
	*counted = false;
	if (t->cap <= 0 || !key[0] || strlen(key) >= ID_MAX || n <= 0)
		return n;
	pthread_mutex_lock(&t->lock);
	struct slot *spare, *s = find(t, key, &spare);
	long long got = n;
	if (!s && !spare) {
		got = n;		/* the table is full: uncounted */
	} else {
		if (!s) {
			s = spare;
			snprintf(s->key, sizeof s->key, "%s", key);
			s->n = 0;
		}
		got = t->cap - s->n < n ? t->cap - s->n : n;
		if (got < 0)
			got = 0;
		s->n += got;
		*counted = true;
		if (!s->n)
			s->key[0] = 0;	/* took nothing into a new slot */
	}
	pthread_mutex_unlock(&t->lock);
	return got;
}

void inflight_give(struct inflight *t, const char *key, long long n)
{
	if (n <= 0)
		return;
	pthread_mutex_lock(&t->lock);
	struct slot *spare, *s = find(t, key, &spare);
	if (s && (s->n -= n) <= 0) {
		s->key[0] = 0;
		s->n = 0;
	}
	pthread_mutex_unlock(&t->lock);
}

bool inflight_enter(struct inflight *t, const char *key, bool *counted)
{
	if (inflight_take(t, key, 1, counted) == 1)
		return true;
	*counted = false;	/* at the cap: nothing was taken */
	return false;
}

void inflight_leave(struct inflight *t, const char *key)
{
	inflight_give(t, key, 1);
}

long long inflight_count(struct inflight *t, const char *key)
{
	pthread_mutex_lock(&t->lock);
	struct slot *spare, *s = find(t, key, &spare);
	long long n = s ? s->n : 0;
	pthread_mutex_unlock(&t->lock);
	return n;
}
