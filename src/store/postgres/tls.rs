//! TLS to PostgreSQL through rustls: the URL's `sslmode` and `sslrootcert`, read as libpq
//! reads them. tokio-postgres knows only `disable`, `prefer` and `require`, and no root
//! certificate, so both parameters are taken out of the URL here and the client is given
//! the mode it knows and a connector that verifies what the URL asked for.

use crate::store::seam::{StoreError, StoreResult};
use postgres::config::SslMode;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use rustls::{Error, SignatureScheme};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The root certificate libpq reads when the URL names none (under `$HOME`).
const DEFAULT_ROOT_CERT: &str = ".postgresql/root.crt";
/// CA bundles tried, in order, for `sslrootcert=system` when `SSL_CERT_FILE` is not set:
/// Debian and Ubuntu, then Fedora and RHEL, then Alpine's and SUSE's.
const SYSTEM_BUNDLES: [&str; 3] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
];

/// What `sslmode` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Plain only.
    Disable,
    /// TLS when the server offers it, else plain; the certificate is not checked (libpq's
    /// default, and ours).
    Prefer,
    /// TLS or no connection; the certificate is checked as for `verify-ca` when a root
    /// certificate is named or found, else not at all (as libpq).
    Require,
    /// TLS, with a certificate chain that ends at the root certificate.
    VerifyCa,
    /// `VerifyCa`, and the certificate names the host of the URL.
    VerifyFull,
}

impl Mode {
    fn parse(value: &str) -> StoreResult<Mode> {
        Ok(match value {
            "disable" => Mode::Disable,
            "prefer" => Mode::Prefer,
            "require" => Mode::Require,
            "verify-ca" => Mode::VerifyCa,
            "verify-full" => Mode::VerifyFull,
            other => {
                return Err(StoreError(format!(
                    "sslmode={other} is not one of disable, prefer, require, verify-ca, verify-full"
                )));
            }
        })
    }

    /// The mode as tokio-postgres knows it: anything that asks for TLS is `Require`, so
    /// the client never falls back to plain.
    pub fn client_mode(self) -> SslMode {
        match self {
            Mode::Disable => SslMode::Disable,
            Mode::Prefer => SslMode::Prefer,
            Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
        }
    }
}

/// The URL's TLS settings, taken out of it.
#[derive(Debug, PartialEq, Eq)]
pub struct Settings {
    pub mode: Mode,
    /// `sslrootcert`: a PEM file, or `system`.
    pub root_cert: Option<String>,
}

/// Splits `sslmode` and `sslrootcert` off the URL: the URL without them, and the settings.
pub fn split(url: &str) -> StoreResult<(String, Settings)> {
    let mut settings = Settings {
        mode: Mode::Prefer,
        root_cert: None,
    };
    // Where the parameters start, found as the client finds them: the credentials run to
    // the first `@` after the scheme (a password may hold a raw `?`), and the parameters
    // start at the first `?` after that.
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let host_at = url[after_scheme..]
        .find('@')
        .map_or(after_scheme, |i| after_scheme + i + 1);
    let Some(query_at) = url[host_at..].find('?').map(|i| host_at + i) else {
        return Ok((url.to_owned(), settings));
    };
    let (base, query) = (&url[..query_at], &url[query_at + 1..]);
    let mut mode = None;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        // Keys are decoded as the client decodes them: `ssl%6Dode` is `sslmode`.
        match percent_decoded(key)?.as_str() {
            "sslmode" if mode.is_some() => return Err(given_twice("sslmode")),
            "sslmode" => mode = Some(Mode::parse(&percent_decoded(value)?)?),
            "sslrootcert" if settings.root_cert.is_some() => {
                return Err(given_twice("sslrootcert"));
            }
            "sslrootcert" => settings.root_cert = Some(percent_decoded(value)?),
            _ => kept.push(pair),
        }
    }
    // libpq: `sslrootcert=system` makes verify-full the default, and refuses a weaker mode.
    settings.mode = match (mode, settings.root_cert.as_deref()) {
        (None, Some("system")) => Mode::VerifyFull,
        (Some(m), Some("system")) if m != Mode::VerifyFull => {
            return Err(StoreError(
                "sslrootcert=system needs sslmode=verify-full (the default with it)".into(),
            ));
        }
        (m, _) => m.unwrap_or(Mode::Prefer),
    };
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, settings))
}

