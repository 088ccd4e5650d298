//! `response.rs`'s unit tests: the raw answers.

#[test]
fn raw_answers_declare_their_exact_length() {
    use crate::api::error::ApiError;
    for e in [
        ApiError::TooManyConnections,
        ApiError::VersionNotSupported,
        ApiError::HeadTooLarge { limit: 32 * 1024 },
    ] {
        let raw = String::from_utf8(super::raw(&e)).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        assert_eq!(body, e.body());
        assert!(
            head.contains(&format!("\r\nContent-Length: {}", body.len())),
            "{head}"
        );
        assert!(
            head.starts_with(&format!("HTTP/1.1 {} ", e.status())),
            "{head}"
        );
    }
    let over = String::from_utf8(super::raw(&ApiError::TooManyConnections)).unwrap();
    assert!(over.contains("\r\nRetry-After: 1\r\n"));
}
