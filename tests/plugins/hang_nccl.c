/* A "libnccl" that never finishes loading: its constructor sleeps forever, as a library stuck
 * on a driver or a lock would. ncclcheck must give up at its deadline, not wait. */
#include <unistd.h>

__attribute__((constructor)) static void hang_on_load(void) {
  for (;;) pause();
}

__attribute__((visibility("default"))) int ncclGetVersion(int *version) {
  *version = 23203;
  return 0;
}
