//! Faults built with types (docs/control.md, "Faults"):
//! `Fault::on(Match::post("/plants").principal("alice")).status(503).times(2)`. A
//! `Fault` is the body of `POST /_control/faults` (`Fault::to_json`), which the server
//! checks as it checks an HTTP client's: a bad value is its 400, naming the member.

use crate::server::control::action::{Action, Status};
use crate::server::control::json::{Read, object};
use serde_json::{Map, Value, json};

/// Which requests a fault takes (each member optional; none: every request), or which
/// webhook deliveries (`Match::webhook`, `Match::webhooks_of`). The `match` of a fault's
/// JSON.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Match {
    /// The request's method, in capitals.
    pub method: Option<String>,
    /// The path: exact, or ending in `*` for a prefix (`/plants/*`); no query.
    pub path: Option<String>,
    /// The caller's principal.
    pub principal: Option<String>,
    /// Query parameters present with exactly these values (percent-decoded).
    pub query: Vec<(String, String)>,
    /// Headers present (names in any case), each value exact or, ending in `*`, a prefix.
    pub headers: Vec<(String, String)>,
    /// A JSON object the request's JSON body holds, member by member.
    pub body: Option<Value>,
    /// Webhook deliveries to this endpoint (`wh_…`).
    pub webhook: Option<String>,
    /// `"webhook"`: the principal's webhook deliveries, not its requests.
    pub target: Option<String>,
}

impl Match {
    /// Every request.
    pub fn any() -> Match {
        Match::default()
    }

    /// `GET` requests to `path` (exact, or a prefix when it ends in `*`).
    pub fn get(path: impl Into<String>) -> Match {
        Match::any().method("GET").path(path)
    }

    /// `POST` requests to `path`.
    pub fn post(path: impl Into<String>) -> Match {
        Match::any().method("POST").path(path)
    }

    /// `DELETE` requests to `path` (`/plants/*` for any plant).
    pub fn delete(path: impl Into<String>) -> Match {
        Match::any().method("DELETE").path(path)
    }

    /// The delivery attempts to webhook endpoint `id` (`wh_…`), not requests.
    pub fn webhook(id: impl Into<String>) -> Match {
        Match {
            webhook: Some(id.into()),
            ..Match::default()
        }
    }

    /// The delivery attempts to every webhook endpoint of `principal`, not its requests.
    pub fn webhooks_of(principal: impl Into<String>) -> Match {
        Match {
            target: Some("webhook".into()),
            ..Match::any().principal(principal)
        }
    }

    /// Requests with this method (in capitals: `POST`).
    pub fn method(mut self, method: impl Into<String>) -> Match {
        self.method = Some(method.into());
        self
    }

    /// Requests to this path: exact, or a prefix when it ends in `*`.
    pub fn path(mut self, path: impl Into<String>) -> Match {
        self.path = Some(path.into());
        self
    }

    /// Requests whose path starts with `prefix` (`path` with a `*` added).
    pub fn path_prefix(self, prefix: impl Into<String>) -> Match {
        let prefix = prefix.into();
        self.path(prefix + "*")
    }

    /// Requests (or deliveries) of this principal.
    pub fn principal(mut self, principal: impl Into<String>) -> Match {
        self.principal = Some(principal.into());
        self
    }

    /// Requests with query parameter `name` equal to `value` (one call per parameter).
    pub fn query(mut self, name: impl Into<String>, value: impl Into<String>) -> Match {
        self.query.push((name.into(), value.into()));
        self
    }

    /// Requests with header `name` equal to `value`, or starting with it when it ends in
    /// `*` (one call per header).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Match {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Requests whose JSON body holds each member of `body` (a JSON object) with an equal
    /// value: `.body(serde_json::json!({"id": 7}))`.
    pub fn body(mut self, body: Value) -> Match {
        self.body = Some(body);
        self
    }

