//! The process's set-up: the allocator's arenas, and panics that go to the log (or,
//! where they are expected and handled, nowhere). The process never starts itself again
//! (docs/operating.md, "Memory").

use std::panic::{AssertUnwindSafe, catch_unwind};

/// glibc malloc arenas (see `limit_malloc_arenas`).
#[cfg(target_env = "gnu")]
pub const MALLOC_ARENAS: i32 = 2;

thread_local! {
    /// Set while a panic is expected and handled where it happens (`catch_quietly`).
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Panics are logged by the hook itself, at once, without the log's queue and without
/// waiting (`logging::write_now`): its line names the thread, the place and the message,
/// and is lost only when standard error cannot take it now. In a build whose panics
/// abort (the device build, `panic = "abort"`), the lines waiting for the log's writer
/// and then this line are written before the process ends, also for a panic that an
/// unwinding build would catch quietly.
pub fn log_panics() {
    std::panic::set_hook(Box::new(|info| {
        if QUIET.get() && !cfg!(panic = "abort") {
            return;
        }
        if cfg!(panic = "abort") {
            // The lines of the last 100 ms first (the requests before this one).
            crate::ops::logging::write_waiting_now();
        }
        let thread = std::thread::current();
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(a panic without a message)");
        let place = info
            .location()
            .map(|l| format!(" at {l}"))
            .unwrap_or_default();
        crate::ops::logging::write_now(
            log::Level::Error,
            format_args!(
                "panic in thread '{}'{place}: {message}{}",
                thread.name().unwrap_or("unnamed"),
                if cfg!(panic = "abort") {
                    "; the process ends (panic = \"abort\")"
                } else {
                    ""
                }
            ),
        );
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
