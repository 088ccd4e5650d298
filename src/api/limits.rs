//! The API's fixed limits on what a caller sends (docs/reference.md, "Limits").

/// Largest request body read, in bytes; larger is 413, read no further.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Largest accepted `limit` (int32).
pub const MAX_LIMIT: u32 = i32::MAX as u32;
