//! Waiting for a state: the one way the suite polls.

use std::time::Duration;

/// Polls `ready` every 20 ms until it holds; panics after `within`.
#[track_caller]
pub fn eventually(within: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + within;
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "not so within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
