/*
 * kilnd: the kiln sandbox service.
 *
 *   kilnd [serve] [options]                  run the service (both roles)
 *   kilnd keys create [--workspace W] [--name N] [--scope full|read] [--expires SECONDS]
 *                                             print a new API key
 *   kilnd keys list | keys revoke ID|PREFIX
 *   kilnd workspace plan NAME PLAN [LIMITS] | workspace show NAME
 *   kilnd admin create [--name N] | admin list | admin revoke ID|PREFIX
 *   kilnd template build NAME [--image F | --oci REF | --dockerfile DIR] [--vcpus N] [--memory MIB]
 *                        [--no-snapshot] [--restart]
 *   kilnd template list
 *   kilnd cluster token|hosts ...             the cluster's records (kilnd/cluster.h)
 *   kilnd routes                              the HTTP routes, one a line
 *
 * Options (all commands): --data DIR (default /var/lib/kiln), --verbose.
 * See usage() for the service's limits.
 */
#include "host/dns.h"
#include "host/host.h"
#include "host/template.h"
#include "host/tbuild.h"
#include "host/template_build.h"
#include "hostif/hostif_local.h"
#include "hostif/hostif_remote.h"
#include "api/api.h"
#include "api/event_log.h"
#include "api/cluster.h"
#include "api/http.h"
#include "api/audit.h"
#include "api/auth.h"
#include "api/keys.h"
#include "common/metrics.h"
#include "api/inflight.h"
#include "proxy/dbport.h"
#include "proxy/preview.h"
#include "api/ratelimit.h"
#include "api/window.h"
#include "api/routes.h"
#include "store/store.h"
#include "ops/app.h"
#include "ops/database.h"
#include "ops/credit.h"
#include "ops/ops.h"
#include "ops/plan.h"
#include "ops/validate.h"
#include "common/err.h"
#include "kilnd/cluster.h"
#include "kilnd/config.h"
#include "common/log.h"
#include "net/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage_text[] =
	"usage: kilnd [serve] [options]\n"
	"       kilnd keys create [--workspace NAME] [--name NAME] [--scope full|read]\n"
	"                         [--expires SECONDS]\n"
	"       kilnd keys list\n"
	"       kilnd keys revoke KEY-ID|PREFIX\n"
	"       kilnd workspace plan NAME PLAN ['{\"LIMIT\": N, ...}']\n"
	"       kilnd workspace show NAME\n"
	"       kilnd admin create [--name NAME]   an operator credential, for /v1/admin\n"
	"       kilnd admin list\n"
	"       kilnd admin revoke ID|PREFIX\n"
	"       kilnd template build NAME [--image FILE | --oci PATH[:TAG]] [--disk MIB] [--vcpus N] [--memory MIB]\n"
	"                            [--start CMD [--ready-port N] [--ready-timeout S]] [--no-snapshot] [--restart]\n"
	"       kilnd template build NAME --dockerfile DIR [--file F] [--build-arg NAME=VALUE ...]\n"
	"                            [--max-context MIB] [--disk MIB] [--build-net none|internet|CIDR,...]\n"
	"                            [same options]  (docs/templates.md)\n"
	"       kilnd template list\n"
	"       kilnd cluster token create [--expires SECONDS] [--uses N|any]\n"
	"       kilnd cluster token list | revoke ID|PREFIX\n"
	"       kilnd cluster hosts [list] | cordon|uncordon|drain|revoke HOST\n"
	"       kilnd routes\n"
	"\n"
	"options:\n"
	"  --data DIR            state, templates and sandboxes (default /var/lib/kiln;\n"
	"                        at most 48 characters: Unix socket paths live below it)\n"
	"  --listen HOST:PORT    the HTTP API (default 127.0.0.1:7070)\n"
	"  --tls-cert FILE       serve HTTPS with this PEM certificate (chain)...\n"
	"  --tls-key FILE        ...and this PEM private key (default: plain HTTP)\n"
	"  --role ROLE           all: both roles in one process (the default); agent: join\n"
	"                        the cluster at --api, heartbeat to it and serve it only\n"
	"                        the host protocol; api: the API alone, its sandboxes on the\n"
	"                        cluster's hosts (needs --store postgresql://...; no KVM)\n"
	"                        (docs/cluster.md)\n"
	"  --api URL             agent: the cluster's API endpoint (http:// or https://)\n"
	"  --join-token T        agent: a token from `kilnd cluster token create` (the\n"
	"                        first start; the credential it buys is kept in DATA)\n"
	"  --api-ca FILE         agent: PEM CA of an https --api with a private certificate\n"
	"  --advertise URL       agent: the URL the API reaches this host at (default\n"
	"                        http://LISTEN)\n"
	"  --offer-vcpus N       agent: vCPUs placement may count on (default: the machine's)\n"
	"  --offer-memory MIB    agent: guest memory placement may put here (default: RAM)\n"
	"  --orphan-grace S      agent: a sandbox here that no API claims (its API died\n"
	"                        creating it) is deleted once ready this long (default 30)\n"
	"  --placement P         api: spread (the host with most memory free; default) or\n"
	"                        pack (the fullest host that fits)\n"
	"  --hosts-ca FILE       api: PEM CA of hosts that advertise https:// URLs\n"
	"  --preview-key FILE    the 32 bytes that sign preview links (mode 600; default\n"
	"                        DATA/preview.key, made at first start); a cluster's API\n"
	"                        replicas share one, so a link one signs works on all\n"
	"  --store URL           sqlite:PATH (default sqlite:DATA/kilnd.db), or PostgreSQL:\n"
	"                        postgresql://USER[:PASSWORD]@HOST[:PORT]/DB[?pool=N&...]\n"
	"                        (N connections, default 4; docs/kilnd.md \"Store\")\n"
	"  --bin DIR             where kiln-vmm, kiln-disk and guest/ are (default: kilnd's)\n"
	"  --web-dir DIR         the dashboard's files, served at /dashboard/ (default BIN/web)\n"
	"  --max-sandboxes N     live sandboxes on this host (default 256)\n"
	"  --max-memory MIB      guest memory of running sandboxes (default 3 x RAM: it\n"
	"                        is shared copy-on-write with the template)\n"
	"  --max-creates N       creates in flight at once (default 8)\n"
	"  --create-wait MS      how long a create waits for a slot before 503 (default 30000)\n"
	"  --default-ttl S       idle timeout of a sandbox that sets none (default 600; 0: none)\n"
	"  --rate N[/BURST]      requests a second per workspace (default 200/400; 0: none)\n"
	"  --anon-rate N[/BURST] requests a second per client address that shows no valid\n"
	"                        key: public ports, refused keys (default 50/100; 0: none)\n"
	"  --max-inflight N      requests one workspace may have under way (default 128; 0: no cap)\n"
	"  --max-uploads N       file uploads one workspace may have under way (default 8)\n"
	"  --max-tunnels N       WebSockets (PTYs, proxied ports) one workspace may have\n"
	"                        open at once (default 64)\n"
	"  --max-exec-buffer MIB exec output one workspace's execs may hold in memory at\n"
	"                        once, beyond it truncated (default 256; 0: no cap)\n"
	"  --max-exec-output MIB one exec's output kept per stream, beyond it truncated\n"
	"                        (default 16)\n"
	"  --max-body BYTES      JSON bodies (default 1 MiB)\n"
	"  --max-file BYTES      file uploads and downloads (default 256 MiB)\n"
	"  --sample-ms MS        accounting period (default 5000)\n"
	"  --boot-timeout MS     time for a guest agent to answer (default 120000)\n"
	"  --mcp-origins LIST    browser Origins allowed on the MCP endpoints besides\n"
	"                        loopback ones, comma-separated (default: none)\n"
	"  --domain NAME         also route requests for Host PORT-ID.NAME to the\n"
	"                        exposed port PORT of sandbox ID (default: none)\n"
	"  --no-net              no network for sandboxes (hosts without nftables)\n"
	"  --net-pool N          sandbox networks kept ready (default 4; 0: made per create)\n"
	"  --pool N              per template, up to N sandboxes spawned and paused ahead of\n"
	"                        creates (default 0: none; docs/kilnd.md \"The pool\")\n"
	"  --dns LIST            guests' nameservers, comma-separated IPv4 addresses (default:\n"
	"                        the host's non-loopback ones, read at each create)\n"
	"  --net-range CIDR      host-side addresses of sandbox networks, a /30 each\n"
	"                        (default 10.200.0.0/16)\n"
	"  --no-jail             run VMMs unjailed: no cgroup, uid or mount namespace\n"
	"                        (debugging only)\n"
	"  --jail-uid N          first uid and gid of jailed VMMs (default 900000)\n"
	"  --cgroup DIR          parent of the sandboxes' cgroups (default /sys/fs/cgroup/kiln)\n"
	"  --vmm-overhead MIB    a VMM's memory limit over twice its guest's memory\n"
	"                        (default 96)\n"
	"  --vmm-pids N          a VMM's pids limit (default 64)\n"
	"  --reserve-disk MIB    free space on the data directory's filesystem that\n"
	"                        sandboxes never take: creates are refused and sandbox\n"
	"                        disks stop growing below it (default 256)\n"
	"  --plans FILE          the operator's plans: {\"PLAN\": {\"LIMIT\": N, ...}, ...}, over\n"
	"                        the shipped free, pro, team, enterprise (docs/billing.md)\n"
	"  --default-plan NAME   the plan of workspaces without one (default enterprise:\n"
	"                        no limits)\n"
	"  --plan-window S       the window of creates_per_hour (default 3600; shorter\n"
	"                        for tests)\n"
	"  --price-vcpu-hour USD what an active vCPU-hour costs (default 0.054)\n"
	"  --price-gib-hour USD  what a working-set GiB-hour costs (default 0.0162)\n"
	"  --audit-days N        keep the audit log N days (default 90; 0: for ever)\n"
	"  --db-backup-min S     the shortest scheduled-backup interval of a database (default 300 s)\n"
	"  --db-external-bind IP the address databases' external ports listen on (default\n"
	"                        127.0.0.1: this machine only; 0.0.0.0 for every network)\n"
	"  --db-external-host H  the host name their external URLs give (default the bind\n"
	"                        address)\n"
	"  --db-external-ports LO-HI  the ports handed out (default 54320-54419)\n"
	"  --db-external-conns N a database's external connections at a time (default 32)\n"
	"  --verbose             debug log lines\n";

