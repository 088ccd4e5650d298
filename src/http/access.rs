//! The access log line: what one answered request says in the log (and counts in
//! `/metrics`): method and path as sent (bounded, escaped, query values never shown),
//! status, bytes, duration, principal.

use crate::api::routes::{self, Route};
use crate::ops::metrics::Metrics;
use std::time::Instant;

/// What the access log line (and the request figures in `metrics.rs`) say of a request.
pub struct AccessLine {
    pub method: String,
    pub url: String,
    pub route: Route,
    pub status: u16,
    pub started: Instant,
    pub principal: Option<String>,
    /// Test control's fault that took the request (`flt_…`), named at the line's end.
    pub fault: Option<String>,
}

impl AccessLine {
    /// The line of a request with this method and URL (as sent), read at `started`, by
    /// `principal`; its status is set once answered.
    pub fn of(method: &str, url: &str, started: Instant, principal: Option<String>) -> AccessLine {
        AccessLine {
            method: crate::api::error::printable(method, MAX_LOGGED_METHOD),
            url: loggable_url(url),
            route: routes::route(url).0,
            status: 0,
            started,
            principal,
            fault: None,
        }
    }

    /// The line, as text (`METHOD PATH STATUS BYTES DURATIONus PRINCIPAL`) and, for
    /// `--log-format json`, as fields; and the request counted in the figures.
    pub fn write(&self, bytes: u64, metrics: &Metrics) {
        let micros = self.started.elapsed().as_micros() as u64;
        // Status 0: no answer was sent (a fault's reset or close); not counted.
        if self.status != 0 {
            metrics.request(self.route as usize, &self.method, self.status, micros);
        }
        let principal = self.principal.as_deref();
        let fault = self.fault.as_deref();
        log::info!(
            target: "access",
            method = self.method.as_str(),
            path = self.url.as_str(),
            status = self.status,
            bytes = bytes,
            duration_us = micros,
            principal = principal,
            fault = fault;
            "{} {} {} {bytes} {micros}us {}{}{}",
            self.method,
            self.url,
            self.status,
            principal.unwrap_or("-"),
            if fault.is_some() { " fault=" } else { "" },
            fault.unwrap_or("")
        );
    }
}

/// The most characters of a method the access line shows (escaped; `…` where cut).
const MAX_LOGGED_METHOD: usize = 16;
/// The most characters of a path the access line shows.
const MAX_LOGGED_PATH: usize = 200;
/// The most query parameter names the access line shows, and characters of each.
const MAX_LOGGED_PARAMS: usize = 8;
const MAX_LOGGED_PARAM_NAME: usize = 32;

/// The URL as logged: the path (bounded, escaped) and the names of the first query
/// parameters (bounded, escaped), never their values.
fn loggable_url(url: &str) -> String {
    use crate::api::error::printable;
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let mut out = printable(path, MAX_LOGGED_PATH);
    for (i, pair) in query.split('&').filter(|p| !p.is_empty()).enumerate() {
        if i == MAX_LOGGED_PARAMS {
            out.push_str("&…");
            break;
        }
        out.push(if i == 0 { '?' } else { '&' });
        let name = pair.split_once('=').map_or(pair, |p| p.0);
        out.push_str(&printable(name, MAX_LOGGED_PARAM_NAME));
        out.push_str("=…");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::loggable_url;

    #[test]
    fn logged_urls_keep_no_query_values() {
        assert_eq!(
            loggable_url("/plants?limit=5&token=secret"),
            "/plants?limit=…&token=…"
        );
        assert_eq!(loggable_url("/plants/7"), "/plants/7");
        assert_eq!(loggable_url("/a\nb"), "/a\\nb");
    }

    #[test]
    fn logged_urls_are_bounded() {
        let many: Vec<String> = (0..100).map(|i| format!("p{i}=v")).collect();
        let url = format!("/plants?{}", many.join("&"));
        assert_eq!(
            loggable_url(&url),
            "/plants?p0=…&p1=…&p2=…&p3=…&p4=…&p5=…&p6=…&p7=…&…"
        );
        let long = format!("/plants?{}=1", "n\u{1b}".repeat(100));
        assert_eq!(
            loggable_url(&long),
            format!("/plants?{}…=…", "n\\u{1b}".repeat(16))
        );
    }
}
