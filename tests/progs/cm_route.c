// SPDX-License-Identifier: MIT
/*
 * Which device the RDMA CM gives an address: each argument ADDR=DEVICE
 * says that rdma_resolve_addr to ADDR must end ADDR_RESOLVED with
 * id->verbs on DEVICE, and that rdma_get_devices must list DEVICE.  With
 * ibemu beside a kernel RDMA device, loopback is ibemu0's and the
 * addresses of the kernel device's network interface are that device's
 * (ibemu(7)).
 *
 * Exit: 0 every address went where it should, 1 not, 77 no RDMA CM.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>

static int listed(struct ibv_context **list, int n, const char *dev)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]->device), dev))
			return 1;
	return 0;
}

static int check(struct rdma_event_channel *ch, const char *addr,
		 const char *dev)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct addrinfo *ai;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	const char *got = "(none)";
	int ok = 0;

	if (getaddrinfo(addr, "7471", NULL, &ai)) {
		printf("FAIL: cm-route: %s is no address\n", addr);
		return 0;
	}
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		printf("FAIL: cm-route: rdma_create_id: %s\n", strerror(errno));
		freeaddrinfo(ai);
		return 0;
	}
	if (rdma_resolve_addr(id, NULL, ai->ai_addr, 2000)) {
		printf("FAIL: cm-route: rdma_resolve_addr %s: %s\n", addr,
		       strerror(errno));
	} else if (poll(&p, 1, 5000) != 1 || rdma_get_cm_event(ch, &ev)) {
		printf("FAIL: cm-route: no event for %s\n", addr);
	} else {
		if (ev->event == RDMA_CM_EVENT_ADDR_RESOLVED && id->verbs)
			got = ibv_get_device_name(id->verbs->device);
		ok = ev->event == RDMA_CM_EVENT_ADDR_RESOLVED &&
		     !strcmp(got, dev);
		printf("%s: cm-route: %s -> %s, %s (want %s)\n",
		       ok ? "ok" : "FAIL", addr, rdma_event_str(ev->event), got,
		       dev);
		rdma_ack_cm_event(ev);
	}
	rdma_destroy_id(id);
	freeaddrinfo(ai);
	return ok;
}

int main(int argc, char **argv)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct ibv_context **list;
	int i, n = 0, fails = 0;
	char *dev;

	if (!ch) {
		printf("SKIP: cm-route: no RDMA CM (%s)\n", strerror(errno));
		return 77;
	}
	list = rdma_get_devices(&n);
	for (i = 0; list && i < n; i++)
		printf("cm-route: rdma_get_devices[%d] %s\n", i,
		       ibv_get_device_name(list[i]->device));
	for (i = 1; i < argc; i++) {
		dev = strrchr(argv[i], '=');
		if (!dev) {
			fprintf(stderr, "usage: cm_route ADDR=DEVICE...\n");
			return 2;
		}
		*dev++ = '\0';
		if (!list || !listed(list, n, dev)) {
			printf("FAIL: cm-route: rdma_get_devices lacks %s\n",
			       dev);
			fails++;
		}
		fails += !check(ch, argv[i], dev);
	}
	rdma_free_devices(list);
	rdma_destroy_event_channel(ch);
	return fails ? 1 : 0;
}
