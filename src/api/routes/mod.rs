//! Routing and handlers: one `match` over method and path, then each handler in the
//! contract's order of checks: route (404, 405), token (401, 403), request (415, 413,
//! 400), store (409, 404). Nothing here knows about sockets; see `Incoming`.

use crate::api::auth::{self, TokenHash};
use crate::api::caller::{self, Context, Header, Seen, authenticate};
use crate::api::control::routes::faulted;
use crate::api::error::ApiError;
use crate::api::events::{self, EventStream};
use crate::api::listing::PlantList;
use crate::api::plant::{Plant, parse_new_plant};
use crate::ops::metrics::ROUTES;
use crate::store::{Change, Outcome, Owner, StoreResult};
pub use request::Incoming;
use request::{Answer, no_query, only, parse_id, parse_limit, printable, read_json};
use std::borrow::Cow;

/// The OpenAPI document of this service, served at /openapi.json.
pub const OPENAPI: &str = include_str!("../openapi.json");

/// A successful answer; errors travel as `ApiError`.
pub enum Reply {
    /// 200 with a JSON body.
    Json(Vec<u8>),
    /// 201 with a JSON body.
    Created(Vec<u8>),
    /// 200 with a fixed JSON text.
    Static(&'static str),
    /// 200 with the figures, in the Prometheus text format.
    Metrics(String),
    /// 204, no body.
    NoContent,
    /// 304, no body: the client's copy (`If-None-Match`) is current.
    NotModified,
    /// 200 with the list, produced row by row.
    List(PlantList),
    /// 200, a stream of events kept open by the HTTP layer.
    Events(EventStream),
}

/// What `handle` made of a request: an answer now, or a change to commit first.
pub enum Handled {
    Reply(Reply),
    /// Answered by `settle` once the change is durable.
    Write(Change, Pending),
    /// Test control's journal listing that waits for its entries: parked by the HTTP
    /// layer (holding no worker), answered 200 with the listing.
    Wait(crate::api::control::journal::Query),
}

impl From<Reply> for Handled {
    fn from(reply: Reply) -> Self {
        Handled::Reply(reply)
    }
}

/// How a write is answered once its change is committed.
pub struct Pending {
    made: Made,
    /// A write given by its token (`Owner::Token`): the token's hash, the request's time,
    /// and the rate-limit headers charged before its commit, which go with the answer once
    /// the token is found valid.
    by_token: Option<(TokenHash, i64, Vec<Header>)>,
}

enum Made {
    /// 200 with the plant as created (its JSON), or 409 for its id.
    Create { id: i64, body: Vec<u8> },
    /// 204, or 404 for this id.
    Delete { id: i64 },
}

/// The answer to a write, from what its commit did; `who` learns the principal of a
/// write given by its token (or why the token was refused, as checking it first says).
pub fn settle(
    cx: &Context,
    pending: Pending,
    outcome: StoreResult<Outcome>,
    who: &mut Seen,
) -> Result<Reply, ApiError> {
    let Pending { made, by_token } = pending;
    if let Some((hash, now, rate)) = by_token {
        let found = caller::settled(cx, &hash, now, &outcome);
        let refusal = match found {
            Some(Ok(principal)) => {
                who.principal = Some(principal);
                who.headers.extend(rate);
                None
            }
            Some(Err(refusal)) => {
                let error = caller::refused(cx, &hash, refusal, who);
                if who.principal.is_some() {
                    who.headers.extend(rate);
                }
                Some(error)
            }
            None => None,
        };
        caller::answered(cx, &hash);
        if let Some(error) = refusal {
            return Err(error);
        }
    }
    let outcome = match (outcome?, &made) {
        (Outcome::Owned { applied: true, .. }, Made::Create { .. }) => Outcome::Created,
        (Outcome::Owned { applied: false, .. }, Made::Create { .. }) => Outcome::Conflict,
        (Outcome::Owned { applied: true, .. }, Made::Delete { .. }) => Outcome::Deleted,
        (Outcome::Owned { applied: false, .. }, Made::Delete { .. }) => Outcome::NotFound,
        (outcome, _) => outcome,
    };
    match (made, outcome) {
        (Made::Create { body, .. }, Outcome::Created) => Ok(Reply::Json(body)),
        (Made::Create { id, .. }, Outcome::Conflict) => Err(ApiError::Conflict(id)),
        (Made::Delete { .. }, Outcome::Deleted) => Ok(Reply::NoContent),
        (Made::Delete { id }, Outcome::NotFound) => Err(not_owned(id)),
        (_, other) => Err(ApiError::Internal(format!("a write came back {other:?}"))),
    }
}

/// A write a request asks for, once it has passed the request's checks, before its
/// owner is settled.
enum Draft {
    Create {
        id: i64,
        name: String,
        tag: Option<String>,
        /// The plant's JSON, the answer once created.
        body: Vec<u8>,
    },
    Delete {
        id: i64,
    },
}

impl Draft {
    fn by(self, owner: Owner, by_token: Option<(TokenHash, i64, Vec<Header>)>) -> Handled {
        let (change, made) = match self {
            Draft::Create {
                id,
                name,
                tag,
                body,
            } => (
                Change::Create {
                    owner,
                    id,
                    name,
                    tag,
                },
                Made::Create { id, body },
            ),
            Draft::Delete { id } => (Change::Delete { owner, id }, Made::Delete { id }),
        };
        Handled::Write(change, Pending { made, by_token })
    }
}

/// A write, in the contract's order of checks: the token's (401, 403, 429), then the
/// request's (`request`: 415, 413, 400). When the backend looks a stored token up in the
/// write's commit (`caller::by_token`), a request that passes its own checks goes with
/// its token, and one that does not has its token checked first, so that the answer is
/// the one the order gives.
fn write(
    cx: &Context,
    req: &mut dyn Incoming,
    who: &mut Seen,
    request: impl FnOnce(&mut dyn Incoming) -> Result<Draft, ApiError>,
) -> Result<Handled, ApiError> {
    let checked = |req: &dyn Incoming, who: &mut Seen| {
        let caller = authenticate(cx, req.header("Authorization"), who)?;
        caller.require_write()?;
        faulted(cx, req, false, who)?;
        Ok::<_, ApiError>(Owner::Principal(caller.name))
    };
    let now = cx.db.clock().unix_now();
    // With test control, the token is checked first: a fault must know the principal
    // before the commit.
    let by_token = match cx.control {
        None => caller::by_token(cx, req.header("Authorization"), now),
        Some(_) => None,
    };
    let Some(hash) = by_token else {
        let owner = checked(req, who)?;
        return Ok(request(req)?.by(owner, None));
    };
    let draft = match request(req) {
        Ok(draft) => draft,
        Err(error) => {
            checked(req, who)?;
            return Err(error);
        }
    };
    Ok(match caller::charge(cx, &hash, now, who)? {
        Some(rate) => draft.by(Owner::Token { hash, now }, Some((hash, now, rate))),
        None => draft.by(checked(req, who)?, None),
    })
}

/// What a request asks for, as the router matched it; the metrics count answers by
/// route, labelled with its pattern (never the path as sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Healthz,
    OpenApi,
    Metrics,
    Plants,
    Plant,
    Events,
    /// Any other path (404, or a fault-injection route).
    Other,
}

