/* A stand-in libnccl.so.2 with the calls ncclcheck asks, for what the real wheel cannot show:
 * an old version encoding (-DVERSION_CODE=2804), a banner of another release, and two copies
 * in different directories to see which one ld.so picks. */
#include <string.h>

#ifndef VERSION_CODE
#define VERSION_CODE 21803
#endif
#ifndef BANNER
#define BANNER "2.18.3+cuda12.2"
#endif

__attribute__((visibility("default"))) const char nccl_banner[] = "NCCL version " BANNER;

__attribute__((visibility("default"))) int ncclGetVersion(int *version) {
  *version = VERSION_CODE;
  return 0;
}

__attribute__((visibility("default"))) const char *ncclGetErrorString(int code) {
  return code == 0 ? "no error" : "unknown result code";
}

__attribute__((visibility("default"))) int ncclGetUniqueId(void *id) {
  memset(id, 0, 128);
  return 0;
}
