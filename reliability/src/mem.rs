//! The process's resident memory, from `/proc/self/status` (Linux).
//!
//! [`reset_peak`] writes `5` to `/proc/self/clear_refs`, which resets the
//! peak (`VmHWM`) to the current resident size, so [`peak_kib`] after a
//! scenario is the most memory the process held during it.
//!
//! [`release_freed`] hands the allocator's free pages back to the kernel,
//! so the resident size that follows counts what is still allocated, not
//! what was freed and kept for reuse.

/// A field of `/proc/self/status` in KiB (`VmRSS`, `VmHWM`, ...).
fn status_kib(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The resident set size now, in KiB (0 when unknown).
pub fn rss_kib() -> u64 {
    status_kib("VmRSS").unwrap_or(0)
}

/// The peak resident set size since start or the last [`reset_peak`], in KiB.
pub fn peak_kib() -> u64 {
    status_kib("VmHWM").unwrap_or(0)
}

/// Resets the peak to the current resident size; `false` when the kernel
/// does not allow it (then [`peak_kib`] is the peak since start).
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Returns the heap's free pages to the kernel (glibc's `malloc_trim(0)`;
/// nothing elsewhere), so [`rss_kib`] after it measures what is still
/// allocated. `true` when memory was released.
pub fn release_freed() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: glibc's malloc_trim takes a byte count, touches only the
        // allocator's own free lists and may be called from any thread.
        unsafe { malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// The resident size in KiB right after [`release_freed`]: what the
/// process still has allocated.
pub fn released_rss_kib() -> u64 {
    release_freed();
    rss_kib()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_follows_a_large_allocation_and_resets() {
        assert!(reset_peak());
        let before = peak_kib();
        let v = vec![1u8; 64 << 20];
        std::hint::black_box(&v);
        assert!(
            peak_kib() >= before + 60 * 1024,
            "{} {}",
            before,
            peak_kib()
        );
        drop(v);
        assert!(reset_peak());
        assert!(peak_kib() < before + 32 * 1024);
        assert!(rss_kib() > 0);
        let held = rss_kib();
        let mut small: Vec<Vec<u8>> = (0..32 * 1024).map(|_| vec![1u8; 1024]).collect();
        std::hint::black_box(&small);
        assert!(rss_kib() >= held + 24 * 1024, "{held} {}", rss_kib());
        // Freed small blocks stay with the allocator until it is told to
        // give them back: one in 64 is kept, so the heap cannot simply
        // shrink from its top.
        for (i, b) in small.iter_mut().enumerate() {
            if i % 64 != 63 {
                *b = Vec::new();
            }
        }
        release_freed();
        assert!(rss_kib() < held + 16 * 1024, "{held} {}", rss_kib());
    }
}
