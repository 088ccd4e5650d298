//! Webhooks over https: an endpoint is trusted only with the roots of `--webhook-ca`
//! (`support::TlsReceiver` with the test CA's certificate), a failed handshake says TLS,
//! and a CA file without a certificate stops `serve` from starting.

use crate::support::*;
use crate::webhooks::{add_webhook, attempts, create, row};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A TLS receiver with the test CA's certificate for 127.0.0.1.
fn tls_receiver(pki: &Pki) -> TlsReceiver {
    TlsReceiver::start(&pki.file("server.crt"), &pki.file("server.key"))
}

/// `serve --webhook-ca CA` (when given) and `--webhook-schedule 1h` on a database of its
/// own, with an endpoint for `default` at a TLS receiver of the test CA's certificate,
/// and one event to deliver.
fn https_case(pki: &Pki, ca: Option<&str>) -> (TempDir, TestServer, TlsReceiver, String, String) {
    let dir = TempDir::new();
    let db = dir.db();
    let mut launch = Launch::new(&db).arg("--webhook-schedule 1h");
    if let Some(ca) = ca {
        launch = launch.arg(&format!("--webhook-ca {}", pki.file(ca).display()));
    }
    let s = launch.start();
    let tls = tls_receiver(pki);
    let url = format!("https://127.0.0.1:{}/hook", tls.port);
    let (id, secret) = add_webhook(&db, "default", &url);
    create(&s, TOKEN, 1);
    (dir, s, tls, id, secret)
}

#[test]
fn an_https_endpoint_with_a_certificate_of_the_webhook_ca_gets_its_events() {
    if without(Feature::Tls) {
        return;
    }
    let pki = Pki::new("IP:127.0.0.1");
    let (dir, s, mut tls, id, secret) = https_case(&pki, Some("ca.crt"));
    let r = tls.request(Duration::from_secs(15));
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/hook"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(
        String::from_utf8_lossy(&r.body),
        elements(&s.get("/events").text())[0]
    );
    assert!(verify(&secret, &r), "{r:?}");
    eventually(Duration::from_secs(10), || {
        row(&dir.db(), &id).progress == "1/1"
    });
    assert_eq!(attempts(&s, "delivered"), 1.0);
}

/// With another CA as `--webhook-ca`, or with the built-in roots, the test CA's
/// certificate is not trusted: the attempt fails, and `webhook list` says it was TLS
/// (docs/operating.md: "what failed: … `TLS: …`").
#[test]
fn an_https_endpoint_with_a_certificate_of_another_ca_fails_with_a_tls_error() {
    if without(Feature::Tls) {
        return;
    }
    let pki = Pki::new("IP:127.0.0.1");
    let mut errors = Vec::new();
    for ca in [Some("other-ca.crt"), None] {
        let (dir, s, tls, id, _) = https_case(&pki, ca);
        eventually(Duration::from_secs(10), || {
            row(&dir.db(), &id).failures == "1"
        });
        let r = row(&dir.db(), &id);
        assert_eq!((r.state.as_str(), r.progress.as_str()), ("active", "0/1"));
        assert_eq!(attempts(&s, "failed"), 1.0);
        assert_eq!(attempts(&s, "delivered"), 0.0);
        drop(tls);
        eprintln!("roots {ca:?}: last error {:?}", r.error);
        errors.push((ca, r.error));
    }
    for (ca, error) in errors {
        assert!(
            error.starts_with("TLS: "),
            "roots {ca:?}: the last error names TLS, not {error:?}"
        );
    }
}

#[test]
fn a_webhook_ca_file_without_a_certificate_stops_serve_from_starting() {
    if without(Feature::Tls) {
        return;
    }
    let dir = TempDir::new();
    let empty = dir.0.join("empty.pem");
    std::fs::write(&empty, "no certificate here\n").unwrap();
    let db = dir.db();
    let mut child = plant_store()
        .args(["serve", "--addr", "127.0.0.1:0", "--db"])
        .arg(&db)
        .arg("--webhook-ca")
        .arg(&empty)
        .env("PLANT_STORE_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve with a CA file without a certificate still runs");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!status.success(), "{stdout}{stderr}");
    assert!(!stdout.contains("listening on"), "{stdout}");
    assert!(stderr.contains("--webhook-ca"), "{stderr}");
}