impl Route {
    /// Every route, each at its place (`Route as usize`).
    pub const ALL: [Route; ROUTES] = [
        Route::Healthz,
        Route::OpenApi,
        Route::Metrics,
        Route::Plants,
        Route::Plant,
        Route::Events,
        Route::Other,
    ];

    pub fn pattern(self) -> &'static str {
        match self {
            Route::Healthz => "/healthz",
            Route::OpenApi => "/openapi.json",
            Route::Metrics => "/metrics",
            Route::Plants => "/plants",
            Route::Plant => "/plants/{id}",
            Route::Events => "/events",
            Route::Other => "other",
        }
    }

    /// The routes' patterns, each at its route's place: the metrics' labels.
    pub fn patterns() -> [&'static str; ROUTES] {
        Route::ALL.map(Route::pattern)
    }
}

/// The router: the route of a request target (path and query, as sent), and the id of
/// `/plants/{id}` as sent (empty for any other route).
pub fn route(url: &str) -> (Route, &str) {
    let path = url.split_once('?').map_or(url, |p| p.0);
    let path = path.strip_prefix('/').unwrap_or(path);
    let route = match path {
        "healthz" => Route::Healthz,
        "openapi.json" => Route::OpenApi,
        "metrics" => Route::Metrics,
        "plants" => Route::Plants,
        "events" => Route::Events,
        _ => match path.strip_prefix("plants/") {
            Some(id) if !id.is_empty() && !id.contains('/') => return (Route::Plant, id),
            _ => Route::Other,
        },
    };
    (route, "")
}

