//! Reading a PostgreSQL connection URL as libpq reads it: the TLS keys the
//! driver's parser does not know are taken out first, the password is
//! filled in from `PGPASSWORD` or `.pgpass`, and the database is named for
//! messages without its password.

use std::io;
use std::path::PathBuf;
use std::str::FromStr;

use sluice_policy::LedgerError;
use tokio_postgres::config::Host;

use super::tls::{SslMode, TlsParams};
use super::{is_postgres_url, DEFAULT_CONNECT_TIMEOUT};

/// What a URL says: the driver's configuration, the TLS figures, and the
/// database as it may be printed.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub config: tokio_postgres::Config,
    pub tls: TlsParams,
    pub shown: String,
}

/// The keys read here, not by the driver's parser.
const TLS_KEYS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// The connection figures from a URL (or the `key=value` form), with the
/// password filled in from `PGPASSWORD` or `.pgpass` when the URL has none,
/// and the TLS figures from the URL, else `PGSSLMODE`, `PGSSLROOTCERT`,
/// `PGSSLCERT`, `PGSSLKEY`, as libpq reads them.
pub(crate) fn parse_url(url: &str) -> Result<Parsed, LedgerError> {
    let refuse = |shown: &str, msg: String| LedgerError {
        path: shown.to_string(),
        source: io::Error::new(io::ErrorKind::InvalidInput, msg),
    };
    let (rest, taken) = take_tls_keys(url);
    let mut config = tokio_postgres::Config::from_str(&rest).map_err(|e| {
        // The parser's words never hold the password; the URL might.
        refuse(
            &redact_unparsed(url),
            format!("not a PostgreSQL connection URL: {e}"),
        )
    })?;
    if config.get_user().is_none() {
        if let Some(u) = std::env::var("PGUSER")
            .ok()
            .or_else(|| std::env::var("USER").ok())
        {
            config.user(&u);
        }
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("sluice-remote");
    }
    let shown = shown(&config);
    let given = |key: &str, env: &str| -> Option<String> {
        taken
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(env).ok().filter(|v| !v.is_empty()))
    };
    let mode = match given("sslmode", "PGSSLMODE") {
        None => None,
        Some(v) => Some(SslMode::parse(&v).ok_or_else(|| {
            refuse(
                &shown,
                format!(
                    "sslmode={v}: not one of disable, allow, prefer, require, verify-ca, \
                     verify-full"
                ),
            )
        })?),
    };
    let tls = TlsParams {
        mode,
        root_cert: given("sslrootcert", "PGSSLROOTCERT"),
        cert: given("sslcert", "PGSSLCERT").map(PathBuf::from),
        key: given("sslkey", "PGSSLKEY").map(PathBuf::from),
    };
    config.ssl_mode(tls.mode.unwrap_or(SslMode::Prefer).driver());
    if config.get_password().is_none() {
        if let Some(pw) = std::env::var_os("PGPASSWORD") {
            config.password(pw.to_string_lossy().as_bytes());
        } else if let Some(pw) = pgpass_password(&config) {
            config.password(pw.as_bytes());
        }
    }
    Ok(Parsed { config, tls, shown })
}

/// `url` without the [`TLS_KEYS`], and their values (decoded) in order.
fn take_tls_keys(url: &str) -> (String, Vec<(String, String)>) {
    if is_postgres_url(url) {
        take_from_query(url)
    } else {
        take_from_pairs(url)
    }
}

/// The URL form: `postgres://…?k=v&k=v`, values percent-encoded.
fn take_from_query(url: &str) -> (String, Vec<(String, String)>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), Vec::new());
    };
    let mut taken = Vec::new();
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decode(k);
        if TLS_KEYS.contains(&key.as_str()) {
            taken.push((key, percent_decode(v)));
        } else {
            kept.push(pair);
        }
    }
    let rest = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (rest, taken)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).expect("checked") * 16 + hex(l).expect("checked")) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `key=value` form: pairs separated by spaces, a value quoted in `'…'`
/// (with `\'` and `\\`) when it holds spaces. The pairs kept are copied as
/// written.
fn take_from_pairs(text: &str) -> (String, Vec<(String, String)>) {
    let mut taken = Vec::new();
    let mut kept = String::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i >= chars.len() {
            break;
        }
        let start = i;
        let mut key = String::new();
        while i < chars.len() && chars[i] != '=' && !chars[i].is_whitespace() {
            key.push(chars[i]);
            i += 1;
        }
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i < chars.len() && chars[i] == '=' {
            i += 1;
        }
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        let mut value = String::new();
        if i < chars.len() && chars[i] == '\'' {
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    i += 1;
                }
                value.push(chars[i]);
                i += 1;
            }
            i += 1;
        } else {
            while i < chars.len() && !chars[i].is_whitespace() {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    i += 1;
                }
                value.push(chars[i]);
                i += 1;
            }
        }
        if TLS_KEYS.contains(&key.as_str()) {
            taken.push((key, value));
        } else {
            if !kept.is_empty() {
                kept.push(' ');
            }
            kept.extend(&chars[start..i.min(chars.len())]);
        }
    }
    (kept, taken)
}

