/* A stand-in NCCL plugin: exports the versioned entry symbols chosen with -D flags, e.g.
 *   gcc -shared -fPIC -DNET_VERSION=8 -DNET_VERSION_OLD=7 -DCOLLNET_VERSION=8 plugin.c
 * NCCL finds a plugin by these symbol names (ncclNetPlugin_v8, ...); their contents do not
 * matter to ncclcheck, which only reads the dynamic symbol table. */

struct plugin_stub { const char *name; int version; };

#define VERSIONED_(prefix, v) prefix##_v##v
#define VERSIONED(prefix, v) VERSIONED_(prefix, v)
#define EXPORT(prefix, v) \
  __attribute__((visibility("default"))) \
  const struct plugin_stub VERSIONED(prefix, v) = { #prefix, v };

#ifdef NET_VERSION
EXPORT(ncclNetPlugin, NET_VERSION)
#endif
#ifdef NET_VERSION_OLD
EXPORT(ncclNetPlugin, NET_VERSION_OLD)
#endif
#ifdef COLLNET_VERSION
EXPORT(ncclCollNetPlugin, COLLNET_VERSION)
#endif
#ifdef TUNER_VERSION
EXPORT(ncclTunerPlugin, TUNER_VERSION)
#endif
#ifdef PROFILER_VERSION
EXPORT(ncclProfiler, PROFILER_VERSION)
#endif
#ifdef ENV_VERSION
EXPORT(ncclEnvPlugin, ENV_VERSION)
#endif

#ifdef BANNER
/* The line a plugin logs when NCCL loads it, kept in .rodata: aws-ofi-nccl's names its version
 * ("Initializing aws-ofi-nccl 1.19.2"). */
__attribute__((visibility("default"))) const char *plugin_banner = BANNER;
#endif

/* Present in every build, so a plugin with no versioned symbol still has an export. */
__attribute__((visibility("default"))) int plugin_stub_loaded(void) { return 1; }
