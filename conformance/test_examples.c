// SPDX-License-Identifier: MIT
/*
 * The manual's example programs, run against the device under test as
 * part of the suite's report: the RC example (manual 7.1: a server and a
 * client exchange a SEND, then the client does an RDMA READ and an RDMA
 * WRITE of the server's buffer while the server sits in a TCP read) and
 * the multicast example (manual 7.3 / 8.2: RDMA CM and UD multicast, the
 * receivers get every datagram of the sender, each byte checked).
 *
 * The programs are examples/rc_example and examples/mc_example of the
 * build tree (-X DIR names another directory).  The RC example is given
 * the device, port and GID index of the run (-d, -i, -g), and its client
 * connects to the run's address (-a; 127.0.0.1 without it); the multicast
 * example binds to that address, which selects the device through the
 * RDMA CM.  Each runs in a process of its own with its output in a file,
 * bounded in time and killed with the suite, and a failure quotes the end
 * of that output.
 *
 * Lock rule: none; one thread, children waited for by PID.
 */
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests.h"

/* A bound on each example process: the guest of a VM without KVM runs
 * some twenty times slower than the host. */
#define EX_PROC_MS 180000
#define EX_OUT_MAX 16384

const char *cf_examples_dir;

/* One example process: its PID, output file and what it ended with. */
struct ex_proc {
	pid_t pid;
	char out[64];
	int status;
	bool done;
};

/* The path of example program name, or NULL (a skip) when not built. */
static const char *ex_program(const char *name, char *path, size_t len)
{
	char self[PATH_MAX];
	ssize_t n;
	char *slash;

	if (cf_examples_dir) {
		snprintf(path, len, "%s/%s", cf_examples_dir, name);
	} else {
		n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n <= 0)
			return NULL;
		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash)
			*slash = '\0';
		if (snprintf(path, len, "%s/examples/%s", self, name) >=
		    (int)len)
			return NULL;
	}
	return access(path, X_OK) ? NULL : path;
}

/* Start the program and its arguments (a NULL-ended list) with its
 * output in a file of its own; 0 or -1 (a failure of the test). */
