// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * insn_count: a QEMU TCG plugin that counts the guest instructions each
 * vCPU executes, so that the benchmark can state the work a request costs
 * a guest exactly (CPU time under TCG moves 10-40 % from run to run; an
 * instruction count does not).
 *
 *   qemu-system-... -plugin libinsn_count.so,sock=PATH
 *
 * Connecting to the Unix socket PATH returns one line, the count of each
 * vCPU so far ("N0 N1 ...\n"); the reader subtracts two readings.  QEMU
 * itself uses SIGUSR1, so no signal is used.
 *
 * A callback a translated block adds the block's instruction count to its
 * vCPU's counter: each counter has one writer, the vCPU's own thread (an
 * inline add into one shared counter would lose counts under MTTCG).  A
 * block left early (an exception, an interrupt taken mid-block) is counted
 * whole: an error far below 1 % on a kernel's straight-line code.
 *
 *   qemu-system-... -plugin libinsn_count.so,sock=PATH,pcs=on
 *
 * also counts where the instructions are: each block's executions, keyed
 * by its start address and length.  A reader then sends one line first:
 * an empty one for the counts as above, "pcs" for the table, a line a
 * block, "VADDR N_INSNS EXECS\n" (hex, decimal, decimal: all vCPUs' sum),
 * ended by an empty line.  The reader subtracts two tables and names the
 * addresses (ci/insn_profile.py).  Without pcs=on nothing of this runs.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define MAX_VCPUS 64

static uint64_t insns[MAX_VCPUS];	/* written by vCPU i's thread only */
static int n_vcpus;
static int listen_fd = -1;
static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];

/* pcs=on: a block's executions, by vCPU (each slot written by its vCPU only) */
struct block {
	uint64_t vaddr;
	uint64_t n_insns;
	struct block *next;	/* in its hash chain */
	uint64_t execs[];
};

#define BLOCK_BITS 16
static bool pcs;
static struct block *blocks[1 << BLOCK_BITS];
static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;

static void tb_exec(unsigned int vcpu, void *udata)
{
	uint64_t n = __atomic_load_n(&insns[vcpu], __ATOMIC_RELAXED);

	__atomic_store_n(&insns[vcpu], n + (uintptr_t)udata, __ATOMIC_RELAXED);
}

static void block_exec(unsigned int vcpu, void *udata)
{
	struct block *b = udata;
	uint64_t n = __atomic_load_n(&insns[vcpu], __ATOMIC_RELAXED);
	uint64_t e = __atomic_load_n(&b->execs[vcpu], __ATOMIC_RELAXED);

	__atomic_store_n(&insns[vcpu], n + b->n_insns, __ATOMIC_RELAXED);
	__atomic_store_n(&b->execs[vcpu], e + 1, __ATOMIC_RELAXED);
}

/* The record of the block at @vaddr, @n_insns long: one a pair, kept for good. */
static struct block *block_get(uint64_t vaddr, uint64_t n_insns)
{
	unsigned int h = (vaddr ^ (vaddr >> BLOCK_BITS) ^ (n_insns << 7)) & ((1 << BLOCK_BITS) - 1);
	struct block *b;

	pthread_mutex_lock(&blocks_lock);
	for (b = blocks[h]; b; b = b->next)
		if (b->vaddr == vaddr && b->n_insns == n_insns)
			break;
	if (!b) {
		b = calloc(1, sizeof(*b) + n_vcpus * sizeof(b->execs[0]));
		if (b) {
			b->vaddr = vaddr;
			b->n_insns = n_insns;
			b->next = blocks[h];
			__atomic_store_n(&blocks[h], b, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&blocks_lock);
	return b;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);
	struct block *b;

	if (pcs && (b = block_get(qemu_plugin_tb_vaddr(tb), n))) {
		qemu_plugin_register_vcpu_tb_exec_cb(tb, block_exec, QEMU_PLUGIN_CB_NO_REGS, b);
		return;
	}
	qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, QEMU_PLUGIN_CB_NO_REGS,
					     (void *)(uintptr_t)n);
}

