/* Preloaded into the ranks of a test (mpirun -x LD_PRELOAD=...): the rank whose
 * OMPI_COMM_WORLD_RANK is ATTNBATCH_TEST_KILL_RANK gets SIGKILL ATTNBATCH_TEST_KILL_AFTER_US
 * microseconds after its first successful connect(), which is MPI_Init's PMIx client reaching
 * the launcher's server: a kill inside the PMIx handshake, the moment a clock from the launch
 * cannot aim at (loading the libraries before it takes 0.1-0.5 s, varying with the load), and
 * the one that leaves Open MPI 4.1's mpirun stuck in its teardown (launcher_watchdog.hpp). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long delay_us;
static int armed;

static void* kill_later(void* unused) {
    (void)unused;
    struct timespec pause = {delay_us / 1000000, (delay_us % 1000000) * 1000};
    while (nanosleep(&pause, &pause) != 0) {
    }
    kill(getpid(), SIGKILL);
    return NULL;
}

int connect(int fd, const struct sockaddr* address, socklen_t length) {
    static int (*real_connect)(int, const struct sockaddr*, socklen_t);
    if (real_connect == NULL) real_connect = (int (*)(int, const struct sockaddr*, socklen_t))dlsym(RTLD_NEXT, "connect");
    const int result = real_connect(fd, address, length);
    if (result == 0 && !__atomic_exchange_n(&armed, 1, __ATOMIC_SEQ_CST)) {
        const char* rank = getenv("OMPI_COMM_WORLD_RANK");
        const char* victim = getenv("ATTNBATCH_TEST_KILL_RANK");
        const char* after = getenv("ATTNBATCH_TEST_KILL_AFTER_US");
        if (rank != NULL && victim != NULL && after != NULL && strcmp(rank, victim) == 0) {
            delay_us = atol(after);
            pthread_t killer;
            if (pthread_create(&killer, NULL, kill_later, NULL) != 0) kill(getpid(), SIGKILL);
        }
    }
    return result;
}
