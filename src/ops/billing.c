#include "ops/billing.h"
#include "common/err.h"

#include <errno.h>
#include <time.h>

int price_parse(const char *usd, const char *what, int64_t *micro)
{
	int64_t whole = 0, frac = 0;
	int digits = 0, fdigits = 0;
	const char *s = usd;
	for (; *s >= '0' && *s <= '9'; s++, digits++)
		if ((whole = whole * 10 + (*s - '0')) > 1000000)
			break;
	if (*s == '.')
		for (s++; *s >= '0' && *s <= '9' && fdigits < 7; s++, fdigits++)
			frac = frac * 10 + (*s - '0');
	if (*s || digits == 0 || whole > 1000000 || fdigits > 6)
		return errf(EINVAL, "%s '%.32s': a price in dollars like 0.054 (at most 6 decimals, "
			    "at most 1000000)", what, usd);
	for (int i = fdigits; i < 6; i++)
		frac *= 10;
	*micro = whole * 1000000 + frac;
	return 0;
}

/* n * price / per, to the nearest whole (n, price >= 0), without overflow. */
static int64_t priced(int64_t n, int64_t price, int64_t per)
{
	if (n <= 0 || price <= 0)
		return 0;
	__int128 v = (__int128)n * price + per / 2;
	return (int64_t)(v / per);
}

int64_t cost_cpu(const struct prices *p, int64_t cpu_us)
{
	return priced(cpu_us, p->vcpu_hour, 3600LL * 1000000);
}

int64_t cost_mem(const struct prices *p, int64_t mem_mib_s)
{
	return priced(mem_mib_s, p->gib_hour, 3600LL * 1024);
}

void month_bounds(int64_t ms, int64_t *start, int64_t *end)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	tm.tm_mday = 1;
	tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
	*start = (int64_t)timegm(&tm) * 1000;
	tm.tm_mon += 1;		/* timegm carries December into January */
	*end = (int64_t)timegm(&tm) * 1000;
}

int64_t day_start(int64_t ms)
{
	return ms / 86400000 * 86400000;
}
