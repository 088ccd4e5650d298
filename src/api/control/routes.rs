//! Test control's hooks in the one router (`api::routes`): its routes (`/_control/…`),
//! matched only when the server has test control (else 404 like any unknown path), then
//! in the API's order of checks: route (404, 405 with `Allow`), the control token (401),
//! the request (415, 413, 400), then the operation (404 for an unknown id, 409); and
//! `faulted`, the fault that takes a request once its token and rate limit passed.

use crate::api::auth::TokenHash;
use crate::api::caller::{Context, Seen};
use crate::api::control::clock;
use crate::api::control::faults::{self, Action, Target};
use crate::api::control::journal::Query;
use crate::api::control::{Control, MAX_JOURNAL_SIZE};
use crate::api::error::ApiError;
use crate::api::routes::request::{Answer, Incoming, no_query, only, read_json};
use crate::store::Db;

/// A control path, as the router matched it.
enum Path<'p> {
    Reset,
    Tokens,
    Snapshots,
    Snapshot(&'p str),
    Restore(&'p str),
    Requests,
    Clock,
    ClockAdvance,
    Faults,
    Fault(&'p str),
}

fn route(path: &str) -> Option<Path<'_>> {
    let rest = path.strip_prefix("/_control/")?;
    Some(match rest {
        "reset" => Path::Reset,
        "tokens" => Path::Tokens,
        "snapshots" => Path::Snapshots,
        "requests" => Path::Requests,
        "clock" => Path::Clock,
        "clock/advance" => Path::ClockAdvance,
        "faults" => Path::Faults,
        _ if rest.starts_with("faults/") => match &rest["faults/".len()..] {
            id if !id.is_empty() && !id.contains('/') => Path::Fault(id),
            _ => return None,
        },
        _ => {
            let id = rest.strip_prefix("snapshots/")?;
            match id.split_once('/') {
                None if !id.is_empty() => Path::Snapshot(id),
                Some((id, "restore")) if !id.is_empty() => Path::Restore(id),
                _ => return None,
            }
        }
    })
}

/// A `/_control/` request; `None` when the path is none of test control's (404). `env` is
/// the hash of `PLANT_STORE_TOKEN`, which no chosen token may be.
pub fn handle(
    control: &Control,
    db: &Db,
    env: Option<&TokenHash>,
    req: &mut dyn Incoming,
    path: &str,
    query: &str,
) -> Option<Result<Answer, ApiError>> {
    let found = route(path)?;
    let method = req.method().to_owned();
    let allowed = match found {
        Path::Reset | Path::Tokens | Path::Snapshots | Path::Restore(_) => only(&method, "POST"),
        Path::Snapshot(_) | Path::Fault(_) => only(&method, "DELETE"),
        Path::Faults => match method.as_str() {
            "GET" | "POST" | "DELETE" => Ok(()),
            _ => Err(ApiError::MethodNotAllowed {
                allow: "GET, POST, DELETE",
            }),
        },
        Path::Requests => match method.as_str() {
            "GET" | "DELETE" => Ok(()),
            _ => Err(ApiError::MethodNotAllowed {
                allow: "GET, DELETE",
            }),
        },
        Path::Clock => match method.as_str() {
            "GET" | "PUT" | "DELETE" => Ok(()),
            _ => Err(ApiError::MethodNotAllowed {
                allow: "GET, PUT, DELETE",
            }),
        },
        Path::ClockAdvance => only(&method, "POST"),
    };
    Some(allowed.and_then(|()| {
        control.check(req.header("Authorization"))?;
        let reply = match found {
            Path::Reset => {
                no_query(query)?;
                control.reset(db)?;
                Answer::NoContent
            }
            Path::Tokens => {
                let body = read_json(req)?;
                no_query(query)?;
                Answer::Created(control.mint(db, &body, env)?)
            }
            Path::Snapshots => {
                no_query(query)?;
                let id = control.snapshot(db)?;
                Answer::Created(serde_json::json!({ "id": id }).to_string().into_bytes())
            }
            Path::Restore(id) => {
                no_query(query)?;
                control.restore(db, id)?;
                Answer::NoContent
            }
            Path::Snapshot(id) => {
                no_query(query)?;
                control.remove(id)?;
                Answer::NoContent
            }
            Path::Requests if method == "GET" => {
                let q = Query::parse(query, MAX_JOURNAL_SIZE)?;
                match q.wait {
                    None => Answer::Json(control.journal.list(&q)),
                    Some(_) => Answer::Wait(q),
                }
            }
            Path::Requests => {
                no_query(query)?;
                control.journal.clear();
                Answer::NoContent
            }
            Path::Clock if method == "GET" => {
                no_query(query)?;
                Answer::Json(clock::show(control.clock.reading()))
            }
            Path::Clock if method == "PUT" => {
                let body = read_json(req)?;
                no_query(query)?;
                Answer::Json(clock::show(clock::set(&control.clock, &body)?))
            }
            Path::Clock => {
                no_query(query)?;
                control.clock.clear();
                Answer::NoContent
            }
            Path::ClockAdvance => {
                let body = read_json(req)?;
                no_query(query)?;
                Answer::Json(clock::show(clock::advance(&control.clock, &body)?))
            }
            Path::Faults if method == "POST" => {
                let body = read_json(req)?;
                no_query(query)?;
                Answer::Created(control.add_fault(&body)?)
            }
            Path::Faults if method == "GET" => {
                no_query(query)?;
                Answer::Json(control.faults.list())
            }
            Path::Faults => {
                no_query(query)?;
                control.faults.clear();
                Answer::NoContent
            }
            Path::Fault(id) => {
                no_query(query)?;
                control.faults.remove(id)?;
                Answer::NoContent
            }
        };
        Ok(reply)
    }))
}

/// Test control's faults, tried once the route, the token and the rate limit passed (a
/// request they refuse is never faulted): the fault that takes the request goes in
/// `who`; an error when the request is not to be carried out now (a `before` fault: its
/// answer is the fault's, or it is carried out once a delay is waited). A request carried
/// out after its delay is not tried again.
pub fn faulted(
    cx: &Context,
    req: &dyn Incoming,
    stream: bool,
    who: &mut Seen,
) -> Result<(), ApiError> {
    let Some(control) = cx.control.as_deref() else {
        return Ok(());
    };
    if who.fault.is_some() || control.faults.none() {
        return Ok(());
    }
    let url = req.url();
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let target = Target::Request {
        request: faults::Request {
            method: req.method(),
            path,
            query,
            header: &|name| req.header(name),
            body: req.sent_body(),
            principal: who.principal.as_deref(),
        },
        stream,
    };
    // The request holds test control's barrier (`http::fault::gate`): no reset or
    // restore runs while a fault takes it, and the count it notes is steady.
    let Some(mut taken) = control.faults.take(&target) else {
        return Ok(());
    };
    taken.resets = control.passed();
    if !taken.stops() {
        who.fault = Some(taken);
        return Ok(());
    }
    let error = taken.error();
    taken.done = matches!(taken.action, Action::Status { .. });
    who.fault = Some(taken);
    Err(error)
}
