/*
 * Test aid: moves the wall clock, and only the wall clock, of the process it is preloaded into
 * by PORTAL_TOKEN_TEST_CLOCK_SHIFT seconds (may be negative). Expiry is tested end to end with it
 * at the 23 h, 25 h and 7 d boundaries. Debian's faketime cannot be used: it also moves the
 * monotonic clock and breaks timers and waiting in Swift programs.
 *
 *   cc -shared -fPIC -O2 -o wallclock-shift.so wallclock-shift.c -ldl
 *   LD_PRELOAD=./wallclock-shift.so PORTAL_TOKEN_TEST_CLOCK_SHIFT=90000 portal-token get
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static long shift_seconds(void) {
	const char *text = getenv("PORTAL_TOKEN_TEST_CLOCK_SHIFT");
	return text ? strtol(text, NULL, 10) : 0;
}

int clock_gettime(clockid_t clock, struct timespec *now) {
	static int (*real)(clockid_t, struct timespec *);
	if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
	int result = real(clock, now);
	if (result == 0 && now && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE))
		now->tv_sec += shift_seconds();
	return result;
}

int gettimeofday(struct timeval *restrict now, void *restrict zone) {
	struct timespec spec;
	int result = clock_gettime(CLOCK_REALTIME, &spec);
	if (result == 0 && now) {
		now->tv_sec = spec.tv_sec;
		now->tv_usec = spec.tv_nsec / 1000;
	}
	(void)zone;
	return result;
}

time_t time(time_t *out) {
	struct timespec spec;
	clock_gettime(CLOCK_REALTIME, &spec);
	if (out) *out = spec.tv_sec;
	return spec.tv_sec;
}