static int write_all(int fd, const char *buf, size_t len)
{
	size_t done;
	ssize_t n;

	for (done = 0; done < len; done += n) {
		n = send(fd, buf + done, len - done, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR) {
			n = 0;
			continue;
		}
		if (n <= 0)
			return -1;
	}
	return 0;
}

/* One line of counts to a reader that connected. */
static void answer(int fd)
{
	char line[MAX_VCPUS * 21 + 2];
	size_t len = 0;
	int i;

	for (i = 0; i < n_vcpus; i++)
		len += snprintf(line + len, sizeof(line) - len, "%s%" PRIu64, i ? " " : "",
				__atomic_load_n(&insns[i], __ATOMIC_RELAXED));
	line[len++] = '\n';
	write_all(fd, line, len);
}

/* pcs=on: every block executed so far, a line each, then an empty line. */
static void answer_pcs(int fd)
{
	char buf[65536];
	size_t len = 0;
	unsigned int h;
	int i;

	for (h = 0; h < 1 << BLOCK_BITS; h++) {
		struct block *b;

		for (b = __atomic_load_n(&blocks[h], __ATOMIC_ACQUIRE); b; b = b->next) {
			uint64_t e = 0;

			for (i = 0; i < n_vcpus; i++)
				e += __atomic_load_n(&b->execs[i], __ATOMIC_RELAXED);
			if (!e)
				continue;
			if (len > sizeof(buf) - 64) {
				if (write_all(fd, buf, len))
					return;
				len = 0;
			}
			len += snprintf(buf + len, sizeof(buf) - len, "%" PRIx64 " %" PRIu64
					" %" PRIu64 "\n", b->vaddr, b->n_insns, e);
		}
	}
	buf[len++] = '\n';
	write_all(fd, buf, len);
}

/* pcs=on: the reader's request, a line; true if it asks for the table. */
static bool wants_pcs(int fd)
{
	char req[16];
	size_t len = 0;
	ssize_t n;

	while (len < sizeof(req)) {
		n = read(fd, req + len, sizeof(req) - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += n;
		if (memchr(req, '\n', len))
			break;
	}
	return len >= 3 && !memcmp(req, "pcs", 3);
}

static void *serve(void *unused)
{
	for (;;) {
		int fd = accept(listen_fd, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL;
		}
		if (pcs && wants_pcs(fd))
			answer_pcs(fd);
		else
			answer(fd);
		close(fd);
	}
}

static void at_exit(qemu_plugin_id_t id, void *unused)
{
	unlink(sock_path);
}

static int open_socket(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	pthread_t thread;

	if (strlen(path) >= sizeof(addr.sun_path)) {
		fprintf(stderr, "insn_count: sock=%s: longer than a socket path may be\n", path);
		return -1;
	}
	strcpy(addr.sun_path, path);
	strcpy(sock_path, path);
	unlink(path);
	listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&addr, sizeof(addr)) ||
	    listen(listen_fd, 8)) {
		fprintf(stderr, "insn_count: sock=%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (pthread_create(&thread, NULL, serve, NULL)) {
		fprintf(stderr, "insn_count: no thread to answer on %s\n", path);
		return -1;
	}
	pthread_detach(thread);
	return 0;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
					   int argc, char **argv)
{
	const char *path = NULL;
	int i;

	for (i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "sock=", 5))
			path = argv[i] + 5;
		else if (!strcmp(argv[i], "pcs=on"))
			pcs = true;
		else {
			fprintf(stderr, "insn_count: unknown argument %s (sock=PATH, pcs=on)\n",
				argv[i]);
			return -1;
		}
	}
	if (!path) {
		fprintf(stderr, "insn_count: needs sock=PATH, where the counts are read\n");
		return -1;
	}
	if (info->system_emulation)
		n_vcpus = info->system.max_vcpus;
	else
		n_vcpus = 1;
	if (n_vcpus > MAX_VCPUS) {
		fprintf(stderr, "insn_count: %d vCPUs, at most %d\n", n_vcpus, MAX_VCPUS);
		return -1;
	}
	if (open_socket(path))
		return -1;
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