    /// The JSON of `match`.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        let texts = [
            ("method", &self.method),
            ("path", &self.path),
            ("principal", &self.principal),
            ("webhook", &self.webhook),
            ("target", &self.target),
        ];
        for (name, value) in texts {
            if let Some(v) = value {
                out.insert(name.into(), json!(v));
            }
        }
        for (name, pairs) in [("query", &self.query), ("headers", &self.headers)] {
            if !pairs.is_empty() {
                let pairs = pairs.iter().map(|(k, v)| (k.clone(), json!(v)));
                out.insert(name.into(), Value::Object(pairs.collect()));
            }
        }
        if let Some(body) = &self.body {
            out.insert("body".into(), body.clone());
        }
        Value::Object(out)
    }

    fn from_json(v: &Value) -> Option<Match> {
        let m = Read(object(v)?);
        let pairs = |name: &str| -> Option<Vec<(String, String)>> {
            match m.0.get(name) {
                None | Some(Value::Null) => Some(Vec::new()),
                Some(v) => object(v)?
                    .iter()
                    .map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect(),
            }
        };
        Some(Match {
            method: m.text("method")?,
            path: m.text("path")?,
            principal: m.text("principal")?,
            query: pairs("query")?,
            headers: pairs("headers")?,
            body: m.0.get("body").filter(|b| !b.is_null()).cloned(),
            webhook: m.text("webhook")?,
            target: m.text("target")?,
        })
    }
}

/// When a fault acts on a request: `Before` it is carried out (it is not, but for a
/// delay), or `After` (it is carried out, a write committed, then the fault takes its
/// answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Before the request is carried out.
    Before,
    /// Once the request is carried out, on its answer.
    After,
}

impl When {
    fn name(self) -> &'static str {
        match self {
            When::Before => "before",
            When::After => "after",
        }
    }
}

/// A fault to add: `Fault::on(Match)`, then its action (`.status(503)`, `.reset()`,
/// `.respond(Action)`, …), then how often (`.times(2)`, `.probability(0.5)`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Fault {
    /// Which requests (or deliveries) it takes: its `match`.
    pub on: Match,
    /// `None`: the server's default (`before`; `after` for the actions on an answer;
    /// none for deliveries).
    pub when: Option<When>,
    /// What it does.
    pub action: Action,
    /// It fires on the next `times` matching requests, then is spent.
    pub times: Option<u64>,
    /// It fires on each matching request with this chance.
    pub probability: Option<f64>,
    /// The seed of its draws (`probability`, a delay range); the server picks one when
    /// none is given.
    pub seed: Option<u64>,
}

/// A fault being built, before its action: `Fault::on(m)`. Each action method ends it.
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a fault needs its action: .status(503), .reset(), .respond(…)"]
pub struct FaultBuilder {
    on: Match,
    when: Option<When>,
}

impl Fault {
    /// A fault on the requests (or deliveries) `on` matches; its action comes next.
    pub fn on(on: Match) -> FaultBuilder {
        FaultBuilder { on, when: None }
    }

    /// It acts before the request is carried out.
    pub fn before(mut self) -> Fault {
        self.when = Some(When::Before);
        self
    }

    /// The request is carried out (a write committed), then it takes the answer.
    pub fn after(mut self) -> Fault {
        self.when = Some(When::After);
        self
    }

    /// It fires on the next `n` matching requests, then is spent.
    pub fn times(mut self, n: u64) -> Fault {
        self.times = Some(n);
        self
    }

    /// It fires on each matching request with chance `p` (over 0, at most 1; any other
    /// value, NaN and the infinities too, is the server's 400 naming `probability`).
    pub fn probability(mut self, p: f64) -> Fault {
        self.probability = Some(p);
        self
    }

    /// The seed of its draws, to repeat a run (0 to 2^53).
    pub fn seed(mut self, seed: u64) -> Fault {
        self.seed = Some(seed);
        self
    }

    /// The body of `POST /_control/faults`.
    pub fn to_json(&self) -> Value {
        let mut out = json!({ "match": self.on.to_json(), "action": self.action.to_json() });
        if let Some(when) = self.when {
            out["when"] = json!(when.name());
        }
        for (name, given) in [("times", self.times), ("seed", self.seed)] {
            if let Some(n) = given {
                out[name] = json!(n);
            }
        }
        if let Some(p) = self.probability {
            // JSON has no NaN or infinity (serde_json writes `null`, which the server
            // reads as no probability: a fault on every request). Sent as text, such a
            // value is refused as any probability that is no number in range is.
            out["probability"] = match p.is_finite() {
                true => json!(p),
                false => json!(p.to_string()),
            };
        }
        out
    }
}

