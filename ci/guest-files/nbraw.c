/*
 * nbraw: the test guest's raw Ethernet helper, for frames no socket would
 * send (forged sources, VLAN tags, bad checksums).
 *
 *   nbraw IFACE [-w MS] [-g FIFO] [HEX...]
 *
 * Sends each HEX (a whole Ethernet frame, in hex) on IFACE through a packet
 * socket, then prints every frame IFACE receives -- not those it sends -- for
 * MS milliseconds (default 500) after the last one sent, one line of hex
 * each, and exits 0.  Exits 1 with the errno when the socket cannot be had.
 * With -g, it reads nothing until a line comes on FIFO: what arrives
 * meanwhile stays in the socket (a receive buffer of 16 MiB, its own sends
 * left out), each frame holding the page it came in -- a client slow to read
 * its replies, for as long as a test wants.
 * A received frame's VLAN tag, which the stack moves out of the frame before
 * a packet socket sees it, is put back where it was (as tcpdump does).
 *
 * Built statically by ci/initramfs.py and installed as /usr/bin/nbraw.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int usage(void)
{
	fprintf(stderr, "usage: nbraw IFACE [-w MS] [-g FIFO] [HEX...]\n");
	return 2;
}

/* Room for every frame a held socket is sent, and none of its own sends. */
static int hold_replies(int fd)
{
	int size = 16 << 20, one = 1;

	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0 ||
	    setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) < 0) {
		perror("nbraw: setsockopt");
		return -1;
	}
	return 0;
}

/* Block until a line (or end of file) comes on the FIFO at @path. */
static int wait_for_go(const char *path)
{
	char line[16];
	FILE *f = fopen(path, "r");

	if (!f) {
		perror("nbraw: fifo");
		return -1;
	}
	if (!fgets(line, sizeof(line), f))
		line[0] = 0;
	fclose(f);
	return 0;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int unhex(const char *hex, unsigned char *out, size_t max)
{
	size_t n = strlen(hex), i;

	if (n % 2 || n / 2 > max)
		return -1;
	for (i = 0; i < n / 2; i++) {
		unsigned int b;

		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			return -1;
		out[i] = (unsigned char)b;
	}
	return (int)(n / 2);
}

/* One received frame in hex, its VLAN tag (from the aux data) in place. */
static void print_frame(int fd, unsigned char *buf, size_t size)
{
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(sizeof(struct tpacket_auxdata))];
	} ctl;
	struct sockaddr_ll from;
	struct iovec iov = { .iov_base = buf, .iov_len = size };
	struct msghdr msg = {
		.msg_name = &from, .msg_namelen = sizeof(from),
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = &ctl, .msg_controllen = sizeof(ctl),
	};
	struct cmsghdr *c;
	ssize_t n = recvmsg(fd, &msg, 0), k;

	if (n < 12 || from.sll_pkttype == PACKET_OUTGOING)
		return;
	for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		struct tpacket_auxdata *aux = (void *)CMSG_DATA(c);

		if (c->cmsg_level != SOL_PACKET || c->cmsg_type != PACKET_AUXDATA ||
		    !(aux->tp_status & TP_STATUS_VLAN_VALID) || (size_t)n + 4 > size)
			continue;
		memmove(buf + 16, buf + 12, (size_t)n - 12);
		buf[12] = 0x81;
		buf[13] = 0x00;
		if (aux->tp_status & TP_STATUS_VLAN_TPID_VALID) {
			buf[12] = aux->tp_vlan_tpid >> 8;
			buf[13] = aux->tp_vlan_tpid & 0xff;
		}
		buf[14] = aux->tp_vlan_tci >> 8;
		buf[15] = aux->tp_vlan_tci & 0xff;
		n += 4;
	}
	for (k = 0; k < n; k++)
		printf("%02x", buf[k]);
	putchar('\n');
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static unsigned char buf[65536];
	struct sockaddr_ll sll;
	long wait_ms = 500, end;
	const char *go = NULL;
	int fd, i = 2, ifindex, one = 1;

	if (argc < 2)
		return usage();
	ifindex = (int)if_nametoindex(argv[1]);
	if (!ifindex) {
		fprintf(stderr, "nbraw: no interface %s\n", argv[1]);
		return 1;
	}
	if (argc > i + 1 && !strcmp(argv[i], "-w")) {
		wait_ms = atol(argv[i + 1]);
		i += 2;
	}
	if (argc > i + 1 && !strcmp(argv[i], "-g")) {
		go = argv[i + 1];
		i += 2;
	}
	fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	if (fd < 0) {
		perror("nbraw: socket");
		return 1;
	}
	memset(&sll, 0, sizeof(sll));
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ETH_P_ALL);
	sll.sll_ifindex = ifindex;
	/* bound before sending: no reply comes before we listen */
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0 ||
	    setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof(one)) < 0) {
		perror("nbraw: bind");
		return 1;
	}
	if (go && hold_replies(fd) < 0)
		return 1;
	for (; i < argc; i++) {
		int n = unhex(argv[i], buf, sizeof(buf));

		if (n < 14) {
			fprintf(stderr, "nbraw: bad frame %s\n", argv[i]);
			return 2;
		}
		if (send(fd, buf, (size_t)n, 0) < 0) {
			perror("nbraw: send");
			return 1;
		}
	}
	if (go && wait_for_go(go) < 0)
		return 1;
	end = now_ms() + wait_ms;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long left = end - now_ms();

		if (left <= 0)
			break;
		if (poll(&p, 1, (int)left) > 0)
			print_frame(fd, buf, sizeof(buf));
	}
	return 0;
}
