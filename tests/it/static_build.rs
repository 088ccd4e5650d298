//! The binary under test serves, stops on SIGTERM and serves again on the same file: the
//! check of a static build that `.ci/run` runs (with the whole suite) against each of
//! them, the foreign ones under qemu-user (`PLANT_STORE_BIN`, `PLANT_STORE_EMULATOR`;
//! see `support::bin`). Natively it checks the build cargo made.

use crate::support::*;

#[test]
fn the_binary_serves_stops_on_sigterm_and_serves_again_on_the_same_file() {
    if sqlite_only("the static builds are checked once, on SQLite") {
        return;
    }
    let elf = std::fs::read(bin()).unwrap();
    assert_eq!(&elf[..4], b"\x7fELF");

    let dir = TempDir::new();
    let s = TestServer::start(&dir.db());
    assert_eq!(
        s.post(r#"{"id":1,"name":"olive","tag":"tree"}"#).status,
        200
    );
    assert_eq!(s.post(r#"{"id":2,"name":"fig"}"#).status, 200);
    assert_eq!(s.post(r#"{"id":2,"name":"fig"}"#).status, 409);
    assert_eq!(
        s.list(),
        r#"[{"name":"olive","tag":"tree"},{"name":"fig"}]"#
    );
    assert_eq!(s.delete("1").status, 204);
    assert_eq!(s.list(), r#"[{"name":"fig"}]"#);
    assert!(s.stop().success(), "SIGTERM ends it cleanly");

    let s = TestServer::start(&dir.db());
    assert_eq!(
        s.list(),
        r#"[{"name":"fig"}]"#,
        "what was acknowledged is kept"
    );
    assert_eq!(s.get("/healthz").status, 200);
    assert_eq!(s.delete("2").status, 204);
    assert_eq!(s.list(), "[]");
}
