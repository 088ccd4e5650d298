//! The static aarch64 build (`scripts/build-static aarch64`) under `qemu-aarch64`: a round
//! trip, then a restart on the same file. Ignored in a plain `cargo test`, as it needs
//! that build and the emulator; `.ci/run` builds it and runs this test with
//! `PLANT_STORE_AARCH64_BIN` set. (The x86_64 static build runs the whole suite:
//! `PLANT_STORE_BIN`, see `support::bin`.)

use crate::support::*;

/// ELF machine number of AArch64.
const EM_AARCH64: u16 = 183;

#[test]
#[ignore = "needs `scripts/build-static aarch64` and qemu-user; .ci/run runs it"]
fn the_aarch64_build_serves_and_restarts_under_qemu() {
    if sqlite_only("the static builds are checked once, on SQLite") {
        return;
    }
    let bin = std::env::var("PLANT_STORE_AARCH64_BIN")
        .expect("PLANT_STORE_AARCH64_BIN names the aarch64 binary");
    let elf = std::fs::read(&bin).unwrap();
    assert_eq!(&elf[..4], b"\x7fELF");
    assert_eq!(u16::from_le_bytes([elf[18], elf[19]]), EM_AARCH64, "{bin}");

    let dir = TempDir::new();
    let s = Launch::new(&dir.db()).under("qemu-aarch64", &bin).start();
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

    let s = Launch::new(&dir.db()).under("qemu-aarch64", &bin).start();
    assert_eq!(
        s.list(),
        r#"[{"name":"fig"}]"#,
        "what was acknowledged is kept"
    );
    assert_eq!(s.get("/healthz").status, 200);
    assert_eq!(s.delete("2").status, 204);
    assert_eq!(s.list(), "[]");
}
