// SPDX-License-Identifier: GPL-2.0
/*
 * zdkmsg: wait for the kernel to log a line, asleep, for the steps that
 * wait for work the kernel goes on with after the step's command returned
 * (guest/common.sh settle_background).  Built statically on the host and
 * run in the guest:
 *
 *   zdkmsg wait TEXT SECONDS [AFTER]
 *
 * Reads /dev/kmsg from the first record after the last "dmesg -c", the
 * records the scenario has not forwarded yet, and returns once one of them
 * contains TEXT: 0 then, 1 when SECONDS pass first, 2 on a usage or system
 * error.  With AFTER, it waits only if one of the records logged so far
 * contains AFTER, and for a TEXT after that one; if none does, it returns
 * 0 at once.  It prints nothing on success: the scenario forwards the
 * records itself (dmesg -c).
 *
 * A shell loop of sleep and dmesg would do the same, but under TCG every
 * process it starts takes a vCPU from the kernel work being waited for.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The kernel's limit on one /dev/kmsg record (CONSOLE_EXT_LOG_MAX). */
#define RECORD_MAX	8192

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* The text of a /dev/kmsg record: "prio,seq,usec,flags;text\n", then
 * " KEY=value" lines. */
static const char *record_text(const char *record)
{
	const char *text = strchr(record, ';');

	return text ? text + 1 : "";
}

int main(int argc, char **argv)
{
	static char record[RECORD_MAX + 1];
	const char *after = argc == 5 ? argv[4] : NULL;
	long long deadline;
	char *end;
	long seconds;
	int fd;

	if ((argc != 4 && argc != 5) || strcmp(argv[1], "wait") ||
	    !argv[2][0] || (after && !after[0])) {
		fprintf(stderr, "usage: zdkmsg wait TEXT SECONDS [AFTER]\n");
		return 2;
	}
	seconds = strtol(argv[3], &end, 10);
	if (*end || seconds <= 0) {
		fprintf(stderr, "zdkmsg: SECONDS must be a positive number, not '%s'\n",
			argv[3]);
		return 2;
	}
	deadline = now_ms() + seconds * 1000LL;

	fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		perror("zdkmsg: /dev/kmsg");
		return 2;
	}
	/* SEEK_DATA: the first record after the last SYSLOG_ACTION_CLEAR. */
	if (lseek(fd, 0, SEEK_DATA) < 0) {
		perror("zdkmsg: lseek /dev/kmsg");
		return 2;
	}
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		long long left = deadline - now_ms();
		ssize_t n;

		n = read(fd, record, RECORD_MAX);
		if (n < 0 && errno == EAGAIN) {
			/* Every record so far read, none with AFTER. */
			if (after)
				return 0;
			if (left <= 0)
				return 1;
			if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR) {
				perror("zdkmsg: poll /dev/kmsg");
				return 2;
			}
			continue;
		}
		/* EPIPE: records overwritten before they were read; go on. */
		if (n < 0 && errno != EPIPE && errno != EINTR) {
			perror("zdkmsg: read /dev/kmsg");
			return 2;
		}
		if (n <= 0)
			continue;
		record[n] = '\0';
		if (after) {
			if (strstr(record_text(record), after))
				after = NULL;
		} else if (strstr(record_text(record), argv[2])) {
			return 0;
		}
	}
}
