//! Test control's journal listing that waits (`GET /_control/requests?wait=…&min=…`): the
//! request is parked, holding no worker, until `min` answered entries match (the journal
//! calls it back as it records the answer that makes them enough) or its wait is over
//! (the delays thread's timer), whichever comes first; then it is listed and answered
//! on the delays thread.

use crate::api::control::journal::Query;
use crate::api::error::ApiError;
use crate::api::routes::Reply;
use crate::http::response::{self, Exchange};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Parks a listing that waits (`Handled::Wait`) until it is answered.
pub fn park(exchange: Exchange, query: Query) {
    let site = exchange.site.clone();
    let Some(control) = site.control.clone() else {
        let error = ApiError::Internal("a journal listing without test control".into());
        return response::send(exchange, Err(error));
    };
    let wait = query.wait.unwrap_or_default();
    let query = Arc::new(query);
    // Taken by whichever comes first: the entries, or the end of the wait.
    let parked = Arc::new(Mutex::new(Some(exchange)));
    let answer = {
        let (control, query) = (control.clone(), query.clone());
        move || {
            let taken = parked.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(exchange) = taken {
                let listing = control.journal.list(&query);
                response::send(exchange, Ok(Reply::Json(listing)));
            }
        }
    };
    let answer = Arc::new(answer);
    let woken = {
        let (site, answer) = (site.clone(), answer.clone());
        move || {
            // Not held: a reset or a restore lists what the journal then holds.
            site.delays
                .later(&site.threads, Duration::ZERO, false, move |_| answer())
        }
    };
    let id = control.journal.park(query, Box::new(woken));
    site.delays.later(&site.threads, wait, false, move |_| {
        control.journal.unpark(id);
        answer()
    });
}
