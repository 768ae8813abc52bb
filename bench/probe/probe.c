/* Preloaded (LD_PRELOAD) into a benchmarked hook and everything it runs.
 *
 * When the hook process itself exits (the pid bench-dispatch recorded in
 * BENCH_HOOK_PID), append one JSON line to $BENCH_PROBE_LOG: the wall time
 * since bench-dispatch started, and the process's peak resident set
 * (VmHWM, which exec resets, so it is the charm's own and never that of
 * the shell before it or of any child). Once the hook process is the charm
 * itself (no longer a shell), the probe takes itself out of the
 * environment, so hook tools, etcdctl and etcd run unprobed. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static long vm_hwm_kb(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    long kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static void comm(char *out, size_t n)
{
    int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd < 0 ? -1 : read(fd, out, n - 1);
    if (fd >= 0)
        close(fd);
    if (got <= 0)
        got = 0;
    out[got] = 0;
    for (char *p = out; *p; p++)
        if (*p == '\n' || *p == '"' || *p == '\\')
            *p = 0;
}

static int is_hook_process(void)
{
    const char *hook_pid = getenv("BENCH_HOOK_PID");
    return hook_pid && atol(hook_pid) == (long)getpid();
}

static int running_a_shell(void)
{
    char exe[4096];
    const char *base;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return 0;
    exe[n] = 0;
    base = strrchr(exe, '/');
    base = base ? base + 1 : exe;
    return !strcmp(base, "sh") || !strcmp(base, "dash") || !strcmp(base, "bash");
}

__attribute__((constructor)) static void start(void)
{
    if (is_hook_process() && !running_a_shell())
        unsetenv("LD_PRELOAD");
}

__attribute__((destructor)) static void report(void)
{
    const char *log = getenv("BENCH_PROBE_LOG");
    const char *t0 = getenv("BENCH_T0");
    const char *context = getenv("JUJU_CONTEXT_ID");
    char buf[512], name[64];
    long long end = now_ns();
    int n, fd;
    if (!log || !t0 || !context || !is_hook_process())
        return;
    comm(name, sizeof name);
    n = snprintf(buf, sizeof buf,
                 "{\"context\":\"%s\",\"comm\":\"%s\",\"wall_us\":%lld,\"vmhwm_kb\":%ld}\n",
                 context, name, (end - atoll(t0)) / 1000, vm_hwm_kb());
    if (n <= 0 || n >= (int)sizeof buf)
        return;
    fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    if (write(fd, buf, n) != n) {
        /* a lost sample shows up as a missing row, nothing to do here */
    }
    close(fd);
}
