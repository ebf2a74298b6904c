// netblkctl genkey: a key for start's and attach's key=FILE.
#include "commands.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/random.h>

#include "cli.h"

// A new key for key=, from the kernel's random numbers.
int cmd_genkey(const command_args &argv)
{
	if (!argv.empty())
		return usage_error("genkey takes no arguments");
	uint8_t key[NETBLK_KEY_BYTES];
	if (getrandom(key, sizeof(key), 0) != sizeof(key)) {
		fprintf(stderr, "netblkctl: getrandom: %s\n", strerror(errno));
		return exit_failed;
	}
	for (uint8_t b : key)
		printf("%02x", b);
	printf("\n");
	return 0;
}

