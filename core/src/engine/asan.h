// ASYNCND_ASAN: 1 in a build with AddressSanitizer (GCC defines __SANITIZE_ADDRESS__, clang has
// __has_feature(address_sanitizer)), else 0. Memory kept for reuse hides a use after free from
// it, so the record recyclers (recycler.h) and the CPU allocator's cache step aside there; and
// the one deliberate leak (an array whose variable was deleted by hand, ops/ndarray.cpp) is
// announced to LeakSanitizer.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define ASYNCND_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASYNCND_ASAN 1
#endif
#endif
#ifndef ASYNCND_ASAN
#define ASYNCND_ASAN 0
#endif
