//! Faults built with types (`plant_store::control::Fault`): each kind, and each member of
//! a match, as the server stores and lists it (`faults()`), the webhook delivery kinds'
//! JSON among them; a fault matched on what a request carries.

use crate::control::{controlled, create};
use crate::shared;
use plant_store::control::{Action, Fault, Match, Status, When};
use serde_json::json;

#[test]
fn each_request_fault_kind_is_stored_as_built() {
    let _g = shared();
    let s = controlled();
    let control = s.control().unwrap();
    let status = Status::new(200)
        .body("[{\"name\":")
        .content_type("text/plain")
        .retry_after(3);
    let built = [
        Fault::on(Match::any()).respond(status),
        Fault::on(Match::post("/plants")).respond(Status::new(503).message("busy").retry_after(0)),
        Fault::on(Match::get("/plants")).delay_ms(250).times(3),
        Fault::on(Match::get("/plants"))
            .delay_between(50, 800)
            .seed(7),
        Fault::on(Match::delete("/plants/*")).after().reset(),
        Fault::on(Match::any())
            .before()
            .close()
            .probability(0.25)
            .seed(42),
        Fault::on(Match::get("/plants")).truncate(),
        Fault::on(Match::get("/plants")).truncate_at(100),
        Fault::on(Match::get("/plants")).trickle(8, 500),
        Fault::on(Match::get("/events")).cut_stream(2),
    ];
    for fault in &built {
        let stored = control.fault(fault.clone()).unwrap();
        assert_eq!(stored.fault.on, fault.on);
        assert_eq!(stored.fault.action, fault.action);
        assert_eq!(stored.fault.times, fault.times);
        assert_eq!(stored.fault.probability, fault.probability);
        assert_eq!(stored.json["action"], fault.to_json()["action"]);
    }
    let listed = control.faults().unwrap();
    let when: Vec<Option<When>> = listed.iter().map(|f| f.fault.when).collect();
    let (b, a) = (Some(When::Before), Some(When::After));
    assert_eq!(when, [b, b, b, b, a, b, a, a, a, a]);
    // A seed given is kept; one not given is picked where the fault draws.
    let seeds: Vec<Option<u64>> = listed.iter().map(|f| f.fault.seed).collect();
    assert_eq!(seeds[3], Some(7));
    assert_eq!(seeds[5], Some(42));
    assert_eq!(seeds[2], None);
    let drawn = control
        .fault(Fault::on(Match::any()).status(503).probability(0.5))
        .unwrap();
    assert!(drawn.fault.seed.is_some(), "{drawn:?}");
    assert_eq!(
        listed[2].json,
        json!({"id": listed[2].id, "match": {"method": "GET", "path": "/plants"},
               "when": "before", "action": {"kind": "delay", "ms": 250}, "times": 3,
               "probability": null, "seed": null, "hits": 0, "remaining": 3})
    );
    assert_eq!(
        listed[7].fault.action,
        Action::Truncate { bytes: Some(100) }
    );
    assert_eq!(
        listed[3].fault.action,
        Action::DelayRange { min: 50, max: 800 }
    );
}

