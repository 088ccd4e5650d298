//! A benchmark peer: the plants interface (create, list, delete; bearer token; JSON
//! errors) as a common async Rust service writes it: axum on a multi-threaded tokio
//! runtime, rusqlite in `spawn_blocking`, one write connection and a few read ones, WAL
//! and `synchronous=FULL` (a 200 is on disk, as with plant-store). One principal: the
//! token in `BENCH_TOKEN` (or `PLANT_STORE_TOKEN`). Not a full contract (no OpenAPI,
//! access log or graceful shutdown): what the request path costs is what is compared.
//!
//!     axum-plants --port PORT --db FILE

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use rusqlite::{Connection, OptionalExtension, params};
use std::sync::{Arc, Mutex};

const READERS: usize = 4;

struct Db {
    token: String,
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NewPlant {
    id: i64,
    name: String,
    tag: Option<String>,
}

#[derive(serde::Serialize)]
struct Plant {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    tag: Option<String>,
}

fn json(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn error(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({ "error": status.as_u16(), "message": message });
    let mut r = json(status, body.to_string().into_bytes());
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            "Bearer realm=\"plants\"".parse().expect("ASCII"),
        );
    }
    r
}

fn authorised(db: &Db, headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let Some((scheme, token)) = value.split_once(' ') else {
        return false;
    };
    scheme.eq_ignore_ascii_case("bearer") && token.as_bytes() == db.token.as_bytes()
}

/// Runs `f` on a read connection, off the async threads.
async fn read<T: Send + 'static>(
    db: Arc<Db>,
    f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
) -> Result<T, Response> {
    let done = tokio::task::spawn_blocking(move || {
        let conn = db.readers.lock().unwrap().pop();
        let conn = match conn {
            Some(c) => c,
            None => open(&db_path())?,
        };
        let out = f(&conn);
        db.readers.lock().unwrap().push(conn);
        out
    })
    .await;
    match done {
        Ok(Ok(v)) => Ok(v),
        _ => Err(error(StatusCode::INTERNAL_SERVER_ERROR, "database error")),
    }
}

async fn list(State(db): State<Arc<Db>>, headers: HeaderMap, RawQuery(q): RawQuery) -> Response {
    if !authorised(&db, &headers) {
        return error(StatusCode::UNAUTHORIZED, "missing or unknown token");
    }
    let mut limit: i64 = -1;
    for pair in q.as_deref().unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("limit", v)) => match v.parse::<i64>() {
                Ok(n) if (0..=i64::from(i32::MAX)).contains(&n) => limit = n,
                _ => return error(StatusCode::BAD_REQUEST, "bad limit"),
            },
            _ => return error(StatusCode::BAD_REQUEST, "unknown query parameter"),
        }
    }
    let rows = read(db, move |c| {
        let mut st = c.prepare_cached("SELECT name, tag FROM plants ORDER BY id LIMIT ?1")?;
        let rows = st.query_map([limit], |r| Ok(Plant { name: r.get(0)?, tag: r.get(1)? }))?;
        rows.collect::<rusqlite::Result<Vec<Plant>>>()
    })
    .await;
    match rows {
        Ok(plants) => json(StatusCode::OK, serde_json::to_vec(&plants).expect("serialise")),
        Err(r) => r,
    }
}

async fn create(State(db): State<Arc<Db>>, headers: HeaderMap, body: Bytes) -> Response {
    if !authorised(&db, &headers) {
        return error(StatusCode::UNAUTHORIZED, "missing or unknown token");
    }
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return error(StatusCode::UNSUPPORTED_MEDIA_TYPE, "the body must be application/json");
    }
    let plant: NewPlant = match serde_json::from_slice(&body) {
        Ok(p) => p,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    if plant.name.is_empty() || plant.name.chars().count() > 256 {
        return error(StatusCode::BAD_REQUEST, "name must have 1 to 256 characters");
    }
    let done = tokio::task::spawn_blocking(move || {
        let c = db.writer.lock().unwrap();
        let n = c.execute(
            "INSERT INTO plants (id, name, tag) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
            params![plant.id, plant.name, plant.tag],
        )?;
        Ok::<_, rusqlite::Error>((n, Plant { name: plant.name, tag: plant.tag }))
    })
    .await;
    match done {
        Ok(Ok((0, _))) => error(StatusCode::CONFLICT, "a plant with this id already exists"),
        Ok(Ok((_, p))) => json(StatusCode::OK, serde_json::to_vec(&p).expect("serialise")),
        _ => error(StatusCode::INTERNAL_SERVER_ERROR, "database error"),
    }
}

async fn remove(State(db): State<Arc<Db>>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if !authorised(&db, &headers) {
        return error(StatusCode::UNAUTHORIZED, "missing or unknown token");
    }
    let Ok(id) = id.parse::<i64>() else {
        return error(StatusCode::BAD_REQUEST, "the id must be an integer");
    };
    let done = tokio::task::spawn_blocking(move || {
        let c = db.writer.lock().unwrap();
        c.query_row("DELETE FROM plants WHERE id = ?1 RETURNING 1", [id], |_| Ok(()))
            .optional()
    })
    .await;
    match done {
        Ok(Ok(Some(()))) => StatusCode::NO_CONTENT.into_response(),
        Ok(Ok(None)) => error(StatusCode::NOT_FOUND, "no such plant"),
        _ => error(StatusCode::INTERNAL_SERVER_ERROR, "database error"),
    }
}

fn db_path() -> String {
    std::env::var("AXUM_PLANTS_DB").expect("set by main")
}

fn open(path: &str) -> rusqlite::Result<Connection> {
    let c = Connection::open(path)?;
    c.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA busy_timeout=5000;")?;
    Ok(c)
}

fn main() {
    let (mut port, mut path) = (8080u16, String::from("plants.db"));
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_default();
        match flag.as_str() {
            "--port" => port = value.parse().expect("--port takes a number"),
            "--db" => path = value,
            _ => {
                eprintln!("usage: axum-plants --port PORT --db FILE");
                std::process::exit(2);
            }
        }
    }
    // SAFETY: set before any other thread starts.
    unsafe { std::env::set_var("AXUM_PLANTS_DB", &path) };
    let token = std::env::var("BENCH_TOKEN")
        .or_else(|_| std::env::var("PLANT_STORE_TOKEN"))
        .expect("BENCH_TOKEN or PLANT_STORE_TOKEN");
    let writer = open(&path).expect("open the database");
    writer
        .execute_batch(
            "CREATE TABLE IF NOT EXISTS plants (id INTEGER PRIMARY KEY, name TEXT NOT NULL, tag TEXT)",
        )
        .expect("create the table");
    let readers = (0..READERS).map(|_| open(&path).expect("open a reader")).collect();
    let db = Arc::new(Db {
        token,
        writer: Mutex::new(writer),
        readers: Mutex::new(readers),
    });
    let app = Router::new()
        .route("/plants", get(list).post(create))
        .route("/plants/{id}", delete(remove))
        .with_state(db);
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(async move {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("listen");
            println!("listening on http://{}", listener.local_addr().expect("address"));
            axum::serve(listener, app).await.expect("serve");
        });
}
