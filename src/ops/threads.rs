//! The threads one server starts, so that stopping it can wait until every one of them
//! has ended: each is spawned through `Threads::spawn`, and `join_all` joins them. Threads
//! that ended are forgotten at the next spawn, so the list holds about as many handles as
//! threads are alive.

use std::io;
use std::sync::Mutex;
use std::thread::{self, JoinHandle};

/// The threads a server started and has not joined yet.
#[derive(Debug, Default)]
pub struct Threads {
    handles: Mutex<Vec<JoinHandle<()>>>,
}

impl Threads {
    /// Starts `f` on a thread named `name` with a stack of `stack` bytes.
    pub fn spawn(
        &self,
        name: &str,
        stack: usize,
        f: impl FnOnce() + Send + 'static,
    ) -> io::Result<()> {
        let handle = thread::Builder::new()
            .name(name.into())
            .stack_size(stack)
            .spawn(f)?;
        let mut handles = self.handles.lock().unwrap_or_else(|e| e.into_inner());
        handles.retain(|h| !h.is_finished());
        handles.push(handle);
        Ok(())
    }

    /// Waits until every thread started through this has ended (also those started
    /// meanwhile by the threads being joined).
    pub fn join_all(&self) {
        loop {
            let taken =
                std::mem::take(&mut *self.handles.lock().unwrap_or_else(|e| e.into_inner()));
            if taken.is_empty() {
                return;
            }
            for handle in taken {
                let _ = handle.join();
            }
        }
    }
}
