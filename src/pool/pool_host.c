/*
 * pool_host.c - the hosts of a pool's database: resolving host= (Unix socket directories,
 * names through the worker's resolver, addresses), picking one per connect
 * (load_balance_hosts), moving on from a failed one, and re-resolving (pool_rehost,
 * pool_addr_gone). Entry points: pool_resolve(), pool_pick_host(), pool_host_failed(),
 * pool_rehost(), pool_addr_gone().
 */
#include "neki/base.h"
#include "neki/clock.h"
#include "neki/pool.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "neki/log.h"
#include "pool_int.h"

/* A unix socket directory <h>: "<dir>/.s.PGSQL.<port>". */
static bool
pool_host_unix(struct pool_host *h, int port, struct nk_error *err)
{
	struct sockaddr_un *sun = (struct sockaddr_un *)&h->addr;

	sun->sun_family = AF_UNIX;
	if (snprintf(sun->sun_path, sizeof(sun->sun_path), "%s/.s.PGSQL.%d", h->name,
		     port) >= (int)sizeof(sun->sun_path))
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "unix socket path too long: \"%s\"", h->name);
	h->addrlen = sizeof(*sun);
	h->resolved = true;
	snprintf(h->label, sizeof(h->label), "unix:%d", port);
	return true;
}

/* A numeric address, or (without a resolver) a name resolved once, here, with getaddrinfo. */
static bool
pool_host_inet(struct pool *p, struct pool_host *h, struct nk_error *err)
{
	struct addrinfo hints, *res = NULL;
	char sport[16];

	snprintf(h->label, sizeof(h->label), strchr(h->name, ':') ? "[%.80s]:%d" : "%.80s:%d",
		 h->name, h->port);
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = p->dns != NULL ? AI_NUMERICHOST : 0;
	snprintf(sport, sizeof(sport), "%d", h->port);
	if (getaddrinfo(h->name, sport, &hints, &res) != 0 || res == NULL) {
		if (p->dns != NULL)
			return true;	/* a name: resolved per connection through p->dns */
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "could not resolve host \"%s\"", h->name);
	}
	memcpy(&h->addr, res->ai_addr, res->ai_addrlen);
	h->addrlen = res->ai_addrlen;
	h->resolved = true;
	freeaddrinfo(res);
	return true;
}

/*
 * The database's hosts: a comma list of names, addresses and unix socket directories; no
 * host means unix_socket_dir. pgbouncer's order and port rules.
 */
bool
pool_resolve(struct pool *p, struct nk_error *err)
{
	const char *list = p->db->host;
	size_t n = 1, len;
	struct pool_host *h;

	p->port = p->db->port > 0 ? p->db->port : 5432;
	if (list == NULL || list[0] == '\0')
		list = p->cfg->proc.unix_socket_dir;
	if (list == NULL || list[0] == '\0')
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "database \"%s\" has no host and "
				    "unix_socket_dir is empty", p->db_name);
	for (const char *c = list; *c != '\0'; c++)
		n += *c == ',';
	p->hosts = calloc(n, sizeof(*p->hosts));
	if (p->hosts == NULL)
		return nk_error_oom(err);
	for (const char *c = list; p->nhosts < n; c += len + 1) {
		c += strspn(c, " ");
		len = strcspn(c, ",");
		h = &p->hosts[p->nhosts++];
		h->name = strndup(c, len);
		if (h->name == NULL)
			return nk_error_oom(err);
		h->name[strcspn(h->name, " ")] = '\0';
		h->port = p->db->nports > 1 && p->nhosts <= p->db->nports ?
			  p->db->ports[p->nhosts - 1] : p->port;
		if (!(h->name[0] == '/' ? pool_host_unix(h, h->port, err) :
		      pool_host_inet(p, h, err)))
			return false;
		if (c[len] == '\0')
			break;
	}
	snprintf(p->addr_str, sizeof(p->addr_str), "%s", p->hosts[0].label);
	return true;
}

/*
 * The host for a new link: in turn (load_balance_hosts=round-robin) or the current one, both
 * kept across processes when the limits share a cursor.
 */
size_t
pool_pick_host(struct pool *p)
{
	size_t idx = p->next_host % p->nhosts;

	if (!p->db->load_balance_hosts && p->limits->host_current != NULL)
		return (size_t)(p->limits->host_current(p->limits_ctx) % p->nhosts);
	if (!p->db->load_balance_hosts || p->nhosts == 1)
		return idx;
	if (p->limits->next_host != NULL)
		return (size_t)(p->limits->next_host(p->limits_ctx, p->db_name) % p->nhosts);
	p->next_host = (idx + 1) % p->nhosts;
	return idx;
}

/* A connection to host <idx> failed: with load_balance_hosts=disable, move to the next. */
void
pool_host_failed(struct pool *p, size_t idx)
{
	uint64_t cur;

	if (p->db->load_balance_hosts)
		return;
	if (p->limits->host_failed != NULL) {
		cur = p->limits->host_current(p->limits_ctx);
		if (cur % p->nhosts == idx)
			p->limits->host_failed(p->limits_ctx, cur);
	} else if (p->next_host % p->nhosts == idx) {
		p->next_host = (idx + 1) % p->nhosts;
	}
}

void
pool_free_hosts(struct pool_host *hosts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(hosts[i].name);
	free(hosts);
}

/* The database's address moved: resolve the new host list (keep the old one on failure). */
void
pool_rehost(struct pool *p)
{
	struct pool_host *old = p->hosts;
	size_t nold = p->nhosts;
	struct nk_error err;

	p->hosts = NULL;
	p->nhosts = 0;
	p->next_host = 0;
	if (!pool_resolve(p, &err)) {
		log_warn("%s/%s: keeping the old server address: %s", p->db_name, p->user_name,
			 err.message);
		pool_free_hosts(p->hosts, p->nhosts);
		p->hosts = old;
		p->nhosts = nold;
		return;
	}
	pool_free_hosts(old, nold);
}

/* Same IP address (the port is not compared). */
static bool
pool_same_ip(const struct sockaddr_storage *a, const struct sockaddr *b)
{
	if (a->ss_family != b->sa_family)
		return false;
	if (b->sa_family == AF_INET)
		return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
			      &((const struct sockaddr_in *)b)->sin_addr, 4) == 0;
	return b->sa_family == AF_INET6 &&
	       memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
}

void
pool_addr_gone(struct pool *p, const char *name, const struct sockaddr *sa)
{
	struct list_node *n;
	bool any = false;

	for (int st = LINK_ST_LOGIN; st < LINK_ST_CLOSING; st++) {
		for (n = list_first(&p->lists[st]); n != NULL; n = list_next(&p->lists[st], n)) {
			struct link *l = container_of(n, struct link, node);

			if (l->addrlen == 0 || strcasecmp(p->hosts[l->host_idx].name, name) != 0 ||
			    !pool_same_ip(&l->addr, sa))
				continue;
			link_set_close_needed(l);
			any = true;
		}
	}
	if (!any)
		return;
	pool_check_list(p, LINK_ST_IDLE, nk_now_us());
	pool_check_list(p, LINK_ST_USED, nk_now_us());
}
