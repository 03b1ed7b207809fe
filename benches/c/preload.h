/* What the preloaded measuring libraries (hop_shim.c, turnaround_shim.c) share: the C
 * library's own function behind the one they wrap. */
#ifndef RGASNET_BENCH_PRELOAD_H
#define RGASNET_BENCH_PRELOAD_H

#include <dlfcn.h>
#include <stddef.h>

/* The C library's function `name` (the next definition after the preloaded one), looked up
 * once per call site into `real_`. */
#define REAL(type, name, ...)                                  \
    static type (*real_)(__VA_ARGS__);                          \
    if (real_ == NULL) *(void **)(&real_) = dlsym(RTLD_NEXT, name)

#endif
