//! A request target's absolute form (RFC 9112 3.2.2): an `http` or `https` URL, served
//! as its path and query (its authority is checked against nothing).

/// Where the path of an absolute-form target (`http://host:8080/plants?limit=1`) starts,
/// when it is one: an `http` or `https` URL (any case) with a host and no user
/// information (RFC 9110 4.2.1 and 4.2.4). Its authority is checked against nothing.
pub(super) fn absolute_path(target: &[u8]) -> Option<usize> {
    let scheme = target.iter().position(|&b| b == b':')?;
    let name = &target[..scheme];
    if !(name.eq_ignore_ascii_case(b"http") || name.eq_ignore_ascii_case(b"https")) {
        return None;
    }
    let authority = scheme + 3;
    if target.get(scheme..authority) != Some(b"://") {
        return None;
    }
    let end = target[authority..]
        .iter()
        .position(|&b| matches!(b, b'/' | b'?' | b'#'))
        .map_or(target.len(), |i| authority + i);
    let host = &target[authority..end];
    (!host.is_empty() && !host.contains(&b'@') && target.get(end) != Some(&b'#')).then_some(end)
}

/// The origin-form of an absolute-form target, as it is served (`http://h/plants?x` is
/// `/plants?x`; an empty path is `/`); `None` for an origin-form target, served as sent.
/// Only targets the gate let through are given.
pub fn origin_form(target: &str) -> Option<String> {
    if target.starts_with('/') {
        return None;
    }
    let path = &target[absolute_path(target.as_bytes())?..];
    Some(match path.starts_with('/') {
        true => path.to_owned(),
        false => format!("/{path}"),
    })
}
