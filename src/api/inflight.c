#include "api/inflight.h"
#include "store/store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 1024

struct slot {
	char key[ID_MAX];	/* "" : free */
	int n;
};

struct inflight {
	pthread_mutex_t lock;
	int cap;
	struct slot s[SLOTS];
};

struct inflight *inflight_new(int cap)
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

bool inflight_enter(struct inflight *t, const char *key, bool *counted)
{
	*counted = false;
	if (t->cap <= 0 || !key[0] || strlen(key) >= ID_MAX)
		return true;
	pthread_mutex_lock(&t->lock);
	struct slot *spare, *s = find(t, key, &spare);
	bool ok = true;
	if (s && s->n >= t->cap) {
		ok = false;
	} else if (s || (s = spare)) {
		if (!s->key[0])
			snprintf(s->key, sizeof s->key, "%s", key);
		s->n++;
		*counted = true;
	}
	pthread_mutex_unlock(&t->lock);
	return ok;
}

void inflight_leave(struct inflight *t, const char *key)
{
	pthread_mutex_lock(&t->lock);
	struct slot *spare, *s = find(t, key, &spare);
	if (s && --s->n <= 0) {
		s->key[0] = 0;
		s->n = 0;
	}
	pthread_mutex_unlock(&t->lock);
}

int inflight_count(struct inflight *t, const char *key)
{
	pthread_mutex_lock(&t->lock);
	struct slot *spare, *s = find(t, key, &spare);
	int n = s ? s->n : 0;
	pthread_mutex_unlock(&t->lock);
	return n;
}
