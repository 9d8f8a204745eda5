// kernelwheel_compat.cpp - compiled into every kernel extension kernelwheel builds (once per .so).
//
// Keeps a .so built with a new toolchain (Debian 12: gcc 12, glibc 2.36) within the
// manylinux_2_28 symbol caps (GLIBC <= 2.28, GLIBCXX <= 3.4.24, CXXABI <= 1.3.11) by giving the
// .so hidden local definitions of a few symbols that new libstdc++ *headers* make it import from
// new glibc/libstdc++ versions. Each definition is hidden: it is bound inside this .so only, never
// exported, so it cannot interpose on (or be interposed by) any other library in the process.
// data/abi_remedies.toml documents each remedy (kernelwheel.abi.remedies reads it); `kernelwheel
// check` verifies the result.

// --- 1. __libc_single_threaded (GLIBC_2.32) ---------------------------------------------------
// libstdc++ >= 11 headers (ext/atomicity.h) read glibc's `char __libc_single_threaded` to skip
// atomic instructions (shared_ptr reference counts, std::string/locale bookkeeping) while the
// process has a single thread. kernelwheel compiles every translation unit with
//     -D__libc_single_threaded=kernelwheel_libc_single_threaded
// so those reads land on this variable instead of glibc's. Its value is 0 and never changes:
// "assume another thread may exist", which makes the headers always take the atomic path. That is
// exactly what they did before glibc 2.32 (and what they do when glibc cannot tell), so it is
// always correct; the cost is an atomic increment where a plain one would have done. A value of 1
// would be unsafe (non-atomic reference counts in a multi-threaded process), hence the constant 0.
// It is defined before any header is included, so its hidden visibility is the first declaration
// the compiler sees; the header's later `extern char ...` redeclaration inherits it.
extern "C" {
__attribute__((visibility("hidden"))) char kernelwheel_libc_single_threaded = 0;
// Remedy 4 (below) declared here, hidden, before <dlfcn.h> declares it under -Ddlsym=....
__attribute__((visibility("hidden"))) void *kernelwheel_dlsym(void *handle,
                                                              const char *name) noexcept;
}

#include <new>

#if defined(__GLIBCXX__)

// --- 2. std::__throw_bad_array_new_length() (GLIBCXX_3.4.29) --------------------------------
// gcc >= 11's std::allocator<T>::allocate(n) calls this when n * sizeof(T) overflows. The library
// function only throws std::bad_array_new_length; so does this copy. The exception's type_info and
// vtable still come from libstdc++ (CXXABI_1.3.8), so catch clauses anywhere match it as usual.
// The asm label gives this function the mangled name of std::__throw_bad_array_new_length without
// redeclaring the std:: function, whose declaration in <bits/functexcept.h> has default
// visibility that a redeclaration could not change.
namespace kernelwheel_compat {
[[noreturn]] __attribute__((visibility("hidden"))) void throw_bad_array_new_length()
    __asm__("_ZSt28__throw_bad_array_new_lengthv");
void throw_bad_array_new_length() { throw std::bad_array_new_length(); }
}  // namespace kernelwheel_compat

#include <sstream>
#include <string>

#define KERNELWHEEL_HIDDEN __attribute__((visibility("hidden")))

// --- 3. <sstream> members defined in the headers (GLIBCXX_3.4.26 / 3.4.29) --------------------
// These members are defined inline in gcc's <sstream>, but <sstream> also declares
// `extern template class basic_*stringstream<char>`, so when the optimizer does not inline them
// (e.g. at -O0) the compiler emits calls to the copies exported by libstdc++.so, under the version
// they were first exported in. Explicitly instantiating them here, hidden, gives the .so its own
// copies of the same header code: the objects, their vtables and every out-of-line member still
// come from libstdc++.so (old versions), only these small header-defined wrappers become local.
#if defined(_GLIBCXX_RELEASE) && _GLIBCXX_RELEASE >= 9
// Default constructors: separate symbols since gcc 9 (GLIBCXX_3.4.26).
template KERNELWHEEL_HIDDEN std::stringbuf::basic_stringbuf();
template KERNELWHEEL_HIDDEN std::istringstream::basic_istringstream();
template KERNELWHEEL_HIDDEN std::ostringstream::basic_ostringstream();
template KERNELWHEEL_HIDDEN std::stringstream::basic_stringstream();
#endif

#if defined(_GLIBCXX_RELEASE) && _GLIBCXX_RELEASE >= 11 && __cplusplus > 201703L && \
    _GLIBCXX_USE_CXX11_ABI
// C++20 members (GLIBCXX_3.4.29): the ref-qualified str(), view(), and construction from an
// rvalue string. They exist only for the C++11 ABI in C++20 mode (torch >= 2.13 builds).
template KERNELWHEEL_HIDDEN std::string std::stringbuf::str() const &;
template KERNELWHEEL_HIDDEN std::string std::istringstream::str() const &;
template KERNELWHEEL_HIDDEN std::string std::ostringstream::str() const &;
template KERNELWHEEL_HIDDEN std::string std::stringstream::str() const &;
template KERNELWHEEL_HIDDEN std::string std::stringbuf::str() &&;
template KERNELWHEEL_HIDDEN std::string std::istringstream::str() &&;
template KERNELWHEEL_HIDDEN std::string std::ostringstream::str() &&;
template KERNELWHEEL_HIDDEN std::string std::stringstream::str() &&;
template KERNELWHEEL_HIDDEN std::string_view std::stringbuf::view() const noexcept;
template KERNELWHEEL_HIDDEN std::string_view std::istringstream::view() const noexcept;
template KERNELWHEEL_HIDDEN std::string_view std::ostringstream::view() const noexcept;
template KERNELWHEEL_HIDDEN std::string_view std::stringstream::view() const noexcept;
template KERNELWHEEL_HIDDEN std::stringbuf::basic_stringbuf(std::string &&, std::ios_base::openmode);
template KERNELWHEEL_HIDDEN std::istringstream::basic_istringstream(std::string &&,
                                                                    std::ios_base::openmode);
