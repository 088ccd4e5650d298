//! A throw-away PKI for the TLS tests, made with Debian's `openssl` command.

use super::TempDir;
use std::path::PathBuf;
use std::process::Command;

/// A test CA (`ca.crt`, `ca.key`), a server certificate it signed for one name only
/// (`server.crt`, `server.key`), and another CA, unrelated (`other-ca.crt`).
pub struct Pki(TempDir);

impl Pki {
    /// `name` as a subjectAltName: `DNS:localhost`, `IP:127.0.0.1`.
    pub fn new(name: &str) -> Pki {
        let pki = Pki(TempDir::new());
        pki.ca("ca");
        pki.ca("other-ca");
        pki.openssl(&[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            &format!("/CN={}", name.split_once(':').map_or(name, |(_, n)| n)),
        ]);
        std::fs::write(
            pki.file("server.ext"),
            format!("subjectAltName={name}\nextendedKeyUsage=serverAuth\n"),
        )
        .unwrap();
        pki.openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ]);
        pki
    }

    fn ca(&self, name: &str) {
        let (key, crt) = (format!("{name}.key"), format!("{name}.crt"));
        self.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &crt,
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&self.0.0)
            .output()
            .expect("openssl (Debian's openssl package; scripts/install-test-deps installs it)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A file of the PKI: `ca.crt`, `server.key`, …
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.0.join(name)
    }
}
