//! The command table: every command of the command line declared once: the words that
//! name it, its arguments, what it does, and whether this build has it. The parser
//! (which command the words name, what is missing), `--help`, `COMMAND --help` and the
//! usage line of an error are all made from `COMMANDS`; a command's options are the
//! option table's rows whose `commands` name it, and `serve` also reads the two settings
//! declared here from the environment only.

use crate::config::{self, Cmd};

/// One command of the command line.
pub(crate) struct Verb {
    pub(crate) cmd: Cmd,
    /// The words that name it: `["token", "add"]`.
    pub(crate) words: &'static [&'static str],
    /// Its arguments, in order: the placeholder and what it is.
    pub(crate) args: &'static [(&'static str, &'static str)],
    /// What it does, for `--help`.
    pub(crate) about: &'static str,
    /// Whether this build has it: `Err` says why not (exit status 2).
    pub(crate) available: fn() -> Result<(), String>,
}

/// `serve`'s token of principal `default`; read from the environment only.
pub const TOKEN_VAR: &str = "PLANT_STORE_TOKEN";
/// The control token of `--test-control` (docs/testing.md); read from the environment only.
pub const CONTROL_TOKEN_VAR: &str = "PLANT_STORE_CONTROL_TOKEN";
/// What `--help` says of each.
pub(crate) const CONTROL_TOKEN_HELP: &str =
    "with --test-control: the bearer token of /_control/, at least 16 bytes; never stored";
pub(crate) const TOKEN_HELP: &str =
    "a bearer token accepted as principal `default`, read-write; never stored";

/// The command that no words name: `plant-store` alone is `plant-store serve`.
pub(crate) const DEFAULT: Cmd = Cmd::Serve;

fn always() -> Result<(), String> {
    Ok(())
}

/// Every command, in the order of `--help`.
pub(crate) const COMMANDS: &[Verb] = &[
    Verb {
        cmd: Cmd::Serve,
        words: &["serve"],
        args: &[],
        about: "run the HTTP service (the default): the first line on standard output is \
                `listening on http://HOST:PORT`; logs go to standard error; SIGTERM, SIGINT \
                or SIGHUP finishes the requests in flight and exits 0",
        available: always,
    },
    Verb {
        cmd: Cmd::TokenAdd,
        words: &["token", "add"],
        args: &[("PRINCIPAL", "whom the token speaks for")],
        about: "make a token; it is printed once, on the last line. A missing database is \
                refused; --create makes it",
        available: always,
    },
    Verb {
        cmd: Cmd::TokenList,
        words: &["token", "list"],
        args: &[],
        about: "list tokens: id, principal, scope, created and expires (UTC); reads only",
        available: always,
    },
    Verb {
        cmd: Cmd::TokenRevoke,
        words: &["token", "revoke"],
        args: &[("ID", "the token's id, as `token list` shows it")],
        about: "remove a token; it fails on its next request",
        available: always,
    },
    Verb {
        cmd: Cmd::WebhookAdd,
        words: &["webhook", "add"],
        args: &[
            ("PRINCIPAL", "whose events are posted"),
            (
                "URL",
                "where the events are posted (http://, or https:// in a build with the tls feature)",
            ),
        ],
        about: "add a webhook endpoint for the principal's events committed from now on; its \
                id is printed on the first line, its signing secret once, on the last line. \
                A missing database is refused; --create makes it",
        available: config::webhook::available,
    },
    Verb {
        cmd: Cmd::WebhookList,
        words: &["webhook", "list"],
        args: &[],
        about: "list endpoints: id, state, principal, delivered/last seq, failures, created, \
                URL, last error; never the secret; reads only",
        available: config::webhook::available,
    },
    Verb {
        cmd: Cmd::WebhookRemove,
        words: &["webhook", "remove"],
        args: &[("ID", "the endpoint's id, as `webhook list` shows it")],
        about: "remove an endpoint; its deliveries stop",
        available: config::webhook::available,
    },
    Verb {
        cmd: Cmd::WebhookEnable,
        words: &["webhook", "enable"],
        args: &[("ID", "the endpoint's id, as `webhook list` shows it")],
        about: "resume a disabled endpoint, with a fresh schedule, from its first \
                undelivered event",
        available: config::webhook::available,
    },
    Verb {
        cmd: Cmd::Backup,
        words: &["backup"],
        args: &[("FILE", "where the copy goes")],
        about: "a consistent copy of the database, taken while a server runs; an existing \
                FILE is refused unless --force",
        available: always,
    },
    Verb {
        cmd: Cmd::Compact,
        words: &["compact"],
        args: &[],
        about: "rewrite a database file made with larger pages (an older version's 4 KiB) \
                with 1 KiB pages, atomically; refused while a server has it open (serve \
                does it by itself at start for a file under 64 MiB)",
        available: always,
    },
    Verb {
        cmd: Cmd::Healthcheck,
        words: &["healthcheck"],
        args: &[],
        about: "exit 0 when the server at --addr (PLANT_STORE_ADDR; 0.0.0.0 and [::] mean \
                this host) answers GET /healthz with 200 within 2 s, else 1: a container's \
                HEALTHCHECK",
        available: always,
    },
];

/// What the words of a command line name.
pub(crate) enum Named<'a> {
    /// A command, and the arguments after its words.
    Verb(&'static Verb, &'a [&'a str]),
    /// The first word of several commands, and no second word of one of them
    /// (`token`, `webhook frob`): the commands it begins.
    Group(&'a str, Vec<&'static Verb>),
    /// No command.
    Unknown,
}

/// The command that `words` (the arguments that are not options) name.
pub(crate) fn named<'a>(words: &'a [&'a str]) -> Named<'a> {
    if words.is_empty() {
        return Named::Verb(verb(DEFAULT), words);
    }
    let longest = COMMANDS
        .iter()
        .filter(|v| words.starts_with(v.words))
        .max_by_key(|v| v.words.len());
    if let Some(v) = longest {
        return Named::Verb(v, &words[v.words.len()..]);
    }
    let group: Vec<&Verb> = COMMANDS
        .iter()
        .filter(|v| v.words.len() > 1 && v.words[0] == words[0])
        .collect();
    if group.is_empty() {
        Named::Unknown
    } else {
        Named::Group(words[0], group)
    }
}

/// The table's entry of `cmd`.
pub(crate) fn verb(cmd: Cmd) -> &'static Verb {
    COMMANDS
        .iter()
        .find(|v| v.cmd == cmd)
        .expect("every command is in the command table")
}