impl FaultBuilder {
    /// It acts before the request is carried out (the default).
    pub fn before(mut self) -> FaultBuilder {
        self.when = Some(When::Before);
        self
    }

    /// The request is carried out (a write committed), then the fault takes its answer.
    pub fn after(mut self) -> FaultBuilder {
        self.when = Some(When::After);
        self
    }

    /// The fault does `action`: an `Action`, or a `Status`.
    pub fn respond(self, action: impl Into<Action>) -> Fault {
        Fault {
            on: self.on,
            when: self.when,
            action: action.into(),
            times: None,
            probability: None,
            seed: None,
        }
    }

    /// This status, with the error body (`respond(Status::new(…)…)` for more).
    pub fn status(self, status: u16) -> Fault {
        self.respond(Status::new(status))
    }

    /// A wait of `ms` milliseconds (then the request is carried out, or the answer sent).
    pub fn delay_ms(self, ms: u64) -> Fault {
        self.respond(Action::Delay { ms })
    }

    /// A wait drawn from `min..=max` ms by the fault's seeded generator.
    pub fn delay_between(self, min: u64, max: u64) -> Fault {
        self.respond(Action::DelayRange { min, max })
    }

    /// A TCP reset, no answer.
    pub fn reset(self) -> Fault {
        self.respond(Action::Reset)
    }

    /// The connection closed, no answer.
    pub fn close(self) -> Fault {
        self.respond(Action::Close)
    }

    /// The head and half the body, then closed.
    pub fn truncate(self) -> Fault {
        self.respond(Action::Truncate { bytes: None })
    }

    /// Exactly the answer's first `bytes` (its head included), then closed.
    pub fn truncate_at(self, bytes: u64) -> Fault {
        self.respond(Action::Truncate { bytes: Some(bytes) })
    }

    /// The answer `bytes` at a time, one piece every `every_ms`.
    pub fn trickle(self, bytes: u64, every_ms: u64) -> Fault {
        self.respond(Action::Trickle { bytes, every_ms })
    }

    /// An event stream that ends after `after_events` events.
    pub fn cut_stream(self, after_events: u64) -> Fault {
        self.respond(Action::CutStream { after_events })
    }

    /// A webhook delivery sent twice.
    pub fn duplicate(self) -> Fault {
        self.respond(Action::Duplicate)
    }

    /// A webhook delivery signed with another key.
    pub fn bad_signature(self) -> Fault {
        self.respond(Action::BadSignature)
    }
}

/// A fault as the server keeps it: the 201 of `fault`, an item of `faults`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StoredFault {
    /// Its id, `flt_…`.
    pub id: String,
    /// As stored: `when` as the server decided it (`None` for deliveries), `seed` as it
    /// picked it when it draws.
    pub fault: Fault,
    /// Requests (or attempts) it took so far.
    pub hits: u64,
    /// How many more it takes: `None` when unbounded.
    pub remaining: Option<u64>,
    /// The server's JSON of it.
    pub json: Value,
}

impl StoredFault {
    pub(super) fn from_json(v: Value) -> Option<StoredFault> {
        let f = Read(object(&v)?);
        let when = match f.text("when")?.as_deref() {
            None => None,
            Some("before") => Some(When::Before),
            Some("after") => Some(When::After),
            Some(_) => return None,
        };
        let fault = Fault {
            on: Match::from_json(f.0.get("match")?)?,
            when,
            action: Action::from_json(f.0.get("action")?)?,
            times: f.number("times")?,
            probability: f.float("probability")?,
            seed: f.number("seed")?,
        };
        Some(StoredFault {
            id: f.text("id")??,
            hits: f.number("hits")??,
            remaining: f.number("remaining")?,
            fault,
            json: v,
        })
    }
}