/// A TLS parameter given twice is refused, not settled by the last one: a URL that asks
/// for TLS in one place must not be turned plain in another.
fn given_twice(name: &str) -> StoreError {
    StoreError(format!("{name} is given more than once in the URL"))
}

/// A URL parameter's value with its `%XX` escapes decoded.
fn percent_decoded(value: &str) -> StoreResult<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = value.get(i + 1..i + 3).unwrap_or("");
            let byte = u8::from_str_radix(hex, 16)
                .ok()
                .filter(|_| hex.len() == 2 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
            out.push(byte.ok_or_else(|| StoreError("a bad %-escape in the URL".into()))?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| StoreError("a URL parameter is not UTF-8".into()))
}

/// The connector for these settings. Root certificates are read now, once: a file that
/// is missing or holds none is refused at start, not at the first connection.
pub fn connector(settings: &Settings) -> StoreResult<MakeRustlsConnect> {
    connector_at_home(settings, std::env::var_os("HOME").map(PathBuf::from))
}

/// `connector`, with `home` as the directory that holds `.postgresql/root.crt`.
pub fn connector_at_home(
    settings: &Settings,
    home: Option<PathBuf>,
) -> StoreResult<MakeRustlsConnect> {
    let default_root_cert = || {
        let file = home.as_ref()?.join(DEFAULT_ROOT_CERT);
        file.is_file().then(|| file.to_string_lossy().into_owned())
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = match (settings.mode, settings.root_cert.as_deref()) {
        (Mode::Disable | Mode::Prefer, _) => None,
        (Mode::Require, None) => default_root_cert().map(|f| roots(&f)).transpose()?,
        (Mode::Require | Mode::VerifyCa | Mode::VerifyFull, Some(file)) => Some(roots(file)?),
        (Mode::VerifyCa | Mode::VerifyFull, None) => match default_root_cert() {
            Some(file) => Some(roots(&file)?),
            None => {
                return Err(StoreError(format!(
                    "sslmode={} needs a root certificate: sslrootcert=FILE (PEM), \
                     sslrootcert=system, or ~/{DEFAULT_ROOT_CERT}",
                    if settings.mode == Mode::VerifyCa {
                        "verify-ca"
                    } else {
                        "verify-full"
                    }
                )));
            }
        },
    };
    let chain = roots
        .map(|roots| {
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| StoreError(format!("TLS root certificates: {e}")))
        })
        .transpose()?;
    let verifier: Arc<dyn ServerCertVerifier> = match chain {
        Some(chain) if settings.mode == Mode::VerifyFull => chain,
        chain => Arc::new(Lenient {
            chain,
            provider: provider.clone(),
        }),
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError(format!("TLS: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// The certificates of a PEM file, or of the system's bundle for `system`.
fn roots(file: &str) -> StoreResult<RootCertStore> {
    let file = if file == "system" {
        std::env::var("SSL_CERT_FILE")
            .ok()
            .or_else(|| {
                SYSTEM_BUNDLES
                    .iter()
                    .find(|f| std::path::Path::new(f).is_file())
                    .map(|f| f.to_string())
            })
            .ok_or_else(|| StoreError("sslrootcert=system: no CA bundle found".into()))?
    } else {
        file.to_owned()
    };
    let certs: Vec<CertificateDer> = CertificateDer::pem_file_iter(&file)
        .and_then(|certs| certs.collect())
        .map_err(|e| StoreError(format!("sslrootcert {file}: {e}")))?;
    let mut store = RootCertStore::empty();
    let (added, _) = store.add_parsable_certificates(certs);
    if added == 0 {
        return Err(StoreError(format!(
            "sslrootcert {file}: no certificate in it"
        )));
    }
    Ok(store)
}

/// What `prefer`, `require` and `verify-ca` check of the server's certificate: with no
/// chain (`prefer`, and `require` without a root certificate) nothing, as libpq; with one
/// (`verify-ca`, or `require` with a root) the chain (expiry, signatures, up to a root)
/// but not the name. rustls checks the chain before the name, so a name error means the
/// chain was good. Either way the handshake's signatures are checked against the
/// certificate's key, so the connection is encrypted to whoever holds it.
#[derive(Debug)]
struct Lenient {
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, name, ocsp, now) {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
