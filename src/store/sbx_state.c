#include "store/sbx_state.h"
#include "common/err.h"

#include <errno.h>
#include <string.h>

static const char *const names[SBX_NSTATES] = {
	[SBX_CREATING] = "creating",
	[SBX_RUNNING] = "running",
	[SBX_HIBERNATED] = "hibernated",
	[SBX_FAILED] = "failed",
	[SBX_DELETING] = "deleting",
	[SBX_DELETED] = "deleted",
	[SBX_LOST] = "lost",
	[SBX_PAUSED] = "paused",
};

/* legal[from] has bit `to` set for each move allowed (sbx_state.h). */
#define TO(s) (1u << (s))
static const unsigned legal[SBX_NSTATES] = {
	[SBX_CREATING] = TO(SBX_RUNNING) | TO(SBX_DELETED),
	[SBX_RUNNING] = TO(SBX_PAUSED) | TO(SBX_HIBERNATED) | TO(SBX_FAILED) | TO(SBX_DELETING),
	[SBX_PAUSED] = TO(SBX_RUNNING) | TO(SBX_HIBERNATED) | TO(SBX_FAILED) | TO(SBX_DELETING),
	[SBX_HIBERNATED] = TO(SBX_RUNNING) | TO(SBX_FAILED) | TO(SBX_DELETING),
	[SBX_FAILED] = TO(SBX_RUNNING) | TO(SBX_DELETING),	/* a persistent one, booted again */
	[SBX_DELETING] = TO(SBX_DELETED),
	[SBX_DELETED] = 0,
	[SBX_LOST] = 0,		/* a view, not a state a host moves through */
};

static bool valid(enum sbx_state s)
{
	return (unsigned)s < SBX_NSTATES;
}

const char *sbx_state_name(enum sbx_state s)
{
	return valid(s) ? names[s] : "invalid";
}

int sbx_state_parse(const char *name, enum sbx_state *out)
{
	for (int s = 0; s < SBX_NSTATES; s++)
		if (name && strcmp(name, names[s]) == 0) {
			*out = (enum sbx_state)s;
			return 0;
		}
	return errf(EINVAL, "unknown sandbox state '%.32s'", name ? name : "");
}

bool sbx_state_legal(enum sbx_state from, enum sbx_state to)
{
	return valid(from) && valid(to) && (legal[from] & TO(to));
}

int sbx_state_move(enum sbx_state *state, enum sbx_state to)
{
	if (!sbx_state_legal(*state, to))
		return errf(EBUSY, "cannot go from %s to %s", sbx_state_name(*state),
			    sbx_state_name(to));
	*state = to;
	return 0;
}