static int ex_start(struct ex_proc *p, const char *prog, ...)
{
	char *argv[24];
	va_list ap;
	int fd, n = 0;

	argv[n++] = (char *)prog;
	va_start(ap, prog);
	while (n < 23 && (argv[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;
	memset(p, 0, sizeof(*p));
	snprintf(p->out, sizeof(p->out), "/tmp/cf-example-XXXXXX");
	fd = mkstemp(p->out);
	if (fd < 0) {
		CF_CHECK(0, "mkstemp: %s", cf_errname(errno));
		return -1;
	}
	fflush(NULL);
	p->pid = fork();
	if (p->pid == 0) {
		/* Killed with the suite, whatever ends it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		close(fd);
		execv(prog, argv);
		fprintf(stderr, "exec %s: %s\n", prog, strerror(errno));
		_exit(127);
	}
	close(fd);
	if (p->pid < 0) {
		CF_CHECK(0, "fork: %s", cf_errname(errno));
		unlink(p->out);
		return -1;
	}
	return 0;
}

/* The output of p so far (at most its last EX_OUT_MAX - 1 bytes). */
static void ex_output(const struct ex_proc *p, char *buf, size_t len)
{
	ssize_t n = 0;
	off_t size;
	int fd;

	buf[0] = '\0';
	fd = open(p->out, O_RDONLY);
	if (fd < 0)
		return;
	size = lseek(fd, 0, SEEK_END);
	if (size > (off_t)len - 1)
		lseek(fd, size - (off_t)len + 1, SEEK_SET);
	else
		lseek(fd, 0, SEEK_SET);
	n = read(fd, buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
}

static bool ex_said(const struct ex_proc *p, const char *line)
{
	char buf[EX_OUT_MAX];

	ex_output(p, buf, sizeof(buf));
	return strstr(buf, line) != NULL;
}

/* Whether p has ended (its status recorded), without waiting. */
static bool ex_ended(struct ex_proc *p)
{
	pid_t r;

	if (p->done)
		return true;
	r = waitpid(p->pid, &p->status, WNOHANG);
	if (r == p->pid || r < 0) {
		p->done = true;
		if (r < 0)
			p->status = -1;
	}
	return p->done;
}

/* Wait for p until deadline (ms of cf_now_ms); killed when it overstays.
 * True when it exited 0. */
static bool ex_wait(struct ex_proc *p, long long deadline)
{
	while (!ex_ended(p)) {
		if (cf_now_ms() > deadline) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &p->status, 0);
			p->done = true;
			p->status = -1;
			break;
		}
		usleep(20000);
	}
	return p->status != -1 && WIFEXITED(p->status) &&
	       WEXITSTATUS(p->status) == 0;
}

/* Check that p succeeded and said each of the lines; quote its output's
 * end when not.  Removes the output file. */
static void ex_verdict(struct ex_proc *p, const char *who, ...)
{
	char buf[EX_OUT_MAX], *tail;
	const char *line;
	bool ok = p->status != -1 && WIFEXITED(p->status) &&
		  WEXITSTATUS(p->status) == 0;
	va_list ap;

	ex_output(p, buf, sizeof(buf));
	va_start(ap, who);
	while ((line = va_arg(ap, const char *)))
		ok = ok && strstr(buf, line);
	va_end(ap);
	tail = buf + (strlen(buf) > 300 ? strlen(buf) - 300 : 0);
	CF_CHECK(ok, "%s: %s; output ends: %s", who,
		 p->status == -1 ? "did not end in time (killed)"
		 : !WIFEXITED(p->status) ? "killed by a signal"
		 : WEXITSTATUS(p->status) ? "exit status not 0"
					  : "an expected line is missing",
		 tail);
	unlink(p->out);
}

/* Whether a TCP socket listens on port (IPv4 or IPv6, /proc/net/tcp*). */
static bool ex_tcp_listening(unsigned int port)
{
	static const char *const files[] = { "/proc/net/tcp",
					     "/proc/net/tcp6" };
	unsigned int lport, state;
	char line[512], *colon;
	bool found = false;
	size_t i;
	FILE *f;

	for (i = 0; i < CF_ARRAY_SIZE(files) && !found; i++) {
		f = fopen(files[i], "r");
		if (!f)
			continue;
		while (!found && fgets(line, sizeof(line), f)) {
			/* "sl local_address:port rem_address:port st ..." */
			colon = strchr(line, ':');
			colon = colon ? strchr(colon + 1, ':') : NULL;
			if (colon && sscanf(colon + 1, "%x %*s %x", &lport,
					    &state) == 2)
				found = lport == port && state == 0x0A;
		}
		fclose(f);
	}
	return found;
}

/* A TCP port nobody uses now, from the kernel's ephemeral range. */
static unsigned int ex_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	unsigned int port = 0;

	if (s < 0)
		return 0;
	if (!bind(s, (struct sockaddr *)&a, sizeof(a)) &&
	    !getsockname(s, (struct sockaddr *)&a, &len))
		port = ntohs(a.sin_port);
	close(s);
	return port;
}

/*
 * Manual 7.1: the server waits on a TCP port, the client connects to the
 * run's address (127.0.0.1 without -a); both bring an RC QP up (manual
 * 3.5), the server SENDs "SEND operation", the client reads the server's
 * buffer ("RDMA read operation") and writes "RDMA write operation" into
 * it, which the server then prints.
 */
CF_TEST_IMPL(examples, rc_example)
{
	const long long deadline = cf_now_ms() + EX_PROC_MS;
	char prog[PATH_MAX], tcp[16], port[16], gid[16];
	const char *addr = cf_cm_addr ? cf_cm_addr : "127.0.0.1";
	struct ex_proc server, client;
	unsigned int tcp_port = ex_free_port();

	if (!ex_program("rc_example", prog, sizeof(prog)))
		SKIP("examples/rc_example is not built here (-X DIR names "
		     "where it is)");
	CU_ASSERT_FATAL(tcp_port != 0);
	snprintf(tcp, sizeof(tcp), "%u", tcp_port);
	snprintf(port, sizeof(port), "%d", cf_port);
	snprintf(gid, sizeof(gid), "%d", cf_gid_index);
	if (ex_start(&server, prog, "-d", cf_dev_name, "-i", port, "-g", gid,
		     "-p", tcp, NULL))
		return;
	while (!ex_tcp_listening(tcp_port) && !ex_ended(&server) &&
	       cf_now_ms() < deadline)
		usleep(20000);
	if (ex_start(&client, prog, "-d", cf_dev_name, "-i", port, "-g", gid,
		     "-p", tcp, addr, NULL)) {
		ex_wait(&server, 0);
		unlink(server.out);
		return;
	}
	ex_wait(&client, deadline);
	ex_wait(&server, deadline);
	ex_verdict(&client, "rc_example client",
		   "Message is: 'SEND operation '",
		   "Contents of server's buffer: 'RDMA read operation '",
		   NULL);
	ex_verdict(&server, "rc_example server",
		   "Contents of server buffer: 'RDMA write operation'", NULL);
}

#define MC_RECEIVERS 2
#define MC_COUNT "64"

/*
 * Manual 7.3 / 8.2: receivers join a multicast group through the RDMA CM
 * (rdma_join_multicast on the run's address) and post their receives;
 * then a sender joins and sends; every receiver gets every datagram,
 * each byte checked by the example itself.
 */
CF_TEST_IMPL(examples, mc_example)
{
	long long deadline = cf_now_ms() + EX_PROC_MS;
	struct ex_proc recv[MC_RECEIVERS], send;
	char prog[PATH_MAX], group[32];
	int i, started;

	if (!ex_program("mc_example", prog, sizeof(prog)))
		SKIP("examples/mc_example is not built here (-X DIR names "
		     "where it is)");
	if (!cf_cm_addr)
		SKIP("the multicast example needs the device's IP address "
		     "(-a ADDR)");
	/* A group of this run's own, in the organization-local scope. */
	snprintf(group, sizeof(group), "239.255.%u.%u",
		 (unsigned int)(getpid() >> 8) & 0xff,
		 (unsigned int)getpid() & 0xff);
	for (started = 0; started < MC_RECEIVERS; started++)
		if (ex_start(&recv[started], prog, "-m", group, "-b",
			     cf_cm_addr, "-c", "1", "-C", MC_COUNT, "-S", "256",
			     NULL))
			break;
	/* The sender starts once every receiver has joined. */
	for (i = 0; i < started; i++)
		while (!ex_said(&recv[i], "joined") && !ex_ended(&recv[i]) &&
		       cf_now_ms() < deadline)
			usleep(20000);
	if (started == MC_RECEIVERS &&
	    !ex_start(&send, prog, "-s", "-m", group, "-b", cf_cm_addr, "-c",
		      "1", "-C", MC_COUNT, "-S", "256", NULL)) {
		ex_wait(&send, deadline);
		ex_verdict(&send, "mc_example sender",
			   "sent " MC_COUNT " messages", NULL);
	} else {
		/* Nothing will be sent: the receivers need not wait. */
		deadline = 0;
	}
	for (i = 0; i < started; i++) {
		ex_wait(&recv[i], deadline);
		ex_verdict(&recv[i], "mc_example receiver",
			   "received " MC_COUNT " messages", NULL);
	}
}