enum {
	O_DATA = 256, O_LISTEN, O_ROLE, O_STORE, O_BIN, O_MAX_SBX, O_MAX_MEM, O_MAX_CREATES,
	O_CREATE_WAIT, O_TTL, O_RATE, O_ANON_RATE, O_MAX_INFLIGHT, O_MAX_UPLOADS, O_MAX_TUNNELS, O_MAX_EXEC_BUFFER, O_MAX_EXEC_OUTPUT, O_MAX_BODY, O_MAX_FILE, O_SAMPLE, O_BOOT, O_VERBOSE, O_MCP_ORIGINS, O_TLS_CERT, O_TLS_KEY,
	O_DOMAIN, O_WEB_DIR,
	O_WORKSPACE, O_NAME, O_IMAGE, O_NO_SNAPSHOT, O_RESTART, O_HELP,
	O_OCI, O_VCPUS, O_MEMORY, O_START, O_READY_PORT, O_READY_TIMEOUT,
	O_DOCKERFILE, O_DF_FILE, O_BUILD_ARG, O_MAX_CONTEXT, O_DISK, O_BUILD_NET, O_JOB,
	O_NO_NET, O_NET_POOL, O_POOL, O_DNS, O_NET_RANGE, O_NO_JAIL, O_JAIL_UID, O_CGROUP, O_VMM_OVERHEAD, O_VMM_PIDS, O_RESERVE_DISK,
	O_PLANS, O_DEFAULT_PLAN, O_PLAN_WINDOW, O_PRICE_VCPU, O_PRICE_GIB,
	O_API, O_JOIN_TOKEN, O_API_CA, O_ADVERTISE, O_EXPIRES, O_USES,
	O_OFFER_VCPUS, O_OFFER_MEMORY, O_ORPHAN_GRACE, O_PLACEMENT, O_HOSTS_CA, O_PREVIEW_KEY,
	O_SCOPE, O_AUDIT_DAYS, O_DB_BACKUP_MIN, O_DB_EXT_BIND, O_DB_EXT_HOST, O_DB_EXT_PORTS, O_DB_EXT_CONNS,
};