/// Whether a request target's first path segment is `plants`: every answer about a
/// caller's plants, whatever the route, is kept out of caches.
fn about_plants(url: &str) -> bool {
    let path = url.split_once('?').map_or(url, |p| p.0);
    let path = path.strip_prefix('/').unwrap_or(path);
    path.split('/').next() == Some("plants")
}

/// Handles one request. `seen` gets the caller's principal as soon as it is known (for
/// the access log) and the rate-limit headers.
pub fn handle(cx: &Context, req: &mut dyn Incoming, who: &mut Seen) -> Result<Handled, ApiError> {
    let url = req.url();
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let (route, id) = route(url);
    let method = req.method();
    if about_plants(url) {
        who.headers.push(NO_STORE);
    }
    match route {
        Route::Healthz => {
            // A cached health check would hide an outage.
            who.headers.push(NO_STORE);
            only(method, "GET")?;
            faulted(cx, req, false, who)?;
            no_query(query)?;
            cx.db.check()?;
            Ok(Reply::Static(r#"{"status":"ok"}"#).into())
        }
        Route::OpenApi => {
            only(method, "GET")?;
            faulted(cx, req, false, who)?;
            no_query(query)?;
            // A validator: caches revalidate every time, and an unchanged document is a
            // 304 without a body.
            let etag = openapi_etag();
            who.headers.push(("ETag", etag.into()));
            who.headers.push(("Cache-Control", "no-cache".into()));
            if req
                .header("If-None-Match")
                .is_some_and(|v| etag_matches(v, etag))
            {
                return Ok(Reply::NotModified.into());
            }
            Ok(Reply::Static(OPENAPI).into())
        }
        Route::Metrics => {
            // Aggregated figures only, so no token; a cached copy would be stale.
            who.headers.push(NO_STORE);
            only(method, "GET")?;
            no_query(query)?;
            Ok(Reply::Metrics(cx.metrics.render(&Route::patterns(), cx.db.size())).into())
        }
        Route::Plants => match method {
            // The token look-up and the first page share one read transaction.
            "GET" => cx.db.read(|| {
                // The token and the first page may come in one round trip; a bad `limit`
                // is still answered after the token's checks.
                let limit = parse_limit(query);
                if let Ok(limit) = limit {
                    let (from, count) = PlantList::first_page(limit);
                    cx.db.expect_page(from, count);
                }
                let caller = authenticate(cx, req.header("Authorization"), who)?;
                faulted(cx, &*req, false, who)?;
                let limit = limit?;
                Ok(Reply::List(PlantList::start(&cx.db, caller.name, limit)?).into())
            }),
            "POST" => {
                // Owned: reading the body needs the request mutably.
                let query = query.to_owned();
                write(cx, req, who, |req| create(req, &query))
            }
            _ => Err(ApiError::MethodNotAllowed { allow: "GET, POST" }),
        },
        Route::Plant => {
            only(method, "DELETE")?;
            // Checked before the token: only the answer waits for the token's checks.
            let draft = no_query(query).and_then(|()| Ok(Draft::Delete { id: parse_id(id)? }));
            write(cx, req, who, |_| draft)
        }
        Route::Events => {
            // A caller's own log: never cached; a list or a stream, by `Accept`.
            who.headers.push(NO_STORE);
            who.headers.push(("Vary", Cow::Borrowed("Accept")));
            only(method, "GET")?;
            let stream = events::wants_stream(req.header("Accept"));
            cx.db.read(|| {
                let caller = authenticate(cx, req.header("Authorization"), who)?;
                faulted(cx, &*req, stream, who)?;
                let last = events::LAST_EVENT_ID;
                let last = events::last_event_id(req.header(last), req.repeated(last));
                let feed = events::parse_query(query, stream, last)?;
                match feed.limit {
                    Some(limit) => {
                        Ok(
                            Reply::Json(events::list(&cx.db, &caller.name, feed.after, limit)?)
                                .into(),
                        )
                    }
                    None => {
                        Ok(Reply::Events(EventStream::start(&cx.db, caller, feed.after)?).into())
                    }
                }
            })
        }
        #[cfg(feature = "fault-injection")]
        Route::Other if path.starts_with("/__") => {
            fault::route(cx, path, query).map(|()| Reply::Static("{}").into())
        }
        // Test control's paths, when it is on; else 404 like any unknown path.
        Route::Other => {
            let missing = ApiError::NotFound(format!("no such path: {}", printable(path)));
            match cx.control.as_deref() {
                Some(c) => {
                    let (path, query) = (path.to_owned(), query.to_owned());
                    let env = cx.env_token.as_ref();
                    match crate::api::control::routes::handle(c, &cx.db, env, req, &path, &query) {
                        None => Err(missing),
                        Some(answer) => answer.map(|a| match a {
                            Answer::NoContent => Reply::NoContent.into(),
                            Answer::Created(body) => Reply::Created(body).into(),
                            Answer::Json(body) => Reply::Json(body).into(),
                            Answer::Wait(query) => Handled::Wait(query),
                        }),
                    }
                }
                None => Err(missing),
            }
        }
    }
}

/// Every answer about a caller's plants, and the health check, is not to be stored by
/// any cache.
const NO_STORE: (&str, Cow<'static, str>) = ("Cache-Control", Cow::Borrowed("no-store"));

/// The OpenAPI document's entity tag: the first 16 hex digits of its SHA-256, quoted.
fn openapi_etag() -> &'static str {
    static ETAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ETAG.get_or_init(|| {
        let hash = auth::hash_token(OPENAPI);
        let hex: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
        format!("\"{hex}\"")
    })
}

/// `If-None-Match` (a list of entity tags, or `*`) names this one; weak tags compare by
/// their opaque part (RFC 9110 13.1.2).
fn etag_matches(header: &str, etag: &str) -> bool {
    header
        .split(',')
        .map(|t| t.trim())
        .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == etag)
}

fn create(req: &mut dyn Incoming, query: &str) -> Result<Draft, ApiError> {
    let body = read_json(req)?;
    no_query(query)?;
    let plant = parse_new_plant(&body).map_err(ApiError::BadRequest)?;
    let mut out = Vec::with_capacity(body.len());
    plant.write_json(&mut out);
    let Plant { id, name, tag } = plant;
    Ok(Draft::Create {
        id,
        name,
        tag,
        body: out,
    })
}

fn not_owned(id: i64) -> ApiError {
    ApiError::NotFound(format!("no plant with id {id}"))
}

#[cfg(feature = "fault-injection")]
mod fault;
pub(crate) mod request;
#[cfg(test)]
mod tests;
