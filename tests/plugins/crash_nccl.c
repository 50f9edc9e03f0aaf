/* A "libnccl" that kills whoever loads it: its constructor aborts (SIGABRT), as a library
 * built for another CUDA or glibc can. -DCRASH_SEGV dereferences NULL instead (SIGSEGV). */
#include <stdlib.h>

__attribute__((constructor)) static void die_on_load(void) {
#ifdef CRASH_SEGV
  volatile int *nothing = 0;
  *nothing = 1;
#endif
  abort();
}

__attribute__((visibility("default"))) int ncclGetVersion(int *version) {
  *version = 23203;
  return 0;
}
