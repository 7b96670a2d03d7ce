//! The SQLite ledger's schema: created in an empty database, brought from
//! schemas 1 to 4 to 5, and checked to be a sluice ledger of a version
//! this crate reads. Both the store (on opening) and the JSON import (into
//! its new database) use it; a reader ([`read_schema`]) only looks.

use rusqlite::Connection;

/// `PRAGMA application_id` of a ledger database ("sllg").
const APPLICATION_ID: i32 = 0x736c_6c67;

/// `PRAGMA user_version` of the schema this crate writes.
///
/// 1 had an index on `claimed_at`; 2 dropped it (a claim then writes one
/// page, not two); 3 added what ran (`kind`, `remote`, `refs` as a JSON
/// array), written at the claim; 4 added its `effect` (`read` or
/// `write`), so that a claim still running says whether it may have
/// written; 5 added what a claim records of its run (`deadline_ms`, from
/// the claim; `host`; `pid`) and the furthest `phase` it recorded, so that
/// a claim whose process died reads as abandoned once its deadline has
/// passed. An older file is brought to 5 when it is opened for writing
/// (the rows already there keep NULL: not known, and a row without a
/// deadline stays running); a reader reads it as it is (the columns it
/// lacks NULL).
pub(crate) const SCHEMA_VERSION: i32 = 5;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS claims (
    id TEXT PRIMARY KEY NOT NULL,
    claimed_at INTEGER NOT NULL,
    finished_at INTEGER,
    run TEXT,
    kind TEXT,
    remote TEXT,
    refs TEXT,
    effect TEXT,
    deadline_ms INTEGER,
    host TEXT,
    pid INTEGER,
    phase TEXT
) WITHOUT ROWID;
";

/// Schema 1 to 2.
const MIGRATE_1_TO_2: &str = "DROP INDEX IF EXISTS claims_claimed_at";

/// Schema 2 to 3: what ran, NULL in the rows already there.
const MIGRATE_2_TO_3: &str = "ALTER TABLE claims ADD COLUMN kind TEXT;
ALTER TABLE claims ADD COLUMN remote TEXT;
ALTER TABLE claims ADD COLUMN refs TEXT;";

/// Schema 3 to 4: the effect, NULL in the rows already there.
const MIGRATE_3_TO_4: &str = "ALTER TABLE claims ADD COLUMN effect TEXT;";

/// Schema 4 to 5: what a claim records of its run, NULL in the rows
/// already there.
const MIGRATE_4_TO_5: &str = "ALTER TABLE claims ADD COLUMN deadline_ms INTEGER;
ALTER TABLE claims ADD COLUMN host TEXT;
ALTER TABLE claims ADD COLUMN pid INTEGER;
ALTER TABLE claims ADD COLUMN phase TEXT;";

/// Check that the database is a ledger of a version this crate reads, and
/// create the schema in an empty one.
pub(crate) fn ensure_schema(
    conn: &Connection,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // The usual case reads two numbers and takes no write lock.
    if schema_state(conn)? == SchemaState::Current {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let made = (|| -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        match schema_state(conn)? {
            SchemaState::Current => return Ok(()),
            SchemaState::Older(v) => {
                if v < 2 {
                    conn.execute_batch(MIGRATE_1_TO_2)?;
                }
                if v < 3 {
                    conn.execute_batch(MIGRATE_2_TO_3)?;
                }
                if v < 4 {
                    conn.execute_batch(MIGRATE_3_TO_4)?;
                }
                conn.execute_batch(MIGRATE_4_TO_5)?;
            }
            SchemaState::Empty => {
                let objects: i64 =
                    conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))?;
                if objects > 0 {
                    return Err("a SQLite database but not a sluice ledger".into());
                }
                conn.execute_batch(SCHEMA)?;
            }
        }
        conn.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {SCHEMA_VERSION};"
        ))?;
        Ok(())
    })();
    match made {
        Ok(()) => conn.execute_batch("COMMIT").map_err(Into::into),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// Where a database's schema stands.
#[derive(Debug, PartialEq, Eq)]
enum SchemaState {
    /// Not a ledger yet (a new file, or not ours: the caller looks).
    Empty,
    /// A ledger of an older schema (1 to 4), brought to the current one on
    /// opening for writing.
    Older(i32),
    /// A ledger of this crate's schema.
    Current,
}

/// Where the schema stands; an error when the database belongs to something
/// else or to a newer version.
fn schema_state(
    conn: &Connection,
) -> Result<SchemaState, Box<dyn std::error::Error + Send + Sync>> {
    let app: i32 = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    let version: i32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    match app {
        APPLICATION_ID if version == SCHEMA_VERSION => Ok(SchemaState::Current),
        APPLICATION_ID if (1..SCHEMA_VERSION).contains(&version) => Ok(SchemaState::Older(version)),
        APPLICATION_ID if version > SCHEMA_VERSION => Err(format!(
            "written by a newer sluice (ledger schema {version}; this one reads {SCHEMA_VERSION})"
        )
        .into()),
        APPLICATION_ID => Err(format!("unknown ledger schema {version}").into()),
        0 => Ok(SchemaState::Empty),
        _ => Err("a SQLite database but not a sluice ledger".into()),
    }
}

/// What a reader finds: the schema version of a ledger it may read as it
/// is (`0`: an empty database, no ledger in it yet), or an error when the
/// database is not a ledger or is of a newer version. Nothing is written.
pub(crate) fn read_schema(
    conn: &Connection,
) -> Result<i32, Box<dyn std::error::Error + Send + Sync>> {
    match schema_state(conn)? {
        SchemaState::Current => Ok(SCHEMA_VERSION),
        SchemaState::Older(v) => Ok(v),
        SchemaState::Empty => {
            let objects: i64 =
                conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))?;
            if objects > 0 {
                return Err("a SQLite database but not a sluice ledger".into());
            }
            Ok(0)
        }
    }
}
