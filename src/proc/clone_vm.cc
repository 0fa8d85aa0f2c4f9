#include "proc/clone_vm.h"

#include <sched.h>
#include <sys/syscall.h>

#include <cerrno>

// clone3 with a child stack cannot go through syscall(): the child would
// return into the C wrapper on an empty stack. So a few instructions per
// architecture: load the syscall number, trap, and in the child (return
// value 0, on the new stack the kernel set) call fn(arg) and exit with what
// it returns; the parent just returns the kernel's result (pid or -errno).
// fn and arg travel in registers the kernel preserves across the trap.
// x86_64 and aarch64 only, the two the VM tests run on a real kernel;
// elsewhere (armhf) RawClone3 says ENOSYS and spawn uses glibc's clone.

#if defined(__x86_64__)
// rdi = args, rsi = size, rdx = fn, rcx = arg (System V).
__asm__(
    ".pushsection .text\n"
    ".globl outpost_raw_clone3\n"
    ".type outpost_raw_clone3, @function\n"
    "outpost_raw_clone3:\n"
    "  mov %rdx, %r8\n"
    "  mov %rcx, %r9\n"
    "  mov $435, %eax\n"
    "  syscall\n"
    "  test %rax, %rax\n"
    "  jnz 1f\n"
    "  xor %ebp, %ebp\n"
    "  mov %r9, %rdi\n"
    "  call *%r8\n"
    "  mov %eax, %edi\n"
    "  mov $60, %eax\n"
    "  syscall\n"
    "  hlt\n"
    "1:\n"
    "  ret\n"
    ".size outpost_raw_clone3, .-outpost_raw_clone3\n"
    ".popsection\n");
#define OUTPOST_HAVE_RAW_CLONE3 1
#elif defined(__aarch64__)
// x0 = args, x1 = size, x2 = fn, x3 = arg.
__asm__(
    ".pushsection .text\n"
    ".globl outpost_raw_clone3\n"
    ".type outpost_raw_clone3, %function\n"
    "outpost_raw_clone3:\n"
    "  mov x10, x2\n"
    "  mov x11, x3\n"
    "  mov x8, #435\n"
    "  svc #0\n"
    "  cbnz x0, 1f\n"
    "  mov x29, xzr\n"
    "  mov x30, xzr\n"
    "  mov x0, x11\n"
    "  blr x10\n"
    "  mov x8, #93\n"
    "  svc #0\n"
    "  brk #0\n"
    "1:\n"
    "  ret\n"
    ".size outpost_raw_clone3, .-outpost_raw_clone3\n"
    ".popsection\n");
#define OUTPOST_HAVE_RAW_CLONE3 1
#endif

#ifdef OUTPOST_HAVE_RAW_CLONE3
extern "C" long outpost_raw_clone3(void* args, unsigned long size, int (*fn)(void*), void* arg);
#endif

namespace outpost::proc {

long RawClone3(CloneArgs* args, int (*fn)(void*), void* arg) {
#ifdef OUTPOST_HAVE_RAW_CLONE3
  long r = outpost_raw_clone3(args, sizeof *args, fn, arg);
  if (r < 0 && r > -4096) {
    errno = static_cast<int>(-r);
    return -1;
  }
  return r;
#else
  (void)args;
  (void)fn;
  (void)arg;
  errno = ENOSYS;
  return -1;
#endif
}

}  // namespace outpost::proc