template KERNELWHEEL_HIDDEN std::ostringstream::basic_ostringstream(std::string &&,
                                                                    std::ios_base::openmode);
template KERNELWHEEL_HIDDEN std::stringstream::basic_stringstream(std::string &&,
                                                                  std::ios_base::openmode);
#endif

#if defined(_GLIBCXX_RELEASE) && _GLIBCXX_RELEASE >= 13 && _GLIBCXX_USE_CXX11_ABI
// --- 5. basic_string::_M_replace_cold (GLIBCXX_3.4.31) ----------------------------------------
// gcc 13's replace/insert/assign are constexpr in C++20, so inlined, and call this out-of-line
// helper for the rare case of a source overlapping the string; <string> declares it an extern
// template, so the call imports libstdc++ 13's copy. Instantiating the header's own definition
// here, hidden, keeps the call inside the .so (explicit instantiation ignores its privacy).
template KERNELWHEEL_HIDDEN void std::string::_M_replace_cold(char *, size_type, const char *,
                                                               const size_type, const size_type);
template KERNELWHEEL_HIDDEN void std::wstring::_M_replace_cold(wchar_t *, size_type,
                                                                const wchar_t *, const size_type,
                                                                const size_type);
#endif

#undef KERNELWHEEL_HIDDEN

#if defined(_GLIBCXX_RELEASE) && _GLIBCXX_RELEASE >= 12
#include <cstdio>
#include <cstdlib>
// --- 6. std::__glibcxx_assert_fail (GLIBCXX_3.4.30) -------------------------------------------
// With _GLIBCXX_ASSERTIONS (a kernel's flags, or a distribution's defaults) every failed
// library assertion calls this. The library's copy prints one line to stderr and aborts; so does
// this hidden one (asm label: the std:: declaration's default visibility cannot be changed).
namespace kernelwheel_compat {
[[noreturn]] __attribute__((visibility("hidden"))) void glibcxx_assert_fail(
    const char *file, int line, const char *function, const char *condition) noexcept
    __asm__("_ZSt21__glibcxx_assert_failPKciS0_S0_");
void glibcxx_assert_fail(const char *file, int line, const char *function,
                         const char *condition) noexcept {
  if (file && function && condition)
    std::fprintf(stderr, "%s:%d: %s: Assertion '%s' failed.\n", file, line, function, condition);
  else if (function)
    std::fprintf(stderr, "%s: Undefined behavior detected.\n", function);
  std::abort();
}
}  // namespace kernelwheel_compat
#endif

#if defined(_GLIBCXX_RELEASE) && _GLIBCXX_RELEASE >= 13
#include <ios>
// --- 7. std::ios_base_library_init() (GLIBCXX_3.4.32) -----------------------------------------
// gcc 13's <iostream> no longer defines a static std::ios_base::Init in every translation unit:
// it references this symbol (`.globl`, never called) so that the .so needs libstdc++ >= 13,
// which constructs std::cout and the other standard streams itself. Here the symbol is a hidden
// no-op, and one std::ios_base::Init object (GLIBCXX_3.4) does what each translation unit did
// before gcc 13: with an older libstdc++ it constructs the streams, with a newer one it only
// counts a reference. init_priority(101) runs it before the kernel's own static objects.
namespace kernelwheel_compat {
__attribute__((visibility("hidden"))) void ios_base_library_init() noexcept
    __asm__("_ZSt21ios_base_library_initv");
void ios_base_library_init() noexcept {}
__attribute__((visibility("hidden"), init_priority(101))) std::ios_base::Init ios_init;
}  // namespace kernelwheel_compat
#endif
#endif  // __GLIBCXX__

// --- 4. dlsym (GLIBC_2.34) -------------------------------------------------------------------
// torch's stable-ABI headers (torch/csrc/stable/macros.h) look up optional shim functions with
// dlsym(RTLD_DEFAULT, ...). glibc 2.34 moved dlsym from libdl.so.2 into libc.so.6 under a new
// version, GLIBC_2.34, and kept the old version (GLIBC_2.2.5 on x86_64, GLIBC_2.17 on aarch64)
// as the same function. kernelwheel compiles every translation unit with
//     -Ddlsym=kernelwheel_dlsym
// so their calls land here, and this hidden function calls dlsym bound to the old version, which
// every glibc exports: libc.so.6 from 2.34 on, libdl.so.2 (loaded by libtorch) before.
#include <dlfcn.h>

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34)) && \
    (defined(__x86_64__) || defined(__aarch64__))
#if defined(__x86_64__)
#define KERNELWHEEL_DLSYM_VERSION "GLIBC_2.2.5"
#else
#define KERNELWHEEL_DLSYM_VERSION "GLIBC_2.17"
#endif
extern "C" void *kernelwheel_dlsym_before_2_34(void *handle, const char *name) noexcept;
__asm__(".symver kernelwheel_dlsym_before_2_34, dlsym@" KERNELWHEEL_DLSYM_VERSION);
extern "C" void *kernelwheel_dlsym(void *handle, const char *name) noexcept {
  return kernelwheel_dlsym_before_2_34(handle, name);
}
#undef KERNELWHEEL_DLSYM_VERSION
#else
// An older glibc (or another libc): its dlsym has the old version already.
#undef dlsym
extern "C" void *dlsym(void *handle, const char *name) noexcept;
extern "C" void *kernelwheel_dlsym(void *handle, const char *name) noexcept {
  return dlsym(handle, name);
}
#endif