static const struct option options[] = {
	{ "data", required_argument, 0, O_DATA },
	{ "listen", required_argument, 0, O_LISTEN },
	{ "role", required_argument, 0, O_ROLE },
	{ "api", required_argument, 0, O_API },
	{ "join-token", required_argument, 0, O_JOIN_TOKEN },
	{ "api-ca", required_argument, 0, O_API_CA },
	{ "advertise", required_argument, 0, O_ADVERTISE },
	{ "offer-vcpus", required_argument, 0, O_OFFER_VCPUS },
	{ "offer-memory", required_argument, 0, O_OFFER_MEMORY },
	{ "orphan-grace", required_argument, 0, O_ORPHAN_GRACE },
	{ "placement", required_argument, 0, O_PLACEMENT },
	{ "hosts-ca", required_argument, 0, O_HOSTS_CA },
	{ "preview-key", required_argument, 0, O_PREVIEW_KEY },
	{ "expires", required_argument, 0, O_EXPIRES },
	{ "scope", required_argument, 0, O_SCOPE },
	{ "uses", required_argument, 0, O_USES },
	{ "store", required_argument, 0, O_STORE },
	{ "bin", required_argument, 0, O_BIN },
	{ "max-sandboxes", required_argument, 0, O_MAX_SBX },
	{ "max-memory", required_argument, 0, O_MAX_MEM },
	{ "max-creates", required_argument, 0, O_MAX_CREATES },
	{ "create-wait", required_argument, 0, O_CREATE_WAIT },
	{ "default-ttl", required_argument, 0, O_TTL },
	{ "rate", required_argument, 0, O_RATE },
	{ "anon-rate", required_argument, 0, O_ANON_RATE },
	{ "max-inflight", required_argument, 0, O_MAX_INFLIGHT },
	{ "max-uploads", required_argument, 0, O_MAX_UPLOADS },
	{ "max-tunnels", required_argument, 0, O_MAX_TUNNELS },
	{ "max-exec-buffer", required_argument, 0, O_MAX_EXEC_BUFFER },
	{ "max-exec-output", required_argument, 0, O_MAX_EXEC_OUTPUT },
	{ "max-body", required_argument, 0, O_MAX_BODY },
	{ "max-file", required_argument, 0, O_MAX_FILE },
	{ "sample-ms", required_argument, 0, O_SAMPLE },
	{ "boot-timeout", required_argument, 0, O_BOOT },
	{ "verbose", no_argument, 0, O_VERBOSE },
	{ "mcp-origins", required_argument, 0, O_MCP_ORIGINS },
	{ "tls-cert", required_argument, 0, O_TLS_CERT },
	{ "tls-key", required_argument, 0, O_TLS_KEY },
	{ "domain", required_argument, 0, O_DOMAIN },
	{ "web-dir", required_argument, 0, O_WEB_DIR },
	{ "workspace", required_argument, 0, O_WORKSPACE },
	{ "name", required_argument, 0, O_NAME },
	{ "image", required_argument, 0, O_IMAGE },
	{ "oci", required_argument, 0, O_OCI },
	{ "dockerfile", required_argument, 0, O_DOCKERFILE },
	{ "file", required_argument, 0, O_DF_FILE },
	{ "build-arg", required_argument, 0, O_BUILD_ARG },
	{ "max-context", required_argument, 0, O_MAX_CONTEXT },
	{ "disk", required_argument, 0, O_DISK },
	{ "build-net", required_argument, 0, O_BUILD_NET },
	{ "job", required_argument, 0, O_JOB },
	{ "start", required_argument, 0, O_START },
	{ "ready-port", required_argument, 0, O_READY_PORT },
	{ "ready-timeout", required_argument, 0, O_READY_TIMEOUT },
	{ "vcpus", required_argument, 0, O_VCPUS },
	{ "memory", required_argument, 0, O_MEMORY },
	{ "no-snapshot", no_argument, 0, O_NO_SNAPSHOT },
	{ "restart", no_argument, 0, O_RESTART },
	{ "help", no_argument, 0, O_HELP },
	{ "no-net", no_argument, 0, O_NO_NET },
	{ "net-pool", required_argument, 0, O_NET_POOL },
	{ "pool", required_argument, 0, O_POOL },
	{ "dns", required_argument, 0, O_DNS },
	{ "net-range", required_argument, 0, O_NET_RANGE },
	{ "no-jail", no_argument, 0, O_NO_JAIL },
	{ "jail-uid", required_argument, 0, O_JAIL_UID },
	{ "cgroup", required_argument, 0, O_CGROUP },
	{ "vmm-overhead", required_argument, 0, O_VMM_OVERHEAD },
	{ "vmm-pids", required_argument, 0, O_VMM_PIDS },
	{ "reserve-disk", required_argument, 0, O_RESERVE_DISK },
	{ "plans", required_argument, 0, O_PLANS },
	{ "default-plan", required_argument, 0, O_DEFAULT_PLAN },
	{ "plan-window", required_argument, 0, O_PLAN_WINDOW },
	{ "price-vcpu-hour", required_argument, 0, O_PRICE_VCPU },
	{ "price-gib-hour", required_argument, 0, O_PRICE_GIB },
	{ "audit-days", required_argument, 0, O_AUDIT_DAYS },
	{ "db-backup-min", required_argument, 0, O_DB_BACKUP_MIN },
	{ "db-external-bind", required_argument, 0, O_DB_EXT_BIND },
	{ "db-external-host", required_argument, 0, O_DB_EXT_HOST },
	{ "db-external-ports", required_argument, 0, O_DB_EXT_PORTS },
	{ "db-external-conns", required_argument, 0, O_DB_EXT_CONNS },
	{ 0 },
};

