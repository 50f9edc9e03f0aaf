/* Stands in for torch's libtorch_cuda.so: an object that needs libnccl.so.2 (DT_NEEDED), built
 * with either a DT_RPATH or a DT_RUNPATH, to check ncclcheck's ld.so search order against the
 * real loader's choice. */
extern int ncclGetVersion(int *version);

__attribute__((visibility("default"))) int requester_nccl_version(void) {
  int version = 0;
  ncclGetVersion(&version);
  return version;
}
