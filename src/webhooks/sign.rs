//! Standard Webhooks v1 signing: the secret (`whsec_` + standard base64 of random bytes)
//! and the signature (`v1,` + base64 of HMAC-SHA256 over `id.timestamp.body`).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// What a secret starts with.
pub const SECRET_PREFIX: &str = "whsec_";
/// Random bytes in a new secret.
pub const SECRET_BYTES: usize = 24;

/// A new secret, as `webhook add` shows it once.
pub fn new_secret() -> Result<String, getrandom::Error> {
    let mut key = [0u8; SECRET_BYTES];
    getrandom::fill(&mut key)?;
    Ok(format!("{SECRET_PREFIX}{}", STANDARD.encode(key)))
}

/// The signing key a secret stands for; `None` when it is not `whsec_` + base64.
pub fn key(secret: &str) -> Option<Vec<u8>> {
    let key = STANDARD.decode(secret.strip_prefix(SECRET_PREFIX)?).ok()?;
    (!key.is_empty()).then_some(key)
}

/// The `webhook-signature` of a message: `v1,` + base64 HMAC-SHA256 of `id.timestamp.body`.
pub fn signature(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test vector Standard Webhooks publishes.
    #[test]
    fn the_published_test_vector_signs_as_published() {
        let key = key("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD").unwrap();
        assert_eq!(
            signature(
                &key,
                "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
                1649367553,
                br#"{"email":"test@example.com","username":"test_user"}"#
            ),
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="
        );
    }

    #[test]
    fn a_new_secret_is_prefixed_base64_of_24_random_bytes() {
        let a = new_secret().unwrap();
        let b = new_secret().unwrap();
        assert_ne!(a, b);
        assert_eq!(key(&a).unwrap().len(), SECRET_BYTES);
        assert_eq!(a.len(), SECRET_PREFIX.len() + 32);
    }

    #[test]
    fn secrets_without_the_prefix_or_base64_are_refused() {
        for bad in [
            "",
            "whsec_",
            "C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
            "whsec_!!!!",
        ] {
            assert_eq!(key(bad), None, "{bad}");
        }
    }
}
