use super::*;

/// What a `truncate` takes of a wire: the bytes, and how many of them are the body's.
fn cut(head: &[u8], body: Option<&[u8]>, at: Option<usize>) -> (Vec<u8>, u64) {
    let mut wire = Wire::new(head.to_vec(), body.map(|b| Body::Whole(b.to_vec())));
    let at = at.unwrap_or_else(|| wire.half().unwrap());
    let mut bytes = Vec::new();
    wire.take(&mut bytes, at, true).unwrap();
    (bytes, wire.body_taken())
}

#[test]
fn truncate_takes_the_first_bytes_or_half() {
    let (head, body) = (b"HEAD\r\n\r\n", Some(&b"0123456789"[..]));
    assert_eq!(cut(head, body, None), (b"HEAD\r\n\r\n01234".to_vec(), 5));
    assert_eq!(cut(head, Some(b""), None), (b"HEAD".to_vec(), 0));
    // A HEAD request's answer is its head alone.
    assert_eq!(cut(head, None, None), (b"HEAD".to_vec(), 0));
    assert_eq!(cut(head, body, Some(3)), (b"HEA".to_vec(), 0));
    assert_eq!(cut(head, body, Some(11)), (b"HEAD\r\n\r\n012".to_vec(), 3));
    let all = b"HEAD\r\n\r\n0123456789".to_vec();
    assert_eq!(cut(head, body, Some(18)), (all.clone(), 10));
    assert_eq!(cut(head, body, Some(usize::MAX)), (all, 10));
    assert_eq!(cut(head, None, Some(100)), (head.to_vec(), 0));
    assert_eq!(cut(head, body, Some(0)), (Vec::new(), 0));
}

#[test]
fn pieces_are_taken_in_turn_and_the_end_is_seen_before_the_last_is_sent() {
    let mut wire = Wire::new(b"HEAD".to_vec(), Some(Body::Whole(b"0123456".to_vec())));
    let mut pieces = Vec::new();
    loop {
        let mut piece = Vec::new();
        wire.take(&mut piece, 4, true).unwrap();
        let last = wire.ended().unwrap();
        pieces.push((String::from_utf8(piece).unwrap(), last));
        if last {
            break;
        }
    }
    let expected = [("HEAD", false), ("0123", false), ("456", true)];
    assert_eq!(pieces, expected.map(|(p, l)| (p.to_owned(), l)));
    assert_eq!(wire.body_taken(), 7);
}

#[test]
fn a_chunked_head_keeps_its_fields_and_says_so() {
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
    assert_eq!(
        String::from_utf8(chunked(head.to_vec())).unwrap(),
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\
         Transfer-Encoding: chunked\r\n\r\n"
    );
}

#[test]
fn a_trickle_waits_its_pace_until_its_time_is_up() {
    let began = Instant::now();
    let every = Duration::from_secs(10);
    assert_eq!(next_wait(every, began, began), Some(every));
    let near = began + MAX_TRICKLE_TIME - Duration::from_secs(3);
    assert_eq!(next_wait(every, began, near), Some(Duration::from_secs(3)));
    assert_eq!(next_wait(every, began, began + MAX_TRICKLE_TIME), None);
    assert_eq!(next_wait(every, began, began + 2 * MAX_TRICKLE_TIME), None);
}
