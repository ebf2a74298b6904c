/*
 * nbudp: the test guest's UDP helper (busybox's nc here has no -u).
 *
 *   nbudp listen PORT [-n COUNT]  bind 0.0.0.0:PORT, say so on stderr, then
 *                                 print each datagram's payload on stdout;
 *                                 exits 1 with the errno if the bind fails
 *                                 (like `nc -u -l -p PORT`), 0 after COUNT.
 *   nbudp send ADDR PORT TEXT     send TEXT as one datagram.
 *
 * Built statically by ci/initramfs.py and installed as /usr/bin/nbudp.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int usage(void)
{
	fprintf(stderr, "usage: nbudp listen PORT [-n COUNT] | nbudp send ADDR PORT TEXT\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa;
	int fd;

	if (argc < 3)
		return usage();
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0) {
		perror("nbudp: socket");
		return 1;
	}
	if (!strcmp(argv[1], "listen")) {
		long count = -1;
		static char buf[65536];

		if (argc == 5 && !strcmp(argv[3], "-n"))
			count = atol(argv[4]);
		else if (argc != 3)
			return usage();
		sa.sin_port = htons(atoi(argv[2]));
		sa.sin_addr.s_addr = htonl(INADDR_ANY);
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			fprintf(stderr, "nbudp: bind udp port %s: %s\n", argv[2], strerror(errno));
			return 1;
		}
		fprintf(stderr, "nbudp: listening on udp port %s\n", argv[2]);
		while (count != 0) {
			ssize_t n = recv(fd, buf, sizeof(buf), 0);

			if (n < 0) {
				if (errno == EINTR)
					continue;
				perror("nbudp: recv");
				return 1;
			}
			fwrite(buf, 1, n, stdout);
			fputc('\n', stdout);
			fflush(stdout);
			if (count > 0)
				count--;
		}
		return 0;
	}
	if (!strcmp(argv[1], "send") && argc == 5) {
		sa.sin_port = htons(atoi(argv[3]));
		if (inet_pton(AF_INET, argv[2], &sa.sin_addr) != 1)
			return usage();
		if (sendto(fd, argv[4], strlen(argv[4]), 0, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			perror("nbudp: send");
			return 1;
		}
		return 0;
	}
	return usage();
}
