#include "base/code_pages.h"

#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace outpost {

namespace {

int FindReadOnlySegments(dl_phdr_info* info, size_t, void* data) {
  auto* out = static_cast<CodeRanges*>(data);
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  for (int i = 0; i < info->dlpi_phnum && out->n < 8; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_W)) continue;
    uintptr_t start = (info->dlpi_addr + ph.p_vaddr + page - 1) & ~(page - 1);
    uintptr_t end = (info->dlpi_addr + ph.p_vaddr + ph.p_memsz) & ~(page - 1);
    if (end > start) out->r[out->n++] = {reinterpret_cast<void*>(start), end - start};
  }
  return 1;  // the first object is the executable itself: stop there
}

}  // namespace

CodeRanges FindCodeRanges() {
  CodeRanges out;
  ::dl_iterate_phdr(FindReadOnlySegments, &out);
  return out;
}

void DropCodePages(const CodeRanges& ranges) {
  for (int i = 0; i < ranges.n; ++i) ::madvise(ranges.r[i].start, ranges.r[i].len, MADV_DONTNEED);
}

}  // namespace outpost