struct cmdline {
	struct config cfg;
	struct host_config host;	/* the host agent's part of cfg */
	struct api_config api;		/* the API's part of cfg */
	const char *workspace, *name, *image, *oci;
	const char *scope, *expires;	/* keys create; --expires: cluster token create too */
	int vcpus, memory_mib;		/* template build; 0: the template's */
	const char *start;		/* template build --start */
	const char *dockerfile, *df_file;	/* template build --dockerfile DIR [--file F] */
	const char *build_args[65];	/* --build-arg NAME=VALUE, NULL-ended */
	int nbuild_args;
	long long max_context_mib;
	long long disk_mib;		/* template build --disk: the root's size (--dockerfile, --oci, --image) */
	const char *build_net;		/* template build --build-net: the RUN steps' network */
	const char *job;		/* template build --job FILE: a build through the API (tbuild.h) */
	int ready_port, ready_timeout;
	bool no_snapshot, restart;
	struct plans plans;		/* what workspaces may start */
	const char *plans_file, *default_plan;
	const char *api_url, *join_token, *api_ca, *advertise;	/* --role agent */
	int64_t offer_vcpus, offer_memory_mib;	/* --role agent: 0: the machine's */
	int64_t orphan_grace_s;			/* --role agent: 0: the default */
	const char *placement, *hosts_ca;	/* --role api */
	const char *preview_key;		/* --preview-key */
	int audit_days;			/* audit log retention; 0: for ever */
	struct cluster_opts cluster;	/* kilnd cluster token create */
};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("kilnd: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

static long long number(const char *s, const char *opt, long long min, long long max)
{
	char *end;
	errno = 0;
	long long n = strtoll(s, &end, 10);
	if (errno || !*s || *end || n < min || n > max)
		die("%s wants a number from %lld to %lld, not '%s'", opt, min, max, s);
	return n;
}

/* "N" or "N/BURST" (BURST defaults to 2N). */
static void rate_arg(char *arg, const char *opt, int *rate, int *burst)
{
	char *slash = strchr(arg, '/');
	if (slash)
		*slash = 0;
	char bopt[64];
	snprintf(bopt, sizeof bopt, "%s burst", opt);
	*rate = (int)number(arg, opt, 0, 1000000);
	*burst = slash ? (int)number(slash + 1, bopt, 1, 1000000) : 2 * *rate;
}

static void set_str(char *dst, size_t cap, const char *src, const char *opt)
{
	if (strlen(src) >= cap)
		die("%s is too long (at most %zu characters)", opt, cap - 1);
	memcpy(dst, src, strlen(src) + 1);
}

static const char *plan_names(const struct plans *p);

static void parse(int argc, char **argv, struct cmdline *c)
{
	config_defaults(&c->cfg);
	plans_init(&c->plans);
	c->audit_days = 90;
	int opt;
	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		struct config *g = &c->cfg;
		switch (opt) {
		case O_DATA: set_str(g->data_dir, sizeof g->data_dir, optarg, "--data"); break;
		case O_LISTEN: set_str(g->listen, sizeof g->listen, optarg, "--listen"); break;
		case O_ROLE: set_str(g->role, sizeof g->role, optarg, "--role"); break;
		case O_STORE: set_str(g->store, sizeof g->store, optarg, "--store"); break;
		case O_BIN: set_str(g->bin_dir, sizeof g->bin_dir, optarg, "--bin"); break;
		case O_MAX_SBX: g->max_sandboxes = (int)number(optarg, "--max-sandboxes", 1, 100000); break;
		case O_MAX_MEM: g->max_memory_mib = number(optarg, "--max-memory", 64, 1LL << 40); break;
		case O_MAX_CREATES: g->max_creates = (int)number(optarg, "--max-creates", 1, 1024); break;
		case O_CREATE_WAIT: g->create_wait_ms = (int)number(optarg, "--create-wait", 0, 600000); break;
		case O_TTL: g->default_ttl = number(optarg, "--default-ttl", 0, g->max_ttl); break;
		case O_RATE:
			rate_arg(optarg, "--rate", &g->rate_per_sec, &g->rate_burst);
			break;
		case O_ANON_RATE:
			rate_arg(optarg, "--anon-rate", &g->anon_rate_per_sec, &g->anon_rate_burst);
			break;
		case O_MAX_INFLIGHT: g->max_inflight = (int)number(optarg, "--max-inflight", 0, 100000); break;
		case O_MAX_UPLOADS: g->max_uploads = (int)number(optarg, "--max-uploads", 0, 100000); break;
		case O_MAX_TUNNELS: g->max_tunnels = (int)number(optarg, "--max-tunnels", 0, 100000); break;
		case O_MAX_EXEC_BUFFER:
			g->max_exec_buffer = number(optarg, "--max-exec-buffer", 0, 1 << 20) << 20;
			break;
		case O_MAX_EXEC_OUTPUT:
			g->max_exec_output = (uint64_t)number(optarg, "--max-exec-output", 1, 1024) << 20;
			break;
		case O_MAX_BODY: g->max_json_bytes = number(optarg, "--max-body", 1024, 1LL << 30); break;
		case O_MAX_FILE: g->max_file_bytes = number(optarg, "--max-file", 1024, 1LL << 40); break;
		case O_SAMPLE: g->sample_ms = (int)number(optarg, "--sample-ms", 100, 3600000); break;
		case O_BOOT: g->boot_timeout_ms = (int)number(optarg, "--boot-timeout", 100, 3600000); break;
		case O_VERBOSE: g->verbose = log_verbose = true; break;
		case O_MCP_ORIGINS: set_str(g->mcp_origins, sizeof g->mcp_origins, optarg, "--mcp-origins"); break;
		case O_TLS_CERT: set_str(g->tls_cert, sizeof g->tls_cert, optarg, "--tls-cert"); break;
		case O_TLS_KEY: set_str(g->tls_key, sizeof g->tls_key, optarg, "--tls-key"); break;
		case O_DOMAIN:
			set_str(g->domain, sizeof g->domain, optarg, "--domain");
			if (!v_is_domain(g->domain))
				die("--domain %s: want a DNS name such as sandboxes.example.com", optarg);
			break;
		case O_WEB_DIR: set_str(g->web_dir, sizeof g->web_dir, optarg, "--web-dir"); break;
		case O_WORKSPACE: c->workspace = optarg; break;
		case O_NAME: c->name = optarg; break;
		case O_SCOPE: c->scope = optarg; break;
		case O_IMAGE: c->image = optarg; break;
		case O_OCI: c->oci = optarg; break;
		case O_DOCKERFILE: c->dockerfile = optarg; break;
		case O_DF_FILE: c->df_file = optarg; break;
		case O_BUILD_ARG:
			if (c->nbuild_args == 64 || !strchr(optarg, '='))
				die("--build-arg NAME=VALUE, at most 64");
			c->build_args[c->nbuild_args++] = optarg;
			break;
		case O_MAX_CONTEXT: c->max_context_mib = number(optarg, "--max-context", 1, 1 << 20); break;
		case O_BUILD_NET: c->build_net = optarg; break;
		case O_DISK: c->disk_mib = number(optarg, "--disk", TEMPLATE_DISK_MIN_MIB, TEMPLATE_DISK_MAX_MIB); break;
		case O_JOB: c->job = optarg; break;
		case O_START: c->start = optarg; break;
		case O_READY_PORT: c->ready_port = (int)number(optarg, "--ready-port", 1, 65535); break;
		case O_READY_TIMEOUT: c->ready_timeout = (int)number(optarg, "--ready-timeout", 1, 3600); break;
		case O_VCPUS: c->vcpus = (int)number(optarg, "--vcpus", 1, TEMPLATE_VCPUS_MAX); break;
		case O_MEMORY:
			c->memory_mib = (int)number(optarg, "--memory", TEMPLATE_MEMORY_MIN_MIB,
						    TEMPLATE_MEMORY_MAX_MIB);
			break;
		case O_NO_SNAPSHOT: c->no_snapshot = true; break;
		case O_RESTART: c->restart = true; break;
		case O_NO_NET: g->net = false; break;
		case O_NET_POOL: g->net_pool = (int)number(optarg, "--net-pool", 0, 256); break;
		case O_POOL: g->pool = (int)number(optarg, "--pool", 0, 64); break;
		case O_DNS:
			if (!dns_list_valid(optarg))
				die("--dns %s: want 1 to 3 IPv4 addresses, comma-separated", optarg);
			set_str(g->dns, sizeof g->dns, optarg, "--dns");
			break;
		case O_NET_RANGE:
			if (net_set_pool(optarg) < 0)
				die("--net-range: %s", errmsg());
			break;
		case O_NO_JAIL: g->jail = false; break;
		case O_JAIL_UID: g->jail_uid = (int)number(optarg, "--jail-uid", 1000, 2000000000); break;
		case O_CGROUP:
			if (optarg[0] != '/')
				die("--cgroup must be an absolute path");
			set_str(g->cgroup, sizeof g->cgroup, optarg, "--cgroup");
			break;
		case O_VMM_OVERHEAD: g->vmm_overhead_mib = (int)number(optarg, "--vmm-overhead", -4096, 65536); break;
		case O_VMM_PIDS: g->vmm_pids = (int)number(optarg, "--vmm-pids", 8, 100000); break;
		case O_RESERVE_DISK: g->reserve_disk_mib = (int)number(optarg, "--reserve-disk", 0, 1 << 30); break;
		case O_PLANS: c->plans_file = optarg; break;
		case O_AUDIT_DAYS: c->audit_days = (int)number(optarg, "--audit-days", 0, 100000); break;
		case O_DB_BACKUP_MIN: ops_db_backup_min_s = number(optarg, "--db-backup-min", 1, DB_BACKUP_INTERVAL_MAX); break;
		case O_DB_EXT_BIND: {
			unsigned char a[16];
			if (inet_pton(AF_INET, optarg, a) != 1 && inet_pton(AF_INET6, optarg, a) != 1)
				die("--db-external-bind wants an IP address, not '%s'", optarg);
			set_str(ops_db_external.bind, sizeof ops_db_external.bind, optarg, "--db-external-bind");
			break;
		}
		case O_DB_EXT_HOST: {
			unsigned char a[16];
			if (!v_is_domain(optarg) && inet_pton(AF_INET, optarg, a) != 1 && inet_pton(AF_INET6, optarg, a) != 1)
				die("--db-external-host wants a host name or an IP address, not '%s'", optarg);
			set_str(ops_db_external.host, sizeof ops_db_external.host, optarg, "--db-external-host");
			break;
		}
		case O_DB_EXT_PORTS: {
			int lo = 0, hi = 0, end = 0;
			if (sscanf(optarg, "%d-%d%n", &lo, &hi, &end) != 2 || optarg[end] || lo < 1 || hi > 65535 || lo > hi)
				die("--db-external-ports wants LO-HI (1..65535, LO <= HI), not '%s'", optarg);
			ops_db_external.port_lo = lo, ops_db_external.port_hi = hi;
			break;
		}
		case O_DB_EXT_CONNS: ops_db_external.conns_max = (int)number(optarg, "--db-external-conns", 1, 256); break;
		case O_API: c->api_url = optarg; break;
		case O_JOIN_TOKEN: c->join_token = optarg; break;
		case O_API_CA: c->api_ca = optarg; break;
		case O_ADVERTISE: c->advertise = optarg; break;
		case O_OFFER_VCPUS: c->offer_vcpus = number(optarg, "--offer-vcpus", 1, 4096); break;
		case O_OFFER_MEMORY: c->offer_memory_mib = number(optarg, "--offer-memory", 64, INT64_C(1) << 32); break;
		case O_ORPHAN_GRACE: c->orphan_grace_s = number(optarg, "--orphan-grace", 1, 86400); break;
		case O_PLACEMENT:
			if (strcmp(optarg, "spread") && strcmp(optarg, "pack"))
				die("--placement wants 'spread' or 'pack', not '%s'", optarg);
			c->placement = optarg;
			break;
		case O_HOSTS_CA: c->hosts_ca = optarg; break;
		case O_PREVIEW_KEY: c->preview_key = optarg; break;
		case O_EXPIRES: c->expires = optarg; break;	/* its bounds are the command's */
		case O_USES:
			c->cluster.uses = !strcmp(optarg, "any") ? -1 : number(optarg, "--uses", 1, 100000);
			break;
		case O_DEFAULT_PLAN: c->default_plan = optarg; break;
		case O_PLAN_WINDOW: c->plans.window_ms = number(optarg, "--plan-window", 1, 86400) * 1000; break;
		case O_PRICE_VCPU:
			if (price_parse(optarg, "--price-vcpu-hour", &c->plans.prices.vcpu_hour) < 0)
				die("%s", errmsg());
			break;
		case O_PRICE_GIB:
			if (price_parse(optarg, "--price-gib-hour", &c->plans.prices.gib_hour) < 0)
				die("%s", errmsg());
			break;
		case O_HELP: fputs(usage_text, stdout); exit(0);
		default: fputs(usage_text, stderr); exit(2);
		}
	}
	if (config_finish(&c->cfg) < 0)
		die("%s", errmsg());
	if (c->plans_file && plans_load(&c->plans, c->plans_file) < 0)
		die("%s", errmsg());
	if (c->default_plan) {
		if (!plans_find(&c->plans, c->default_plan))
			die("--default-plan %s: no such plan (%s)", c->default_plan, plan_names(&c->plans));
		snprintf(c->plans.default_plan, sizeof c->plans.default_plan, "%s", c->default_plan);
	}
	config_host(&c->cfg, &c->host);
	config_api(&c->cfg, &c->api);
}

