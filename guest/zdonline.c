// SPDX-License-Identifier: GPL-2.0
/*
 * zdonline: change the state of memory blocks and time it, for the hotplug
 * scenarios (guest/hotplug.sh).  Built statically on the host and run in
 * the guest:
 *
 *   zdonline now
 *   zdonline STATE BLOCK...
 *
 * Both first wait until the console has sent everything written to it:
 * the serial port would otherwise keep interrupting the guest with the
 * kernel log the scenario just forwarded, inside the time measured.
 *
 * "now" prints CLOCK_MONOTONIC in microseconds.  Otherwise STATE
 * ("online_movable", "online_kernel", "offline", ...) is written to
 * /sys/devices/system/memory/memoryBLOCK/state for each BLOCK in turn,
 * and "us=<total> blocks=<n> max_us=<slowest block>" is printed: the wall
 * time of the whole operation as user space sees it.  Exits 1 when a
 * write fails (naming the block and the error), 2 on a usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static void drain_console(void)
{
	int fd = open("/dev/console", O_WRONLY | O_NOCTTY);

	if (fd >= 0) {
		tcdrain(fd);
		close(fd);
	}
}

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

int main(int argc, char **argv)
{
	long long start, total, slowest = 0;
	int i;

	drain_console();
	if (argc == 2 && !strcmp(argv[1], "now")) {
		printf("%lld\n", now_us());
		return 0;
	}
	if (argc < 3) {
		fprintf(stderr, "usage: zdonline now | zdonline STATE BLOCK...\n");
		return 2;
	}
	start = now_us();
	for (i = 2; i < argc; i++) {
		char path[96];
		long long t = now_us();
		ssize_t len = strlen(argv[1]);
		int fd;

		snprintf(path, sizeof(path),
			 "/sys/devices/system/memory/memory%s/state", argv[i]);
		fd = open(path, O_WRONLY);
		if (fd < 0 || write(fd, argv[1], len) != len) {
			fprintf(stderr, "zdonline: %s > %s: %s\n", argv[1], path,
				strerror(errno));
			return 1;
		}
		close(fd);
		t = now_us() - t;
		if (t > slowest)
			slowest = t;
	}
	total = now_us() - start;
	printf("us=%lld blocks=%d max_us=%lld\n", total, argc - 2, slowest);
	return 0;
}
