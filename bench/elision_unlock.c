/* What glibc 2.36's pthread_mutex_unlock does with a mutex read out of freed-and-reused memory
   (bench/trace_crash.py): a __kind with the lock-elision bit (PTHREAD_MUTEX_ELISION_NP, 256) and a zero
   lock word takes __lll_unlock_elision's `xend` outside a transaction. Here it faults at libc+0x85e06,
   the frame of tritonserver 2.51's SIGSEGVs in TraceManager::TraceRelease.
   Build and run: cc -O1 -o /tmp/elision_unlock bench/elision_unlock.c && /tmp/elision_unlock; dmesg | tail -1 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    pthread_mutex_t mutex;
    memset(&mutex, 0, sizeof mutex);
    mutex.__data.__kind = 256;
    puts("unlocking a zeroed mutex whose kind has the elision bit");
    fflush(stdout);
    pthread_mutex_unlock(&mutex);
    puts("survived: this libc did not take the elision path");
    return 0;
}
