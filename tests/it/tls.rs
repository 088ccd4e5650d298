//! PostgreSQL only: TLS to the database, as the URL's `sslmode` and `sslrootcert` ask.
//! A throw-away cluster takes TLS with a certificate for `localhost` from a test CA;
//! another CA, unrelated, stands for the wrong one.

use crate::support::*;
use std::path::Path;
use std::sync::OnceLock;

/// The cluster that takes TLS, shared by this file's tests, and its PKI.
fn tls_cluster() -> &'static (Cluster, Pki) {
    static CLUSTER: OnceLock<(Cluster, Pki)> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let pki = Pki::new("DNS:localhost");
        let cluster =
            Cluster::start_with_tls(Some((&pki.file("server.crt"), &pki.file("server.key"))));
        (cluster, pki)
    })
}

/// The URL of database `name` on the TLS cluster: `host` as named (its address is always
/// 127.0.0.1), then `params`, with `{ca}` and `{other}` standing for the two CAs' files.
fn url(name: &str, host: &str, params: &str) -> String {
    let (cluster, pki) = tls_cluster();
    cluster.database(name);
    let params = params
        .replace("{ca}", pki.file("ca.crt").to_str().unwrap())
        .replace("{other}", pki.file("other-ca.crt").to_str().unwrap());
    format!(
        "postgres://postgres@{host}:{}/{name}?hostaddr=127.0.0.1&{params}",
        cluster.port
    )
}

/// `plant-store token add tls-probe --db URL`, which connects once and ends: its exit code and
/// stderr. HOME is a directory without `.postgresql/root.crt`.
fn connect_once(url: &str) -> (i32, String) {
    let home = TempDir::new();
    let out = plant_store()
        // A command that connects and may write (a list command refuses a database it
        // would have to migrate): its exit status says whether it could connect.
        .args(["token", "add", "tls-probe", "--db", url])
        .env("HOME", &home.0)
        .env_remove("PLANT_STORE_TOKEN")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Whether every connection the server holds to database `name` is TLS, and how many it
/// holds.
fn server_connections(name: &str) -> String {
    tls_cluster().0.psql(
        "postgres",
        &format!(
            "SELECT bool_and(s.ssl), count(*) > 0 FROM pg_stat_ssl s JOIN pg_stat_activity a \
             USING (pid) WHERE a.datname = '{name}' AND a.application_name = 'plant-store'"
        ),
    )
}

#[test]
fn verify_full_serves_over_tls_and_the_default_prefers_it() {
    if postgres_only("TLS to the database is PostgreSQL's") {
        return;
    }
    for (name, params) in [
        ("tls_full", "sslmode=verify-full&sslrootcert={ca}"),
        ("tls_default", "application_name=plant-store"),
    ] {
        let url = url(name, "localhost", params);
        let s = Launch::new(Path::new(&url)).start();
        let r = s.post(r#"{"id":1,"name":"fern"}"#);
        assert_eq!((r.status, r.text()), (200, r#"{"name":"fern"}"#.into()));
        assert_eq!(s.list(), r#"[{"name":"fern"}]"#, "{params}");
        assert_eq!(
            server_connections(name),
            "t|t\n",
            "{params}: every connection is TLS"
        );
    }
}

#[test]
fn a_url_that_asks_for_tls_gets_what_it_asked_or_no_connection() {
    if postgres_only("TLS to the database is PostgreSQL's") {
        return;
    }
    // (host, parameters, refused with this in the message, or accepted when empty, and the
    // exit status: 2 for a URL refused as the options are read, 1 when refused connecting)
    let cases = [
        ("localhost", "sslmode=verify-full&sslrootcert={ca}", "", 0),
        (
            "localhost",
            "sslmode=verify-full&sslrootcert={other}",
            "UnknownIssuer",
            1,
        ),
        (
            "127.0.0.1",
            "sslmode=verify-full&sslrootcert={ca}",
            "certificate not valid for name",
            1,
        ),
        ("127.0.0.1", "sslmode=verify-ca&sslrootcert={ca}", "", 0),
        (
            "localhost",
            "sslmode=verify-ca&sslrootcert={other}",
            "UnknownIssuer",
            1,
        ),
        // require checks the chain when a root certificate is named (as libpq), and
        // otherwise only encrypts.
        (
            "localhost",
            "sslmode=require&sslrootcert={other}",
            "UnknownIssuer",
            1,
        ),
        ("127.0.0.1", "sslmode=require", "", 0),
        (
            "localhost",
            "sslmode=verify-full",
            "needs a root certificate",
            2,
        ),
        (
            "localhost",
            "sslmode=verify-all",
            "sslmode=verify-all is not one of",
            2,
        ),
        (
            "localhost",
            "sslcert=client.crt",
            "unknown option `sslcert`",
            2,
        ),
    ];
    for (host, params, refused, status) in cases {
        let url = url("tls_cases", host, params);
        let (code, stderr) = connect_once(&url);
        if refused.is_empty() {
            assert_eq!(code, 0, "{host} {params}: {stderr}");
        } else {
            assert_eq!(code, status, "{host} {params}: {stderr}");
            assert!(stderr.contains(refused), "{host} {params}: {stderr}");
            assert!(
                !stderr.contains("sslrootcert=/"),
                "parameters are not shown: {stderr}"
            );
        }
    }
}

#[test]
fn a_server_without_tls_is_refused_unless_the_url_allows_plain() {
    if postgres_only("TLS to the database is PostgreSQL's") {
        return;
    }
    let plain = shared_cluster();
    plain.database("tls_plain");
    let (ca, other) = {
        let pki = &tls_cluster().1;
        (pki.file("ca.crt"), pki.file("other-ca.crt"))
    };
    // (credentials, parameters, accepted)
    for (user, params, accepted) in [
        ("postgres", "sslmode=disable".to_owned(), true),
        ("postgres", "sslmode=prefer".to_owned(), true),
        ("postgres", "sslmode=require".to_owned(), false),
        (
            "postgres",
            format!("sslmode=verify-ca&sslrootcert={}", ca.display()),
            false,
        ),
        (
            "postgres",
            format!("sslmode=verify-full&sslrootcert={}", other.display()),
            false,
        ),
        // A key written with an escape is the same key.
        ("postgres", "ssl%6Dode=require".to_owned(), false),
        // A password with a raw `?` (the client takes it: the parameters start after the
        // credentials) does not hide `sslmode`; it once did, and the connection went plain.
        ("postgres:pa?ss", "sslmode=require".to_owned(), false),
    ] {
        let url = format!(
            "postgres://{user}@localhost:{}/tls_plain?hostaddr=127.0.0.1&{params}",
            plain.port
        );
        let (code, stderr) = connect_once(&url);
        if accepted {
            assert_eq!(code, 0, "{user} {params}: {stderr}");
        } else {
            assert_eq!(code, 1, "{user} {params} fell back to plain");
            assert!(
                stderr.contains("server does not support TLS"),
                "{user} {params}: {stderr}"
            );
            assert!(!stderr.contains("pa?ss"), "the password is shown: {stderr}");
        }
    }
}