static struct store *open_store(const struct config *cfg)
{
	if (mkdir(cfg->data_dir, 0700) < 0 && errno != EEXIST)
		die("cannot create %s: %s", cfg->data_dir, strerror(errno));
	struct store *st;
	if (store_open(cfg->store, &st) < 0)
		die("%s", errmsg());
	return st;
}

/* ---- keys --------------------------------------------------------------------------- */

static int print_key(void *ctx, const struct key_row *k)
{
	(void)ctx;
	const char *state = k->revoked_ms ? "revoked"
			    : k->expires_ms && k->expires_ms <= wall_ms() ? "expired" : "active";
	printf("%-24s %-14s %-24s %-16s %-5s %s\n", k->id, k->prefix, k->workspace_name, k->name,
	       key_scope_name(k->scope), state);
	return 0;
}

static int cmd_keys(struct cmdline *c, int argc, char **argv)
{
	if (argc < 1)
		die("keys wants create, list or revoke");
	struct store *st = open_store(&c->cfg);
	int rc = 0;
	if (!strcmp(argv[0], "create")) {
		const char *ws = c->workspace ? c->workspace : "default";
		if (!v_is_name(ws))
			die("--workspace wants [a-z0-9-], at most 16 characters");
		enum key_scope scope;
		if (key_scope_parse(c->scope ? c->scope : "full", &scope) < 0)
			die("--scope wants full or read");
		/* As POST /v1/keys's expires_in_seconds (h_keys.c). */
		long long expires_s = c->expires ? number(c->expires, "--expires", 1, 10LL * 366 * 86400) : 0;
		char wsid[ID_MAX], keyid[ID_MAX], key[KEY_LEN + 1], hash[KEY_HASH_LEN],
			shown[KEY_SHOWN_LEN + 1];
		rc = store_workspace_ensure(st, ws, wsid);
		rc = rc ?: key_generate(key);
		if (rc == 0) {
			key_hash(key, strlen(key), hash);
			key_shown(key, shown);
			int64_t expires_ms = expires_s ? wall_ms() + expires_s * 1000 : 0;
			rc = store_key_add(st, wsid, c->name ? c->name : "", hash, shown, scope,
					   expires_ms, keyid);
		}
		if (rc == 0) {
			printf("%s\n", key);
			fprintf(stderr, "kilnd: key %s (%s...) for workspace %s (%s); it is shown only once\n",
				keyid, shown, ws, wsid);
		}
	} else if (!strcmp(argv[0], "list")) {
		rc = store_key_each(st, print_key, NULL);
	} else if (!strcmp(argv[0], "revoke") && argc == 2) {
		rc = store_key_revoke(st, argv[1]);
		if (rc == 0)
			fprintf(stderr, "kilnd: revoked %s\n", argv[1]);
	} else {
		die("keys wants create, list or revoke ID");
	}
	store_close(st);
	if (rc < 0)
		die("%s", errmsg());
	return 0;
}

