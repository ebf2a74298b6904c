/*
 * nbreuse: the test guest's "a failed write's buffer used again" helper.
 * An application whose O_DIRECT write failed may at once fill the same
 * buffer with other data: a block driver must hold none of its pages by
 * then, or those other bytes may still go out as the failed write.
 *
 *   nbreuse DEV OFFSET SIZE SECONDS  write SIZE bytes of 'a' from one buffer
 *                                    in one O_DIRECT pwrite at byte OFFSET
 *                                    of DEV.  If it fails, fill the same
 *                                    buffer with 'b' at once and keep it
 *                                    (the same pages, not freed) SECONDS
 *                                    before exiting.  Prints "written" or
 *                                    "failed: <errno text>"; exits 0 when
 *                                    written, 1 when it failed, 2 on misuse.
 *
 * Built statically by ci/initramfs.py and installed as /usr/bin/nbreuse.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAGE 4096

int main(int argc, char **argv)
{
	long long offset;
	long size, seconds;
	unsigned char *buf;
	ssize_t n;
	int fd, err;

	if (argc != 5) {
		fprintf(stderr, "usage: nbreuse DEV OFFSET SIZE SECONDS\n");
		return 2;
	}
	offset = atoll(argv[2]);
	size = atol(argv[3]);
	seconds = atol(argv[4]);
	if (size < 512 || size % 512 || size > (16 << 20) || seconds < 0) {
		fprintf(stderr, "nbreuse: SIZE a multiple of 512 up to 16 MiB, SECONDS >= 0\n");
		return 2;
	}
	if (posix_memalign((void **)&buf, PAGE, size)) {
		fprintf(stderr, "nbreuse: out of memory\n");
		return 2;
	}
	memset(buf, 'a', size);
	fd = open(argv[1], O_WRONLY | O_DIRECT);
	if (fd < 0) {
		fprintf(stderr, "nbreuse: %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	n = pwrite(fd, buf, size, offset);
	if (n == size) {
		printf("written\n");
		return 0;
	}
	err = n < 0 ? errno : EIO;
	/* the same pages, other bytes: what a reused buffer holds next */
	memset(buf, 'b', size);
	printf("failed: %s\n", strerror(err));
	fflush(stdout);
	sleep(seconds);
	close(fd);
	return 1;
}