/// `postgres://host:port/db` for errors and logs: no user info (neither
/// the password nor the user name, as the issue asks of every message).
fn shown(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("");
    // libpq's default database is the user's name: shown as a database.
    let db = config.get_dbname().unwrap_or(user);
    format!("postgres://{host}:{port}/{db}")
}

/// A URL that could not be parsed, printed without its user info (as
/// [`sluice_policy::text::redact`] removes it) and without its query (a
/// `password=` may be there); the `key=value` form, of which nothing can be
/// told apart safely, not at all.
fn redact_unparsed(url: &str) -> String {
    if !is_postgres_url(url) {
        return "(a PostgreSQL connection string)".into();
    }
    let no_query = url.split('?').next().unwrap_or(url);
    sluice_policy::text::redact(no_query)
}

/// The password of the first matching line of the `.pgpass` file, as libpq
/// reads it: `host:port:database:user:password`, `*` for any, `\:` and `\\`
/// escaped; ignored unless the file is readable by its owner alone.
fn pgpass_password(config: &tokio_postgres::Config) -> Option<String> {
    let path = std::env::var_os("PGPASSFILE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pgpass")))?;
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(&path).ok()?;
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(file = %path.display(), "the password file is readable by others: ignored (chmod 0600 it)");
            return None;
        }
    }
    let text = std::fs::read_to_string(&path).ok()?;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(_)) | None => "localhost".into(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or("").to_string();
    let db = config
        .get_dbname()
        .map_or_else(|| user.clone(), str::to_string);
    let wanted = [host, port, db, user];
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .find_map(|line| {
            let fields = split_pgpass(line);
            if fields.len() != 5 {
                return None;
            }
            let matches = fields[..4]
                .iter()
                .zip(&wanted)
                .all(|(f, w)| f == "*" || f == w);
            matches.then(|| fields[4].clone())
        })
}

fn split_pgpass(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    fields.last_mut().expect("one field at least").push(n);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut().expect("one field at least").push(c),
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_url_is_shown_without_its_user_info() {
        let p = parse_url("postgres://ops:s3cret@db.example:6543/ledger?connect_timeout=3")
            .expect("parsed");
        assert_eq!(p.shown, "postgres://db.example:6543/ledger");
        assert_eq!(p.config.get_password(), Some(&b"s3cret"[..]));
        assert_eq!(
            p.config.get_connect_timeout(),
            Some(&Duration::from_secs(3))
        );
    }

    #[test]
    fn the_tls_keys_the_driver_refuses_are_read_before_it() {
        let p = parse_url(
            "postgres://ops:s3cret@db.example/ledger?sslmode=verify-full\
             &sslrootcert=%2Fetc%2Fca%20file.pem&connect_timeout=3&sslcert=c.pem&sslkey=k.pem",
        )
        .expect("parsed");
        assert_eq!(p.tls.mode, Some(SslMode::VerifyFull));
        assert_eq!(p.tls.root_cert.as_deref(), Some("/etc/ca file.pem"));
        assert_eq!(p.tls.cert, Some(PathBuf::from("c.pem")));
        assert_eq!(p.tls.key, Some(PathBuf::from("k.pem")));
        assert_eq!(
            p.config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Require
        );
        assert_eq!(
            p.config.get_connect_timeout(),
            Some(&Duration::from_secs(3))
        );
    }

    #[test]
    fn the_key_value_form_gives_its_tls_keys_too() {
        let p = parse_url(
            "host=db.example user=ops sslmode=verify-ca sslrootcert='/a b/ca.pem' dbname=ledger",
        )
        .expect("parsed");
        assert_eq!(p.tls.mode, Some(SslMode::VerifyCa));
        assert_eq!(p.tls.root_cert.as_deref(), Some("/a b/ca.pem"));
        assert_eq!(p.shown, "postgres://db.example:5432/ledger");
    }

    #[test]
    fn an_unknown_sslmode_is_refused_naming_the_values_without_the_password() {
        let e = parse_url("postgres://ops:s3cret@db.example/ledger?sslmode=sometimes")
            .expect_err("refused");
        let text = format!("{e}");
        assert!(text.contains("sslmode=sometimes"), "{text}");
        assert!(text.contains("verify-full"), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
    }

    #[test]
    fn a_bad_url_is_refused_without_its_user_info() {
        let e = parse_url("postgres://ops:s3cret@db.example:notaport/x").expect_err("refused");
        let text = format!("{e}");
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("db.example"), "{text}");
        let e = parse_url("host=db.example password=s3cret port=notaport").expect_err("refused");
        assert!(!format!("{e}").contains("s3cret"), "{e}");
    }

    #[test]
    fn pgpass_lines_split_on_unescaped_colons() {
        assert_eq!(
            split_pgpass(r"h:5432:*:u:pa\:ss\\w:rd"),
            vec!["h", "5432", "*", "u", r"pa:ss\w:rd"]
        );
    }
}