/* ---- operator credentials ------------------------------------------------------------------ */

static int print_operator(void *ctx, const struct operator_row *o)
{
	(void)ctx;
	printf("%-24s %-16s %-16s %s\n", o->id, o->prefix, o->name, o->revoked_ms ? "revoked" : "active");
	return 0;
}

/* kilnd admin create|list|revoke: the credentials of /v1/admin (docs/security.md
 * "Operators"); like keys, shown once and kept only as their hash. */
static int cmd_admin(struct cmdline *c, int argc, char **argv)
{
	if (argc < 1)
		die("admin wants create, list or revoke");
	struct store *st = open_store(&c->cfg);
	int rc = 0;
	if (!strcmp(argv[0], "create") && argc == 1) {
		const char *name = c->name ? c->name : "";
		if (strlen(name) >= NAME_MAX_LEN)
			die("--name: at most %d bytes", NAME_MAX_LEN - 1);
		char secret[SECRET_MAX], hash[KEY_HASH_LEN], shown[KEY_SHOWN_LEN + 3], id[ID_MAX];
		rc = secret_generate(OPERATOR_PREFIX, secret);
		if (rc == 0) {
			key_hash(secret, strlen(secret), hash);
			/* "kilnop_" and 8 characters, to tell credentials apart. */
			snprintf(shown, sizeof shown, "%.15s", secret);
			rc = store_operator_add(st, name, hash, shown, id);
		}
		if (rc == 0) {
			printf("%s\n", secret);
			fprintf(stderr, "kilnd: operator credential %s (%s...); it is shown only once\n", id, shown);
		}
	} else if (!strcmp(argv[0], "list") && argc == 1) {
		rc = store_operator_each(st, print_operator, NULL);
	} else if (!strcmp(argv[0], "revoke") && argc == 2) {
		rc = store_operator_revoke(st, argv[1]);
		if (rc == 0)
			fprintf(stderr, "kilnd: revoked %s\n", argv[1]);
	} else {
		die("admin wants create, list or revoke ID");
	}
	store_close(st);
	if (rc < 0)
		die("%s", errmsg());
	return 0;
}

/* ---- workspaces ------------------------------------------------------------------------- */

static const char *plan_names(const struct plans *p)
{
	static char buf[PLANS_MAX * (PLAN_NAME_MAX + 2)];
	size_t len = 0;
	buf[0] = 0;
	for (int i = 0; i < p->n; i++)
		len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? ", " : "", p->plan[i].name);
	return buf;
}

/* kilnd workspace plan NAME PLAN [LIMITS]: the workspace's plan, and its
 * own limits over it (a JSON object; none: the plan's); show: both. */
static int cmd_workspace(struct cmdline *c, int argc, char **argv)
{
	bool set = argc >= 3 && argc <= 4 && !strcmp(argv[0], "plan");
	if (!set && !(argc == 2 && !strcmp(argv[0], "show")))
		die("workspace wants 'plan NAME PLAN [LIMITS]' or 'show NAME'");
	const char *ws = argv[1];
	if (!v_is_name(ws))
		die("workspace %s: want [a-z0-9-], at most 16 characters", ws);
	struct store *st = open_store(&c->cfg);
	char wsid[ID_MAX];
	int rc = store_workspace_ensure(st, ws, wsid);
	if (rc == 0 && set) {
		struct plan known;
		if (plans_resolve(&c->plans, st, argv[2], &known, NULL) < 0)
			die("plan %s: no such plan (%s; --plans FILE or PUT /v1/admin/plans/NAME adds others)", argv[2], plan_names(&c->plans));
		struct plan_limits l = { 0 };
		json_t *o = NULL;
		if (argc == 4) {
			json_error_t e;
			if (!(o = json_loads(argv[3], 0, &e)))
				die("limits: not JSON: %s", e.text);
			if (plan_limits_apply(&l, o, "limits") < 0)
				die("%s", errmsg());
		}
		char *text = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		json_decref(o);
		rc = store_plan_set(st, wsid, argv[2], text, !plans_find(&c->plans, argv[2]));
		free(text);
	}
	struct ops_caller oc = { .store = st, .plans = &c->plans, .workspace = wsid };
	struct plan p;
	if (rc == 0)
		rc = ops_workspace_plan(&oc, &p);
	if (rc == 0) {
		json_t *l = plan_limits_json(&p.limits);
		char *text = l ? json_dumps(l, JSON_COMPACT) : NULL;
		printf("%s %s %s\n", ws, p.name, text ? text : "");
		free(text);
		json_decref(l);
	}
	store_close(st);
	if (rc < 0)
		die("%s", errmsg());
	return 0;
}

