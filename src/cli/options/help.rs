//! What the command line says of itself, all of it made from the command table
//! (`commands.rs`) and the option table (`config`): `--help`, `COMMAND --help`, the
//! usage line that an error ends with, `--version`, and docs/reference.md's flags table. A
//! build shows only the commands and options it has.

use crate::cli::options::commands::{self, COMMANDS, DEFAULT, Named, Verb};
use crate::cli::options::commands::{CONTROL_TOKEN_HELP, CONTROL_TOKEN_VAR, TOKEN_HELP, TOKEN_VAR};
use crate::config::{self, Cmd, OPTIONS, Opt};

/// The width help is wrapped to.
const WIDTH: usize = 80;
/// The longest usage line that lists a command's options (after `Usage: `); a longer one
/// says `[OPTIONS]`.
const USAGE_WIDTH: usize = WIDTH - "Usage: ".len();
/// The narrowest that the text column of help gets, however long the names beside it.
const MIN_TEXT: usize = 36;
/// Where a command's description starts, under its usage line.
const ABOUT_INDENT: usize = 6;

/// The cargo features, and whether this build has each; `--version` names those it has.
const FEATURES: &[(&str, bool)] = &[
    ("webhooks", cfg!(feature = "webhooks")),
    ("tls", cfg!(feature = "tls")),
    ("test-control", cfg!(feature = "test-control")),
    ("postgres", cfg!(feature = "postgres")),
    ("fault-injection", cfg!(feature = "fault-injection")),
];

/// `--version`: the version, the schema the database gets, the features built in.
pub fn version() -> String {
    let built: Vec<&str> = FEATURES.iter().filter(|f| f.1).map(|f| f.0).collect();
    format!(
        "plant-store {} (schema {}; features: {}{})\n",
        env!("CARGO_PKG_VERSION"),
        crate::store::schema_version(),
        if built.is_empty() {
            "none".to_owned()
        } else {
            built.join(", ")
        },
        // A build whose panics end the process (the device build) says so.
        if cfg!(panic = "abort") {
            "; panic=abort"
        } else {
            ""
        }
    )
}

/// The help that `--help` after `words` asks for: the command's, a group's (`token
/// --help`), or the whole command line's. A command this build lacks is refused.
pub fn help(words: &[&str]) -> Result<String, String> {
    match commands::named(words) {
        Named::Verb(v, _) if !words.is_empty() => {
            (v.available)()?;
            Ok(command(v))
        }
        Named::Group(first, verbs) => {
            (verbs[0].available)()?;
            Ok(group(first, &verbs))
        }
        _ => Ok(whole()),
    }
}

/// `--help`: every command this build has, then `serve`'s options.
fn whole() -> String {
    let mut out = String::from(
        "plant-store: a small HTTP store of plants\n\n\
         Usage: plant-store [COMMAND] [ARGUMENTS] [OPTIONS]\n\
         \x20      plant-store COMMAND --help    a command's arguments and options\n\
         \x20      plant-store --version         the version, its schema and features\n\n\
         Commands:\n",
    );
    out.push_str(&listing(
        COMMANDS.iter().filter(|v| (v.available)().is_ok()),
    ));
    out.push_str("\nOptions of serve (each also read from the environment variable shown):\n");
    out.push_str(&options_of(DEFAULT));
    out
}

/// `token --help`: the commands that begin with `first`.
fn group(first: &str, verbs: &[&'static Verb]) -> String {
    format!(
        "plant-store {first}: {}\n\nCommands:\n{}\nplant-store {first} COMMAND --help: a command's arguments and options\n",
        one_of(verbs),
        listing(verbs.iter().copied())
    )
}

/// `COMMAND --help`: what it does, its usage line, its arguments, its options.
fn command(v: &Verb) -> String {
    let mut out = wrap(
        &format!("plant-store {}: {}", v.words.join(" "), v.about),
        0,
    );
    out.push_str(&format!("\nUsage: {}\n", usage(v)));
    if !v.args.is_empty() {
        let rows: Vec<(String, String)> = v
            .args
            .iter()
            .map(|(name, what)| (name.to_string(), what.to_string()))
            .collect();
        out.push_str(&format!("\nArguments:\n{}", columns(&rows)));
    }
    out.push_str("\nOptions");
    if v.cmd == DEFAULT {
        out.push_str(" (each also read from the environment variable shown)");
    }
    out.push_str(&format!(":\n{}", options_of(v.cmd)));
    out
}

/// The usage line of a command: its words, its arguments, and its options (`[OPTIONS]`
/// when listing them would not fit on a line).
pub fn usage(v: &Verb) -> String {
    let name = if v.cmd == DEFAULT {
        format!("[{}]", v.words.join(" "))
    } else {
        v.words.join(" ")
    };
    let args: String = v.args.iter().map(|(a, _)| format!(" {a}")).collect();
    let opts: String = shown(v.cmd)
        .map(|o| format!(" [{}]", flag_and_value(o)))
        .collect();
    let line = format!("plant-store {name}{args}{opts}");
    if line.chars().count() <= USAGE_WIDTH {
        line
    } else {
        format!("plant-store {name}{args} [OPTIONS]")
    }
}

/// "add, list or revoke": the last words of `verbs`.
pub fn one_of(verbs: &[&Verb]) -> String {
    let last: Vec<&str> = verbs.iter().map(|v| v.words[v.words.len() - 1]).collect();
    match last.split_last() {
        Some((end, [])) => end.to_string(),
        Some((end, rest)) => format!("{} or {end}", rest.join(", ")),
        None => String::new(),
    }
}

/// Each command's usage line, and under it what it does.
fn listing<'a>(verbs: impl Iterator<Item = &'a Verb>) -> String {
    verbs
        .map(|v| format!("  {}\n{}", usage(v), wrap(v.about, ABOUT_INDENT)))
        .collect()
}

