//! The `tierkv` binary's allocator: mimalloc, set up so that the process's resident size
//! follows its live heap (docs/DEPLOYMENT.md, "Memory"; docs/bench/f2-memory.md).
//!
//! The library allocates through whatever global allocator its embedder chose; only this
//! binary picks one. mimalloc rather than glibc's malloc: glibc keeps freed memory in
//! per-thread arenas that `malloc_trim` does not give back (a 4M-record load left ~85 MiB
//! resident after the store closed, with 45 KiB of it live), and its small allocations cost
//! more CPU per get. Two of mimalloc's defaults made a 41 MiB-budget store in F2's setup
//! (`tierkv bench`, 16 client threads) peak at 345 MiB resident while its live heap never
//! passed 86 MiB:
//!
//! - **Transparent huge pages.** mimalloc asks the kernel for huge pages on its arenas
//!   (`madvise(MADV_HUGEPAGE)`), so a 2 MiB page is resident as a whole once any byte of
//!   it is: with many threads' small pages spread over the arena, 188 MiB of the 308 MiB
//!   heap mapping were huge pages. The `no_thp` feature (Cargo.toml) drops that request,
//!   and [`setup`] turns THP off for the process (`PR_SET_THP_DISABLE`) so a kernel set to
//!   `always` does not use them either.
//! - **Purge delay.** mimalloc v3 returns freed pages to the kernel one second after they
//!   became free; a store that reads, caches and evicts thousands of blocks a second keeps
//!   a second's worth of freed pages resident. [`PURGE_DELAY_MS`] shortens it.

/// The process's allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc's `mi_option_e` (`include/mimalloc.h`, v2 and v3
/// alike); `libmimalloc-sys` names no constant for it. The test checks it reads back.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Milliseconds a freed page stays committed before mimalloc returns it (its default is
/// 1,000 in v3): measured in docs/bench/f2-memory.md.
pub const PURGE_DELAY_MS: i64 = 10;

/// Applies the settings above. Called first thing in `main`; later allocations follow
/// them (the pages allocated before are few).
pub fn setup() {
    #[allow(
        unsafe_code,
        reason = "mimalloc's options and prctl have no safe binding"
    )]
    // SAFETY: mi_option_set stores an integer in mimalloc's option table (atomically; any
    // thread, any time). prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) sets a flag of this process
    // and takes no pointers; an old kernel refusing it leaves THP as it was.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS as _);
        #[cfg(target_os = "linux")]
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn purge_delay() -> i64 {
        #[allow(unsafe_code, reason = "mimalloc's options have no safe binding")]
        // SAFETY: reads an integer from mimalloc's option table.
        unsafe {
            libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) as i64
        }
    }

    /// Kilobytes of huge pages the process holds (`AnonHugePages` of smaps_rollup).
    #[cfg(target_os = "linux")]
    fn huge_page_kb() -> Option<u64> {
        let text = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
        let line = text.lines().find(|l| l.starts_with("AnonHugePages:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    // Resident size follows the live heap: the purge delay is the one set, and no heap
    // page is a huge page (a 64 MiB buffer touched once per 4 KiB page would otherwise be
    // 32 huge pages wherever THP is on).
    #[test]
    fn setup_shortens_the_purge_delay_and_turns_off_huge_pages() {
        setup();
        assert_eq!(purge_delay(), PURGE_DELAY_MS);
        #[cfg(target_os = "linux")]
        {
            #[allow(unsafe_code, reason = "prctl has no safe binding")]
            // SAFETY: reads a flag of this process; takes no pointers.
            let disabled = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
            assert_eq!(disabled, 1, "THP still allowed for the process");
            let mut buf = vec![0u8; 64 << 20];
            for i in (0..buf.len()).step_by(4096) {
                buf[i] = 1;
            }
            std::hint::black_box(&buf);
            if let Some(kb) = huge_page_kb() {
                assert_eq!(kb, 0, "{kb} kB of huge pages after setup");
            }
        }
    }
}