/* ---- templates ---------------------------------------------------------------------------- */

static int print_template(void *ctx, const struct template_def *d, const struct tmpl *t)
{
	(void)ctx;
	if (t)
		printf("%-10s v%-4d %s, %d vCPU, %d MiB\n", t->name, t->version,
		       t->snapshot ? "snapshot (zygote)" : "boot-only", t->vcpus, t->memory_mib);
	else
		printf("%-10s not built\n", d->name);
	return 0;
}

struct seen_ws {
	char (*ws)[ID_MAX];
	int n, cap;
};

static int note_ws(void *ctx, const struct sbx_row *r)
{
	struct seen_ws *s = ctx;
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->ws[i], r->workspace))
			return 0;
	if (s->n == s->cap) {
		int cap = s->cap ? 2 * s->cap : 64;
		void *p = realloc(s->ws, (size_t)cap * sizeof *s->ws);
		if (!p)
			return -ENOMEM;
		s->ws = p, s->cap = cap;
	}
	snprintf(s->ws[s->n++], ID_MAX, "%s", r->workspace);
	return 0;
}

/* The host learns a workspace's caps from its creates; until one comes
 * after a restart, its hibernated sandboxes' wakes would not be held to
 * the plan's `running`: each workspace with a sandbox gets them now. */
static void seed_caps(struct host *h, struct hostif *hi, struct store *st, const struct plans *plans)
{
	struct seen_ws s = { 0 };
	if (hostif_each(hi, NULL, note_ws, &s) < 0)
		log_warn("plans: listing the sandboxes' workspaces: %s", errmsg());
	for (int i = 0; i < s.n; i++) {
		struct ops_caller c = { .hostif = hi, .store = st, .plans = plans, .workspace = s.ws[i] };
		struct ws_caps caps;
		int rc = ops_workspace_caps(&c, &caps);
		if (rc > 0)
			rc = host_ws_seed(h, s.ws[i], &caps);
		if (rc < 0)
			log_warn("plans: workspace %s: %s", s.ws[i], errmsg());
	}
	free(s.ws);
}

static int cmd_template(struct cmdline *c, int argc, char **argv)
{
	/* A build the API started (host/tbuild.c execs it): everything from
	 * the job file it wrote. */
	if (argc >= 2 && !strcmp(argv[0], "build") && c->job)
		return tbuild_job(c->job, argv[1]);
	if (argc >= 2 && !strcmp(argv[0], "build")) {
		struct build_opts o = { .name = argv[1], .image = c->image, .no_snapshot = c->no_snapshot,
					.restart = c->restart, .oci = c->oci, .vcpus = c->vcpus,
					.memory_mib = c->memory_mib, .start = c->start, .ready_port = c->ready_port,
					.ready_timeout_s = c->ready_timeout, .dockerfile = c->dockerfile,
					.dockerfile_file = c->df_file, .build_args = c->build_args,
					.max_context = (uint64_t)c->max_context_mib << 20,
					.disk_mib = c->disk_mib, .build_net = c->build_net };
		signal(SIGPIPE, SIG_IGN);
		if (template_build(&c->host, &o) < 0) {
			fprintf(stderr, "kilnd: %s\n", errmsg());
			return 1;
		}
		return 0;
	}
	if (argc >= 1 && !strcmp(argv[0], "list")) {
		struct templates *ts;
		if (templates_open(&c->host, &ts) < 0)
			die("%s", errmsg());
		templates_each(ts, print_template, NULL);
		templates_close(ts);
		return 0;
	}
	die("template wants 'build NAME' or 'list'");
}

/* ---- the service ------------------------------------------------------------------------------ */

static volatile sig_atomic_t stop_signal;
/* The main thread waits on this pipe, not in pause(): the kernel hands a
 * process-directed SIGTERM to any thread that does not block it, and
 * kilnd has many (the HTTP server's, the watchers'). With pause() a
 * signal taken by another thread set the flag and woke no one: kilnd
 * went on serving, and the shell's `wait` after its `kill` hung. */
static int stop_pipe[2] = { -1, -1 };

static void on_stop(int sig)
{
	int saved = errno;

	stop_signal = sig;
	if (write(stop_pipe[1], "", 1) < 0) {
		/* full: a wake-up is already there */
	}
	errno = saved;
}

static void on_alarm(int sig)
{
	(void)sig;
	/* Shutdown waits for requests in flight; a long exec must not hold
	 * it forever. VMMs live on and the store is consistent (WAL). */
	_exit(0);
}

