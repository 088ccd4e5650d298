use super::*;
use std::net::TcpStream;

/// Our listener with one client connected, not yet accepted.
fn listener_with_a_client() -> (TcpListener, u16, TcpStream) {
    let listener = bind(([127, 0, 0, 1], 0).into()).unwrap();
    let port = listener.local_addr().unwrap().port();
    let client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert!(wait_readable(listener.as_raw_fd(), Duration::from_secs(5)));
    (listener, port, client)
}

#[test]
fn the_accepted_socket_is_found_and_known_ones_are_skipped() {
    let (listener, port, _client) = listener_with_a_client();
    let predicted = lowest_free_fd(listener.as_raw_fd());
    let (server_side, _) = listener.accept().unwrap();
    let found = find_accepted(predicted, port, &HashSet::new()).unwrap();
    assert_eq!(found.fd, server_side.as_raw_fd());
    let known: HashSet<u64> = [found.ino].into();
    assert!(
        find_accepted(predicted, port, &known).is_none(),
        "a known socket (and the listener, which has no peer) is never taken"
    );
    // Found by the scan when the prediction is off.
    assert_eq!(
        find_accepted(Some(9999), port, &HashSet::new()).unwrap().fd,
        server_side.as_raw_fd()
    );
}

#[test]
fn consumed_counts_the_bytes_read_whether_or_not_the_client_closed() {
    use std::io::{Read, Write};
    let (listener, _, mut client) = listener_with_a_client();
    let (mut server_side, _) = listener.accept().unwrap();
    let fd = server_side.as_raw_fd();
    if !reports_reads() {
        // qemu-user (the armv7 unit tests in .ci/run): `consumed` rightly cannot say.
        eprintln!("no TCP_INFO here: consumed is None");
        assert_eq!(consumed(fd), None);
        return;
    }
    assert_eq!(consumed(fd), Some((0, 0)));
    client.write_all(b"0123456789").unwrap();
    let mut buf = [0u8; 4];
    server_side.read_exact(&mut buf).unwrap();
    assert_eq!(consumed(fd), Some((4, 6)));
    let mut peeked = Vec::new();
    assert_eq!(peek_into(fd, &mut peeked, 100), Some(6));
    assert_eq!(peeked, b"456789");
    assert_eq!(consumed(fd), Some((4, 6)), "a peek consumes nothing");
    client.shutdown(std::net::Shutdown::Write).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(consumed(fd), Some((4, 6)), "the FIN is not a byte read");
    let mut rest = Vec::new();
    server_side.read_to_end(&mut rest).unwrap();
    assert_eq!(consumed(fd), Some((10, 0)));
}

#[test]
fn a_wait_ends_when_the_low_water_mark_is_reached_or_the_client_closes() {
    use std::io::Write;
    let (listener, _, mut client) = listener_with_a_client();
    let (server_side, _) = listener.accept().unwrap();
    let fd = server_side.as_raw_fd();
    client.write_all(b"P").unwrap();
    set_rcvlowat(fd, 2);
    let soon = std::time::Instant::now() + Duration::from_millis(100);
    assert_eq!(
        wait_for(fd, Some(soon)),
        Wake::Timeout,
        "one byte is below the mark"
    );
    client.write_all(b"R").unwrap();
    assert_eq!(wait_for(fd, None), Wake::Ready);
    set_rcvlowat(fd, 3);
    drop(client);
    assert_eq!(wait_for(fd, None), Wake::Hangup);
}

#[test]
fn unsent_bytes_grow_when_the_client_does_not_read() {
    use std::io::Write;
    let (listener, _, _client) = listener_with_a_client();
    let (mut server_side, _) = listener.accept().unwrap();
    assert_eq!(unsent_bytes(server_side.as_raw_fd()), 0);
    server_side.set_nonblocking(true).unwrap();
    let chunk = vec![b'x'; 64 * 1024];
    while server_side.write(&chunk).is_ok() {}
    assert!(unsent_bytes(server_side.as_raw_fd()) > 0);
}
