//! The outbound HTTP client of webhook deliveries (ureq): explicit timeouts, no redirects
//! followed, no proxy taken from the environment, at most `MAX_ANSWER_BYTES` of an answer
//! read (an attempt is answered when its answer has arrived whole, or that much of it); https through rustls (the `tls` feature) with the webpki roots, or with the
//! certificates of `--webhook-ca` instead.

use std::path::Path;
use std::time::Duration;

/// Most bytes of a receiver's answer read (the rest is not waited for: it is dropped with
/// the connection).
pub const MAX_ANSWER_BYTES: u64 = 64 * 1024;
/// The connect timeout, within `--webhook-timeout` (which bounds the whole attempt).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What a receiver made of an attempt.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// A 2xx, its body arrived whole (or its first `MAX_ANSWER_BYTES`) within the timeout.
    Delivered,
    /// A 410: the endpoint is disabled.
    Gone,
    /// Anything else, to be tried again: what happened (for `webhook list`, never a
    /// secret), and the receiver's `Retry-After`, as it was sent.
    Failed {
        error: String,
        retry_after: Option<String>,
    },
}

/// One message: the headers Standard Webhooks names, and the body.
pub struct Message<'a> {
    pub id: &'a str,
    pub timestamp: i64,
    pub signature: &'a str,
    pub body: &'a [u8],
}

/// The agent every delivery thread shares (it keeps idle connections for reuse).
#[derive(Clone)]
pub struct Client(ureq::Agent);

impl Client {
    /// A client whose attempts end after `timeout`; `ca`: a PEM file whose certificates
    /// are the only roots trusted (its errors name the file, not the option).
    pub fn new(timeout: Duration, ca: Option<&Path>) -> Result<Client, String> {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(None)
            .timeout_global(Some(timeout))
            .timeout_connect(Some(CONNECT_TIMEOUT.min(timeout)))
            .user_agent(concat!("plant-store/", env!("CARGO_PKG_VERSION")));
        #[cfg(feature = "tls")]
        let config = config.tls_config(tls(ca)?);
        #[cfg(not(feature = "tls"))]
        if ca.is_some() {
            return Err("a CA file needs a build with the tls feature".into());
        }
        Ok(Client(config.build().into()))
    }

    /// Interrupts every attempt under way (it fails at once with an I/O error) and
    /// closes the idle connections; no later attempt is made.
    pub fn shutdown(&self) {
        self.0.clone().shutdown();
    }

    /// Posts one message to `url`.
    pub fn post(&self, url: &str, m: &Message) -> Answer {
        let sent = self
            .0
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", m.id)
            .header("webhook-timestamp", m.timestamp.to_string())
            .header("webhook-signature", m.signature)
            .send(m.body);
        let mut answer = match sent {
            Ok(answer) => answer,
            Err(e) => {
                return Answer::Failed {
                    error: describe(&e),
                    retry_after: None,
                };
            }
        };
        let status = answer.status().as_u16();
        let retry_after = answer
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // The answer is part of the attempt: read whole (or its first `MAX_ANSWER_BYTES`),
        // within the timeout, which also lets the connection serve the next attempt.
        let read = answer
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_vec();
        match (status, read) {
            // A 2xx counts only when its answer arrived whole: a body cut short may be a
            // receiver that failed while answering (docs/api.md, "Webhooks").
            (200..=299, Ok(_) | Err(ureq::Error::BodyExceedsLimit(_))) => Answer::Delivered,
            (200..=299, Err(e)) => Answer::Failed {
                error: format!("HTTP {status}, but {}", body_error(&e)),
                retry_after: None,
            },
            (410, _) => Answer::Gone,
            _ => Answer::Failed {
                error: format!("HTTP {status}"),
                retry_after,
            },
        }
    }
}

/// Why the body of an answer did not arrive whole, in words that never hold the URL.
fn body_error(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => "its body did not arrive within --webhook-timeout".into(),
        _ => format!("its body was cut short ({})", describe(e)),
    }
}

/// What went wrong, in words that never hold the URL (it may carry credentials).
fn describe(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => "no answer within --webhook-timeout".into(),
        ureq::Error::HostNotFound => "host not found".into(),
        ureq::Error::ConnectionFailed => "connection failed".into(),
        ureq::Error::Io(io) => match tls_error(io) {
            Some(tls) => format!("TLS: {tls}"),
            None => format!("connection error: {}", io.kind()),
        },
        ureq::Error::BadUri(_) | ureq::Error::Http(_) => "the URL is not usable".into(),
        ureq::Error::LargeResponseHeader(..) => "the answer's head is too large".into(),
        ureq::Error::Protocol(_) => "the answer is not HTTP/1.1".into(),
        #[cfg(feature = "tls")]
        ureq::Error::Rustls(e) => format!("TLS: {e}"),
        ureq::Error::Tls(e) => format!("TLS: {e}"),
        ureq::Error::TlsRequired => "https needs a build with the tls feature".into(),
        _ => "the attempt failed".into(),
    }
}

/// The TLS failure inside an I/O error (ureq hands rustls's handshake errors on so).
#[cfg(feature = "tls")]
fn tls_error(io: &std::io::Error) -> Option<&rustls::Error> {
    io.get_ref()?.downcast_ref::<rustls::Error>()
}

#[cfg(not(feature = "tls"))]
fn tls_error(_: &std::io::Error) -> Option<&'static str> {
    None
}

/// The TLS settings: the webpki roots built in, or only the certificates of `ca`.
#[cfg(feature = "tls")]
fn tls(ca: Option<&Path>) -> Result<ureq::tls::TlsConfig, String> {
    use ureq::tls::{PemItem, RootCerts, TlsConfig};
    let Some(ca) = ca else {
        return Ok(TlsConfig::builder().root_certs(RootCerts::WebPki).build());
    };
    let pem = std::fs::read(ca).map_err(|e| format!("cannot read {}: {e}", ca.display()))?;
    let certs: Vec<_> = ureq::tls::parse_pem(&pem)
        .filter_map(|item| match item {
            Ok(PemItem::Certificate(c)) => Some(c),
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err(format!("{} holds no PEM certificate", ca.display()));
    }
    Ok(TlsConfig::builder()
        .root_certs(RootCerts::Specific(std::sync::Arc::new(certs)))
        .build())
}

/// Whether this build can deliver to `url`: `http://` always, `https://` with the `tls`
/// feature; the rest of the URL as the client reads it.
pub fn check_url(url: &str) -> Result<(), String> {
    let uri: ureq::http::Uri = url.parse().map_err(|_| format!("`{url}` is not a URL"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") if cfg!(feature = "tls") => {}
        Some("https") => return Err("https endpoints need a build with the tls feature".into()),
        _ => return Err("the URL must start with http:// or https://".into()),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err("the URL names no host".into());
    }
    Ok(())
}