static int serve(struct cmdline *c)
{
	struct config *cfg = &c->cfg;
	bool agent = !strcmp(cfg->role, "agent"), api_role = !strcmp(cfg->role, "api");
	if (strcmp(cfg->role, "all") != 0 && !agent && !api_role)
		die("--role %s: 'all' (both roles in one process, the default), 'api' (the API alone) and "
		    "'agent' (a cluster's host) exist (docs/cluster.md)", cfg->role);
	if (!agent && (c->api_url || c->join_token || c->api_ca || c->advertise || c->offer_vcpus ||
		       c->offer_memory_mib || c->orphan_grace_s))
		die("--api, --join-token, --api-ca, --advertise, --offer-* and --orphan-grace are for --role agent");
	if (!api_role && (c->placement || c->hosts_ca))
		die("--placement and --hosts-ca are for --role api");
	if (api_role && strncmp(cfg->store, "postgres", 8) != 0)
		die("--role api keeps its state in the cluster's database: --store postgresql://... "
		    "(docs/cluster.md)");
	signal(SIGPIPE, SIG_IGN);
	struct store *st = open_store(cfg);
	char lockp[PATH_MAX];
	snprintf(lockp, sizeof lockp, "%s/kilnd.lock", cfg->data_dir);
	int lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) < 0)
		die("another kilnd serves %s", cfg->data_dir);
	struct api api = { .cfg = &c->api, .store = st, .plans = &c->plans };
	api.metrics = metrics_new();
	api.rl = ratelimit_new(cfg->rate_per_sec, cfg->rate_burst);
	api.windows = windows_new();
	api.anon_rl = ratelimit_new(cfg->anon_rate_per_sec, cfg->anon_rate_burst);
	api.inflight = inflight_new(cfg->max_inflight);
	api.uploads = inflight_new(cfg->max_uploads);
	api.tunnels = inflight_new(cfg->max_tunnels);
	api.exec_buffer = inflight_new(cfg->max_exec_buffer);
	if ((c->preview_key ? preview_key_read(c->preview_key, api.preview_key)
			    : preview_key_load(cfg->data_dir, api.preview_key)) < 0)
		die("%s", errmsg());
	if (!api.metrics || !api.rl || !api.windows || !api.anon_rl || !api.inflight || !api.uploads || !api.tunnels || !api.exec_buffer)
		die("out of memory");
	struct host *host = NULL;
	struct hostif hostif;
	if (api_role) {
		/* The API alone: every sandbox is on a host of the cluster,
		 * reached through the same interface over HTTP. */
		struct remote_config rc = {
			.store = st, .policy = c->placement && !strcmp(c->placement, "pack") ? PLACE_PACK : PLACE_SPREAD,
			.ca_file = c->hosts_ca, .vcpu_overcommit = HOST_VCPU_OVERCOMMIT,
			.metrics = api.metrics,
		};
		if (hostif_remote(&hostif, &rc) < 0)
			die("%s", errmsg());
	} else {
		if (host_open(&c->host, st, api.metrics, &host) < 0)
			die("%s", errmsg());
		/* One box: the API, MCP, the proxy and the operations reach
		 * this process's host agent through the same interface a
		 * remote agent has. */
		hostif_local(&hostif, host);
		seed_caps(host, &hostif, st, &c->plans);
	}
	api.hostif = &hostif;
	api.host_only = agent;
	if (!agent && !(api.events = event_log_new(&hostif)))
		die("event log: %s", errmsg());
	if (http_start(&api, cfg->listen) < 0)
		die("%s", errmsg());
	if (pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		die("pipe: %s", strerror(errno));
	struct sigaction sa = { .sa_handler = on_stop };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* Every kilnd with the API accepts hosts joining (docs/cluster.md)
	 * and watches their heartbeats; an agent also joins one itself. */
	if (cluster_monitor_start(st, HOST_DOWN_MS) < 0)
		die("%s", errmsg());
	/* Plans with a credit stop running when it is spent, and suspended
	 * workspaces at once (ops/credit.h), looked at as often as usage is
	 * sampled. */
	if (credit_watch_start(st, &hostif, &c->plans, c->host.sample_ms) < 0)
		die("%s", errmsg());
	if (audit_retention_start(st, c->audit_days) < 0)
		die("%s", errmsg());
	/* Apps' sandboxes are remade when they end (ops/app.h): where the
	 * API is, since that is where apps are known. */
	if (!agent && app_watch_start(st, &hostif, &c->plans, api.cfg->max_ttl, 2000) < 0)
		die("%s", errmsg());
	/* So are databases' VMs that died (ops/database.h). */
	if (!agent && db_watch_start(st, &hostif, &c->plans, 2000) < 0)
		die("%s", errmsg());
	/* Their external ports, where the API is (proxy/dbport.h). */
	if (!agent) {
		if (dbport_start(st, &hostif) < 0)
			die("%s", errmsg());
		ops_db_external_sync = dbport_sync;
	}
	char advertise[160];
	snprintf(advertise, sizeof advertise, "http://%s", cfg->listen);
	struct agent_link_config link = {
		.api_url = c->api_url, .join_token = c->join_token, .ca_file = c->api_ca,
		.advertise = c->advertise ? c->advertise : advertise, .name = c->name,
		.data_dir = cfg->data_dir, .store = st, .hostif = &hostif,
		.offer_vcpus = c->offer_vcpus, .offer_memory_mib = c->offer_memory_mib,
		.orphan_grace_ms = c->orphan_grace_s * 1000,
	};
	if (agent && agent_link_start(&link) < 0)
		die("cluster: %s", errmsg());
	if (agent)
		api.host_key = agent_link_api_key();	/* the API may call now */
	log_info("serving on %s, data in %s", cfg->listen, cfg->data_dir);
	while (!stop_signal) {
		struct pollfd p = { .fd = stop_pipe[0], .events = POLLIN };
		poll(&p, 1, -1);
	}
	log_info("signal %d: stopping (sandboxes keep running)", (int)stop_signal);
	signal(SIGALRM, on_alarm);
	alarm(10);
	agent_link_stop();
	credit_watch_stop();
	app_watch_stop();
	db_watch_stop();
	ops_db_external_sync = NULL;
	dbport_stop();
	audit_retention_stop();
	cluster_monitor_stop();
	http_stop(&api);
	event_log_free(api.events);
	if (host)
		host_close(host);
	else
		hostif_remote_free(&hostif);
	ratelimit_free(api.rl);
	windows_free(api.windows);
	ratelimit_free(api.anon_rl);
	inflight_free(api.inflight);
	inflight_free(api.uploads);
	inflight_free(api.tunnels);
	inflight_free(api.exec_buffer);
	metrics_free(api.metrics);
	store_close(st);
	close(lock);
	return 0;
}

int main(int argc, char **argv)
{
	struct cmdline c = { 0 };
	parse(argc, argv, &c);
	int n = argc - optind;
	char **rest = argv + optind;
	if (n == 0 || !strcmp(rest[0], "serve"))
		return serve(&c);
	if (!strcmp(rest[0], "keys"))
		return cmd_keys(&c, n - 1, rest + 1);
	if (!strcmp(rest[0], "template"))
		return cmd_template(&c, n - 1, rest + 1);
	if (!strcmp(rest[0], "workspace"))
		return cmd_workspace(&c, n - 1, rest + 1);
	if (!strcmp(rest[0], "admin"))
		return cmd_admin(&c, n - 1, rest + 1);
	if (!strcmp(rest[0], "cluster")) {
		struct store *st = open_store(&c.cfg);
		if (c.expires)
			c.cluster.expires_s = number(c.expires, "--expires", 1, 30 * 86400);
		int rc = cluster_cmd(st, &c.cluster, n - 1, rest + 1);
		store_close(st);
		return rc;
	}
	if (!strcmp(rest[0], "routes")) {
		for (size_t i = 0; i < nroutes; i++)
			printf("%s %s\n", routes[i].method, routes[i].pattern);
		return 0;
	}
	fputs(usage_text, stderr);
	return 2;
}