/// The options of `cmd` as rows of help; `serve`'s end with what only the environment
/// sets.
fn options_of(cmd: Cmd) -> String {
    let rows: Vec<(String, String)> = shown(cmd)
        .map(|o| {
            let from = o.var.map_or(String::new(), |var| format!("{var}; "));
            (
                flag_and_value(o),
                format!("{} [{from}default: {}]", o.help, o.default),
            )
        })
        .collect();
    let mut out = String::new();
    if cmd == Cmd::Serve {
        let env = [
            (TOKEN_VAR, TOKEN_HELP),
            (CONTROL_TOKEN_VAR, CONTROL_TOKEN_HELP),
        ];
        // The control token's variable only where `--test-control` is taken.
        let control = !config::control::REFUSED.contains(&"--test-control");
        let names: Vec<(String, String)> = env
            .iter()
            .filter(|(v, _)| control || *v != CONTROL_TOKEN_VAR)
            .map(|(v, h)| (v.to_string(), h.to_string()))
            .collect();
        // One column for both lists.
        let width = rows.iter().chain(&names).map(|r| r.0.chars().count()).max();
        out.push_str(&columns_at(&rows, width.unwrap_or(0)));
        out.push_str("\nEnvironment only:\n");
        out.push_str(&columns_at(&names, width.unwrap_or(0)));
        return out;
    }
    out.push_str(&columns(&rows));
    out
}

/// The options of `cmd` that this build takes, in the option table's order.
fn shown(cmd: Cmd) -> impl Iterator<Item = &'static Opt> {
    OPTIONS
        .iter()
        .filter(move |o| o.commands.contains(&cmd) && !refused(o.flag))
}

/// An option this build refuses (it lacks the feature that has it).
pub(super) fn refused(flag: &str) -> bool {
    config::webhook::REFUSED.contains(&flag) || config::control::REFUSED.contains(&flag)
}

fn flag_and_value(o: &Opt) -> String {
    match o.value {
        Some(v) => format!("{} {v}", o.flag),
        None => o.flag.to_owned(),
    }
}

/// Two columns: each name, and its text wrapped beside it, as wide as the longest name.
fn columns(rows: &[(String, String)]) -> String {
    columns_at(
        rows,
        rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0),
    )
}

/// Two columns, the first `width` wide (at least its longest name).
fn columns_at(rows: &[(String, String)], width: usize) -> String {
    let indent = 2 + width + 2;
    rows.iter()
        .map(|(name, text)| format!("  {name:<width$}  {}", &wrap(text, indent)[indent..]))
        .collect()
}

/// `text` in lines of at most `WIDTH` columns (a word longer than a line overflows), each
/// indented by `indent`, each ending in a newline.
fn wrap(text: &str, indent: usize) -> String {
    let room = WIDTH.saturating_sub(indent).max(MIN_TEXT);
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > room {
            out.push_str(&format!("{:indent$}{line}\n", ""));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&format!("{:indent$}{line}\n", ""));
    out
}

/// docs/reference.md's table of flags and variables: `serve`'s options from `OPTIONS`, as
/// Markdown, each row with an anchor (`#addr` for `--addr`; `#plant_store_token` for a
/// variable with no flag) that the other pages link to.
#[cfg(test)]
pub fn markdown() -> String {
    let mut out = String::from("| flag | environment | default | meaning |\n|---|---|---|---|\n");
    for opt in shown(Cmd::Serve) {
        let value = opt
            .value
            .map_or(String::new(), |v| format!(" {}", v.replace('|', "\\|")));
        out.push_str(&format!(
            "| <a id=\"{}\"></a>`{}{value}` | `{}` | {} | {} |\n",
            opt.flag.trim_start_matches('-'),
            opt.flag,
            opt.var.unwrap_or(""),
            opt.default,
            opt.help.replace('|', "\\|")
        ));
    }
    for (var, help) in [
        (TOKEN_VAR, TOKEN_HELP),
        (CONTROL_TOKEN_VAR, CONTROL_TOKEN_HELP),
    ] {
        let anchor = var.to_ascii_lowercase();
        out.push_str(&format!(
            "| <a id=\"{anchor}\"></a> | `{var}` | unset | {help} |\n"
        ));
    }
    out
}
