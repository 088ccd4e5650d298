//! A build without the `test-control` feature (the device build, `scripts/build-static ARCH
//! --small`): stands in for test control's hooks where requests are answered
//! (`fault.rs`, `fault_bytes.rs`, `delay.rs`, `waiting.rs`), with their names. No fault
//! takes a request (`api::control`'s stand-in has no `Taken`), no listing waits (no
//! `Query`), no barrier is taken and nothing is put off.

pub mod fault {
    use crate::api::control::Control;
    use crate::api::error::ApiError;
    use crate::http::response::{Exchange, Queue};
    use std::sync::{Arc, RwLockReadGuard};

    /// No fault takes a request: each is answered as it comes.
    pub use crate::http::response::send;

    /// No barrier: nothing resets the store.
    pub fn gate<'c>(
        _: Option<&'c Control>,
        _: &Exchange,
    ) -> Result<Option<RwLockReadGuard<'c, ()>>, ApiError> {
        Ok(None)
    }

    /// Nothing is put off.
    pub fn put_off(exchange: Exchange, _: &Arc<Queue>) -> Option<Exchange> {
        Some(exchange)
    }
}

pub mod fault_bytes {
    use crate::api::caller::Seen;
    use crate::api::listing::PlantList;
    use crate::http::access::AccessLine;
    use crate::http::conn::InFlight;
    use crate::http::site::Site;
    use std::sync::Arc;
    use tiny_http::Request;

    /// An answer's body as `response::send` made it, for a fault that shapes its bytes.
    pub enum Body {
        Whole(Vec<u8>),
        List { list: PlantList, chunked: bool },
    }

    /// Never called (no fault shapes an answer here): the head as it is.
    pub fn chunked(head: Vec<u8>) -> Vec<u8> {
        head
    }

    /// Never called: it is for a fault that shapes an answer's bytes, and none does here.
    pub fn send(
        _: Request,
        _: InFlight,
        _: Arc<Site>,
        seen: Seen,
        _: AccessLine,
        _: Vec<u8>,
        _: Body,
    ) {
        if let Some(taken) = seen.fault {
            match taken {}
        }
    }
}

pub mod delay {
    /// No work is put off here.
    #[derive(Default)]
    pub struct Delays {
        _none: (),
    }

    impl Delays {
        pub fn stop(&self) {}
    }
}

pub mod waiting {
    use crate::api::control::journal::Query;
    use crate::http::response::{Exchange, Queue};
    use std::sync::Arc;

    /// No listing waits here.
    pub fn park(_: Exchange, query: Query, _: &Arc<Queue>) {
        match query {}
    }

    /// No listing is ever due (`Exchange::listing` holds no `Query`).
    pub fn list(exchange: Exchange) {
        if let Some(query) = exchange.listing.as_deref() {
            match *query {}
        }
    }
}
