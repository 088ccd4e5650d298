//! The process's set-up: the allocator's caches and arenas, and panics that go to the
//! log (or, where they are expected and handled, nowhere).

use std::panic::{AssertUnwindSafe, catch_unwind};

/// glibc malloc arenas (see `limit_malloc_arenas`).
#[cfg(target_env = "gnu")]
pub const MALLOC_ARENAS: i32 = 2;

/// glibc keeps a cache of freed small blocks in every thread (tcache). With tiny_http's
/// thread per connection those caches held 2 to 3.5 MB, a third of the resident memory,
/// in the benchmark (benches/run.sh), for about 4% less CPU per small GET. Only the
/// GLIBC_TUNABLES variable, read when a process starts, turns them off; so the server
/// starts itself again, once, with it set. A value the user set is kept (one that is not
/// UTF-8 is left alone); if the re-execution fails the server runs as it is.
pub fn without_malloc_thread_cache() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::process::CommandExt;
        const TUNABLE: &str = "glibc.malloc.tcache_count";
        let current = std::env::var_os("GLIBC_TUNABLES").unwrap_or_default();
        let Some(current) = current.to_str() else {
            return;
        };
        if current.contains(TUNABLE) {
            return;
        }
        let value = match current {
            "" => format!("{TUNABLE}=0"),
            other => format!("{TUNABLE}=0:{other}"),
        };
        let mut args = std::env::args_os();
        let name = args.next().unwrap_or_default();
        let Ok(exe) = std::env::current_exe() else {
            return;
        };
        let error = std::process::Command::new(exe)
            .arg0(name)
            .args(args)
            .env("GLIBC_TUNABLES", value)
            .exec();
        eprintln!(
            "plant-store: could not restart without malloc thread caches ({error}); going on"
        );
    }
}

thread_local! {
    /// Set while a panic is expected and handled where it happens (`catch_quietly`).
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Panics (a handler's, caught and answered 500) go to the log, not raw to standard error.
pub fn log_panics() {
    std::panic::set_hook(Box::new(|info| {
        if !QUIET.get() {
            log::error!("panic: {info}");
        }
    }));
}

/// Runs `f`, catching a panic that its caller handles and logs in its own words.
pub fn catch_quietly<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    QUIET.set(true);
    let result = catch_unwind(AssertUnwindSafe(f));
    QUIET.set(false);
    result
}

/// glibc gives threads their own malloc arenas (up to 8 per core), each holding freed
/// memory; with a thread per connection that is most of the resident memory. Two arenas
/// keep RSS flat at no measured cost in speed.
pub fn limit_malloc_arenas() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets an allocator parameter; called before other threads start.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENAS);
    }
}
