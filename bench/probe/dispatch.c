/* bench-dispatch: stands in front of a benchmarked charm's real dispatch
 * (renamed dispatch.real beside it). It notes the time and its own pid in
 * the environment, preloads bench-probe.so from the same dir, and execs
 * dispatch.real in the same process, so the probe can tell the hook
 * process from its children and time it from here to its exit. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    (void)argc;
    struct timespec t;
    char self[PATH_MAX], real[PATH_MAX + 16], probe[PATH_MAX + 16], num[32];
    ssize_t n;
    char *slash;
    clock_gettime(CLOCK_MONOTONIC, &t);
    snprintf(num, sizeof num, "%lld", (long long)t.tv_sec * 1000000000LL + t.tv_nsec);
    setenv("BENCH_T0", num, 1);
    snprintf(num, sizeof num, "%ld", (long)getpid());
    setenv("BENCH_HOOK_PID", num, 1);
    n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        perror("bench-dispatch: /proc/self/exe");
        return 127;
    }
    self[n] = 0;
    snprintf(real, sizeof real, "%s.real", self);
    slash = strrchr(self, '/');
    if (slash)
        *slash = 0;
    snprintf(probe, sizeof probe, "%s/bench-probe.so", self);
    setenv("LD_PRELOAD", probe, 1);
    execv(real, argv);
    perror("bench-dispatch: exec dispatch.real");
    return 127;
}
