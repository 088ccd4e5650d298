//! The binary's global allocator on glibc: the system's malloc, with blocks aligned beyond
//! what malloc gives (16 bytes; 8 on 32-bit targets) asked of it as plain blocks a little
//! larger, aligned by hand.
//!
//! Why: every request makes standard-library channels (tiny_http's reader and writer
//! hand-offs), whose heads are aligned to 128 bytes. glibc 2.36 (Debian 12, the static
//! armv7 and riscv64 builds) serves such blocks from `memalign`, which never takes from a
//! thread's cache of freed blocks (tcache), while `free` puts them into it. So each
//! connection thread's cache filled up with heads it would never reuse, seven of each
//! size: about 30 KB per thread, 2.4 MB at 64 connections (`malloc_info` at peak: 4.0 MB
//! of the arenas in use against 1.8 MB without the caches). Asked as plain blocks, they
//! come from the cache and go back to it, like any other block. The library sets no
//! allocator: a host picks its own.

use std::alloc::{GlobalAlloc, Layout, System};

/// The alignment glibc's malloc gives every block.
const MALLOC_ALIGN: usize = 2 * std::mem::size_of::<usize>();

/// glibc's malloc, over-aligned blocks included (see the module's comment).
pub struct Malloc;

// SAFETY: every block is the system allocator's, or a malloc block whose start is kept
// just before the aligned address handed out and given back to free.
unsafe impl GlobalAlloc for Malloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= MALLOC_ALIGN {
            // SAFETY: the caller's layout, as the system allocator takes it.
            return unsafe { System.alloc(layout) };
        }
        over_aligned(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= MALLOC_ALIGN {
            // SAFETY: the caller's layout, as the system allocator takes it.
            return unsafe { System.alloc_zeroed(layout) };
        }
        let p = over_aligned(layout);
        if !p.is_null() {
            // SAFETY: `p` holds `layout.size()` bytes.
            unsafe { p.write_bytes(0, layout.size()) };
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.align() <= MALLOC_ALIGN {
            // SAFETY: a block of the system allocator with this layout.
            return unsafe { System.dealloc(ptr, layout) };
        }
        // SAFETY: `over_aligned` kept the malloc block's start just before `ptr`.
        unsafe { libc::free(ptr.cast::<*mut libc::c_void>().sub(1).read()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= MALLOC_ALIGN {
            // SAFETY: a block of the system allocator with this layout.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: the caller's promises: a valid new size for this alignment.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        let moved = over_aligned(new);
        if !moved.is_null() {
            // SAFETY: both blocks hold at least the smaller size; `ptr` is ours.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        moved
    }
}

/// A malloc block of `size + align` bytes: the first `align`-aligned address in it past
/// the block's start, with the start kept in the word before it (there are at least
/// `MALLOC_ALIGN` bytes between them).
fn over_aligned(layout: Layout) -> *mut u8 {
    let Some(bytes) = layout.size().checked_add(layout.align()) else {
        return std::ptr::null_mut();
    };
    // SAFETY: a plain malloc; null is passed on.
    let start = unsafe { libc::malloc(bytes) }.cast::<u8>();
    if start.is_null() {
        return start;
    }
    let offset = layout.align() - (start as usize & (layout.align() - 1));
    // SAFETY: `offset` is at most `align` (and at least MALLOC_ALIGN), so the aligned
    // address and `size` bytes after it, and the word before it, are in the block.
    unsafe {
        let aligned = start.add(offset);
        aligned.cast::<*mut u8>().sub(1).write(start);
        aligned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defect: a freed over-aligned block went into the thread's cache and was never
    /// handed out again. Now the next block of its layout is that block.
    #[test]
    fn an_over_aligned_block_freed_is_the_next_one_handed_out() {
        let layout = Layout::from_size_align(512, 128).unwrap();
        // SAFETY: a layout of non-zero size; each block is freed once.
        unsafe {
            let first = Malloc.alloc(layout);
            Malloc.dealloc(first, layout);
            let second = Malloc.alloc(layout);
            Malloc.dealloc(second, layout);
            assert_eq!(first, second, "the freed block was not reused");
        }
    }

    #[test]
    fn over_aligned_blocks_are_aligned_whole_and_given_back() {
        for align in [32, 64, 128, 4096] {
            for size in [1, 100, 600, 5000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a layout of non-zero size; each block is freed once below.
                unsafe {
                    let p = Malloc.alloc_zeroed(layout);
                    assert_eq!(p as usize % align, 0);
                    assert!((0..size).all(|i| *p.add(i) == 0));
                    p.write_bytes(0xa5, size);
                    let q = Malloc.realloc(p, layout, size * 2);
                    assert_eq!(q as usize % align, 0);
                    assert!((0..size).all(|i| *q.add(i) == 0xa5));
                    Malloc.dealloc(q, Layout::from_size_align(size * 2, align).unwrap());
                }
            }
        }
        let plain = Layout::from_size_align(24, 8).unwrap();
        // SAFETY: as above.
        unsafe { Malloc.dealloc(Malloc.alloc(plain), plain) };
    }
}
