/*
 * nbiov: the test guest's scattered direct-I/O helper.  A database's or a
 * VM's disk writes from buffers in pieces smaller than a page (writev), and
 * the block layer keeps each piece a bio_vec of its own; fio and dd cannot
 * make that shape.
 *
 *   nbiov DEV OFFSET PIECES SIZE  write PIECES pieces of SIZE bytes, each at
 *                                 the start of a page of its own, in one
 *                                 O_DIRECT pwritev at byte OFFSET of DEV;
 *                                 read them back in one O_DIRECT pread and
 *                                 compare.  Exits 0 when they match, 1 with
 *                                 the errno or the first byte that differs.
 *
 * Built statically by ci/initramfs.py and installed as /usr/bin/nbiov.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define PAGE 4096
#define MAX_PIECES 64

int main(int argc, char **argv)
{
	struct iovec iov[MAX_PIECES];
	unsigned char *pages, *back;
	long long offset;
	long pieces, size, i, j;
	unsigned int seed = getpid();
	ssize_t n;
	int fd;

	if (argc != 5) {
		fprintf(stderr, "usage: nbiov DEV OFFSET PIECES SIZE\n");
		return 2;
	}
	offset = atoll(argv[2]);
	pieces = atol(argv[3]);
	size = atol(argv[4]);
	if (pieces < 1 || pieces > MAX_PIECES || size < 512 || size > PAGE || size % 512) {
		fprintf(stderr, "nbiov: PIECES 1..%d, SIZE a multiple of 512 up to %d\n",
			MAX_PIECES, PAGE);
		return 2;
	}
	/* every other page: no two pieces are neighbours in memory */
	if (posix_memalign((void **)&pages, PAGE, 2 * PAGE * pieces) ||
	    posix_memalign((void **)&back, PAGE, pieces * size)) {
		fprintf(stderr, "nbiov: out of memory\n");
		return 1;
	}
	for (i = 0; i < pieces; i++) {
		iov[i].iov_base = pages + 2 * PAGE * i;
		iov[i].iov_len = size;
		for (j = 0; j < size; j++)
			((unsigned char *)iov[i].iov_base)[j] = rand_r(&seed);
	}
	fd = open(argv[1], O_RDWR | O_DIRECT);
	if (fd < 0) {
		fprintf(stderr, "nbiov: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	n = pwritev(fd, iov, pieces, offset);
	if (n != pieces * size) {
		fprintf(stderr, "nbiov: pwritev: %zd of %ld bytes: %s\n", n, pieces * size,
			n < 0 ? strerror(errno) : "short");
		return 1;
	}
	n = pread(fd, back, pieces * size, offset);
	if (n != pieces * size) {
		fprintf(stderr, "nbiov: pread: %zd of %ld bytes: %s\n", n, pieces * size,
			n < 0 ? strerror(errno) : "short");
		return 1;
	}
	for (i = 0; i < pieces; i++) {
		if (memcmp(back + i * size, iov[i].iov_base, size)) {
			fprintf(stderr, "nbiov: piece %ld (byte %ld) reads back different\n", i,
				i * size);
			return 1;
		}
	}
	close(fd);
	return 0;
}