#[test]
fn every_member_of_a_match_is_stored_and_matched() {
    let _g = shared();
    let s = controlled();
    let control = s.control().unwrap();
    let p = control.mint("m").unwrap();
    let on = Match::any()
        .method("POST")
        .path_prefix("/pla")
        .principal("m")
        .query("dry", "1")
        .header("user-agent", "my-client/*")
        .body(json!({"id": 9}));
    let stored = control.fault(Fault::on(on.clone()).status(502)).unwrap();
    assert_eq!(stored.fault.on, on);
    assert_eq!(
        stored.json["match"],
        json!({"method": "POST", "path": "/pla*", "principal": "m", "query": {"dry": "1"},
               "headers": {"user-agent": "my-client/*"}, "body": {"id": 9}})
    );
    // None of these requests is the fault's: each lacks one member.
    let post = |target: &str, agent: &str, id: i64| {
        let body = format!(r#"{{"id":{id},"name":"Fern"}}"#);
        let head = format!(
            "POST {target} HTTP/1.1\r\nHost: t\r\nUser-Agent: {agent}\r\nConnection: close\r\n\
             Authorization: Bearer {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            p.token,
            body.len()
        );
        let mut tcp = std::net::TcpStream::connect(s.addr()).unwrap();
        std::io::Write::write_all(&mut tcp, head.as_bytes()).unwrap();
        crate::client::read_response(&mut tcp).status
    };
    // The query is 400 for a create, after the fault would have taken it.
    assert_eq!(post("/plants?dry=1", "my-client/2", 9), 502);
    assert_eq!(post("/plants?dry=0", "my-client/2", 9), 400);
    assert_eq!(post("/plants", "my-client/2", 9), 200);
    assert_eq!(post("/plants?dry=1", "curl/8", 9), 400);
    assert_eq!(post("/plants?dry=1", "my-client/2", 10), 400);
    assert_eq!(create(&s, &p.token, 11).status, 200);
    let hits = control.faults().unwrap()[0].hits;
    assert_eq!(hits, 1);
}

#[test]
fn the_webhook_fault_kinds_are_listed_as_the_json_of_the_contract() {
    let _g = shared();
    let s = controlled();
    let control = s.control().unwrap();
    let built = [
        Fault::on(Match::webhook("wh_0123")).duplicate(),
        Fault::on(Match::webhooks_of("alice"))
            .bad_signature()
            .times(3),
        Fault::on(Match::webhook("wh_0123")).respond(Status::new(503).retry_after(7)),
        Fault::on(Match::webhooks_of("bob")).delay_ms(1500),
        Fault::on(Match::webhooks_of("bob"))
            .delay_between(10, 20)
            .seed(5),
    ];
    for fault in &built {
        control.fault(fault.clone()).unwrap();
    }
    let listed = control.faults().unwrap();
    let shown: Vec<serde_json::Value> = listed
        .iter()
        .map(|f| {
            let mut j = f.json.clone();
            j.as_object_mut().unwrap().remove("id");
            j
        })
        .collect();
    let unbounded = |m: serde_json::Value, action: serde_json::Value| {
        json!({"match": m, "when": null, "action": action, "times": null,
               "probability": null, "seed": null, "hits": 0, "remaining": null})
    };
    let mut expected = vec![
        unbounded(json!({"webhook": "wh_0123"}), json!({"kind": "duplicate"})),
        json!({"match": {"principal": "alice", "target": "webhook"}, "when": null,
               "action": {"kind": "bad_signature"}, "times": 3, "probability": null,
               "seed": null, "hits": 0, "remaining": 3}),
        unbounded(
            json!({"webhook": "wh_0123"}),
            json!({"kind": "status", "status": 503, "retry_after": 7}),
        ),
        unbounded(
            json!({"principal": "bob", "target": "webhook"}),
            json!({"kind": "delay", "ms": 1500}),
        ),
        unbounded(
            json!({"principal": "bob", "target": "webhook"}),
            json!({"kind": "delay", "ms": {"min": 10, "max": 20}}),
        ),
    ];
    expected[4]["seed"] = json!(5);
    assert_eq!(shown, expected);
    // Read back into the types: as built, `when` none (it does not apply).
    for (stored, fault) in listed.iter().zip(&built) {
        assert_eq!(
            (&stored.fault.on, &stored.fault.action),
            (&fault.on, &fault.action)
        );
        assert_eq!(stored.fault.when, None);
    }
    control.remove_fault(&listed[0].id).unwrap();
    assert_eq!(control.faults().unwrap().len(), 4);
}

#[test]
fn a_probability_that_is_no_number_in_range_is_refused_naming_it() {
    let _g = shared();
    let s = controlled();
    let control = s.control().unwrap();
    let p = control.mint("p").unwrap();
    let odd = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.5, 1.5];
    for chance in odd {
        let fault = Fault::on(Match::post("/plants")).status(503);
        let e = control.fault(fault.probability(chance)).unwrap_err();
        assert_eq!(
            (e.status(), e.message()),
            (400, "probability: must be a number over 0 and at most 1"),
            "{chance}"
        );
    }
    // Set on the public member, the same.
    let mut fault = Fault::on(Match::post("/plants")).status(503);
    fault.probability = Some(f64::NAN);
    assert_eq!(control.fault(fault).unwrap_err().status(), 400);
    // None was stored: a create goes through.
    assert_eq!(control.faults().unwrap(), []);
    assert_eq!(create(&s, &p.token, 1).status, 200);
}
