// SPDX-License-Identifier: MIT
/*
 * ibemu-conformance: verbs conformance tests for any RDMA device.
 *
 * Exit status: 0 when no test failed, 1 when one did, 77 (automake's
 * "skipped") when the machine has no RDMA device at all, 99 on a usage or
 * setup error.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "conformance.h"

const char *cf_dev_name;
int cf_port = 1;
int cf_gid_index;
const char *cf_cm_addr;
const char *cf_peer_netns;

static void usage(FILE *out, const char *argv0)
{
	fprintf(out,
		"Usage: %s [-d DEVICE] [-i PORT] [-g GIDIDX] [-s SUITE] "
		"[-x SUITE/TEST]... [-a ADDR] [-n NETNS] [-E FILE] [-C FILE]\n"
		"       [-D FILE] [-X DIR]"
		" [-T FILE]"
		" [-J FILE] [-l] [-h]\n"
		"  -d DEVICE  device to test (default: the first one)\n"
		"  -i PORT    port number (default 1)\n"
		"  -g GIDIDX  GID index (default 0)\n"
		"  -s SUITE   run only the suites whose name contains SUITE\n"
		"  -x S/T     leave test T of suite S out (printed as a SKIP)\n"
		"  -a ADDR    the device's IP address, for the RDMA CM suite\n"
		"             (cm, and the multicast example; skipped without\n"
		"             it), where the RC example's client connects\n"
		"  -n NETNS   run the peer process of the two-process suites in\n"
		"             that network namespace (a file such as\n"
		"             /var/run/netns/NAME): its peer is then another host\n"
		"  -E FILE    known deviations of this device kind: \"SUITE/TEST\n"
		"             reason\" lines; a listed failure is expected, an\n"
		"             unlisted one fails the run\n"
		"  -D FILE    write the deviation report: each failed test, the\n"
		"             reason the -E list gives (or NEW), its failures\n"
		"  -C FILE    write the device's capability matrix: its\n"
		"             attributes and what the run found missing\n"
		"  -X DIR     where the manual's example programs are\n"
		"             (rc_example, mc_example; default: examples/\n"
		"             beside this program)\n"
		"  -T FILE    also write the verdicts as TAP (version 13)\n"
		"  -J FILE    also write them as JUnit XML\n"
		"  -l         list the suites and tests, run nothing\n"
		"  -h         this help\n",
		argv0);
}

static void list_tests(void)
{
	CU_pTestRegistry reg = CU_get_registry();
	CU_pSuite suite;
	CU_pTest test;

	for (suite = reg->pSuite; suite; suite = suite->pNext) {
		printf("%s\n", suite->pName);
		for (test = suite->pTest; test; test = test->pNext)
			printf("  %s: %s\n", test->pName,
			       cf_test_rule(suite->pName, test->pName));
	}
}

/* Exit 77 when no RDMA device exists, 99 when the chosen one is absent. */
static int check_device(void)
{
	struct ibv_device **list;
	int n, i, found = 0;

	list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		printf("SKIP: no RDMA device present (for ibemu, run with "
		       "LD_PRELOAD=libibemu.so)\n");
		if (list)
			ibv_free_device_list(list);
		return 77;
	}
	for (i = 0; i < n; i++)
		if (!cf_dev_name ||
		    !strcmp(ibv_get_device_name(list[i]), cf_dev_name))
			found = 1;
	if (!found) {
		fprintf(stderr, "device %s not found; present:", cf_dev_name);
		for (i = 0; i < n; i++)
			fprintf(stderr, " %s", ibv_get_device_name(list[i]));
		fprintf(stderr, "\n");
	} else if (!cf_dev_name) {
		cf_dev_name = strdup(ibv_get_device_name(list[0]));
	}
	ibv_free_device_list(list);
	return found ? 0 : 99;
}

int main(int argc, char **argv)
{
	const char *filter = NULL, *tap = NULL, *junit = NULL, *caps = NULL;
	const char *devs = NULL;
	unsigned int failed;
	int opt, list = 0, ret;

	while ((opt = getopt(argc, argv, "d:i:g:s:x:a:n:E:C:D:T:J:X:lh")) != -1) {
		switch (opt) {
		case 'd':
			cf_dev_name = optarg;
			break;
		case 'i':
			cf_port = atoi(optarg);
			break;
		case 'g':
			cf_gid_index = atoi(optarg);
			break;
		case 's':
			filter = optarg;
			break;
		case 'x':
			if (cf_exclude(optarg)) {
				fprintf(stderr, "-x %s: expected SUITE/TEST "
					"(at most 32)\n", optarg);
				return 99;
			}
			break;
		case 'a':
			cf_cm_addr = optarg;
			break;
		case 'n':
			cf_peer_netns = optarg;
			break;
		case 'E':
			if (cf_expect_load(optarg))
				return 99;
			break;
		case 'C':
			caps = optarg;
			break;
		case 'D':
			devs = optarg;
			break;
		case 'T':
			tap = optarg;
			break;
		case 'X':
			cf_examples_dir = optarg;
			break;
		case 'J':
			junit = optarg;
			break;
		case 'l':
			list = 1;
			break;
		case 'h':
			usage(stdout, argv[0]);
			return 0;
		default:
			usage(stderr, argv[0]);
			return 99;
		}
	}
	if (optind != argc || cf_port < 1 || cf_port > 255 ||
	    cf_gid_index < 0) {
		usage(stderr, argv[0]);
		return 99;
	}

	if (CU_initialize_registry() != CUE_SUCCESS) {
		fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
		return 99;
	}
	cf_tests_register(filter);
	if (CU_get_error() != CUE_SUCCESS) {
		fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
		CU_cleanup_registry();
		return 99;
	}

	if (list) {
		list_tests();
		CU_cleanup_registry();
		return 0;
	}

	ret = check_device();
	if (ret) {
		CU_cleanup_registry();
		return ret;
	}
	printf("Device %s, port %d, GID index %d\n", cf_dev_name, cf_port,
	       cf_gid_index);

	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	/* Failed tests not listed as known deviations (-E); a suite whose
	 * set-up failed fails each of its tests. */
	failed = cf_report_judge();
	printf("\nSkipped: %u (capabilities the device lacks, see SKIP "
	       "lines)\n", cf_skip_count);
	/* A report that cannot be written is a broken run (99). */
	if ((tap && cf_report_tap(tap)) || (junit && cf_report_junit(junit)) ||
	    (caps && cf_capability_write(caps)) ||
	    (devs && cf_report_deviations(devs))) {
		CU_cleanup_registry();
		return 99;
	}
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
