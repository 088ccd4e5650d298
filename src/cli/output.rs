//! What the commands print that needs care.

/// Writes what a command shows only once (a new token or secret) to standard output in one
/// write, so that a reader that takes only its first line (`| head -n1`) does not make
/// the rest fail; `what` was stored, and is named if it cannot be shown.
pub fn show_once(text: &str, what: &str) -> Result<(), String> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| {
            format!("{what} was stored, but could not be shown ({e}): remove it and make another")
        })
}
