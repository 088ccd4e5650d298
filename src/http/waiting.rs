//! Test control's journal listing that waits (`GET /_control/requests?wait=…&min=…`): the
//! request is parked, holding no worker, until `min` answered entries match (the journal
//! calls it back as it records the answer that makes them enough) or its wait is over
//! (the delays thread's timer), whichever comes first; then it goes back on the
//! workers' queue to be listed and answered (`list`) like any listing, so that neither
//! the delays thread (which times every fault's delay) nor the thread that recorded an
//! answer builds it.

use crate::api::control::journal::Query;
use crate::api::error::ApiError;
use crate::api::routes::Reply;
use crate::http::response::{self, Exchange, Queue};
use std::sync::{Arc, Mutex};

/// Parks a listing that waits (`Handled::Wait`) until it is due to be listed.
pub fn park(exchange: Exchange, query: Query, queue: &Arc<Queue>) {
    let site = exchange.site.clone();
    let Some(control) = site.control.clone() else {
        let error = ApiError::Internal("a journal listing without test control".into());
        return response::send(exchange, Err(error));
    };
    let wait = query.wait.unwrap_or_default();
    let query = Arc::new(query);
    // Taken by whichever comes first: the entries, or the end of the wait.
    let parked = Arc::new(Mutex::new(Some(exchange)));
    let due = {
        let (queue, query) = (queue.clone(), query.clone());
        move || {
            let taken = parked.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(mut exchange) = taken {
                exchange.listing = Some(query.clone());
                // The queue is closed once the server stops: listed here, then.
                if let Err(exchange) = queue.offer(exchange) {
                    list(exchange);
                }
            }
        }
    };
    let due = Arc::new(due);
    // Not held: a reset or a restore lists what the journal then holds.
    let woken = {
        let due = due.clone();
        move || due()
    };
    let id = control.journal.park(query, Box::new(woken));
    site.delays.later(&site.threads, wait, false, move |_| {
        control.journal.unpark(id);
        due()
    });
}

/// A parked listing, due (`Exchange::listing`): listed and answered (by a worker).
pub fn list(mut exchange: Exchange) {
    #[cfg(feature = "fault-injection")]
    crate::store::fault::hold_listing();
    let listing = match (&exchange.site.control, exchange.listing.take()) {
        (Some(control), Some(query)) => Ok(Reply::Json(control.journal.list(&query))),
        _ => Err(ApiError::Internal(
            "a journal listing without test control".into(),
        )),
    };
    response::send(exchange, listing)
}
