//! The SQLite ledger's schema: created in an empty database, brought from
//! schema 1 to 2, and checked to be a sluice ledger of a version this crate
//! reads. Both the store (on opening) and the JSON import (into its new
//! database) use it.

use rusqlite::Connection;

/// `PRAGMA application_id` of a ledger database ("sllg").
const APPLICATION_ID: i32 = 0x736c_6c67;

/// `PRAGMA user_version` of the schema this crate writes.
///
/// 1 had an index on `claimed_at`; 2 dropped it (a claim then writes one
/// page, not two). A schema-1 file is brought to 2 when it is opened.
const SCHEMA_VERSION: i32 = 2;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS claims (
    id TEXT PRIMARY KEY NOT NULL,
    claimed_at INTEGER NOT NULL,
    finished_at INTEGER,
    run TEXT
) WITHOUT ROWID;
";

/// Schema 1 to 2.
const MIGRATE_1_TO_2: &str = "DROP INDEX IF EXISTS claims_claimed_at";

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
            SchemaState::Version1 => conn.execute_batch(MIGRATE_1_TO_2)?,
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
    /// A ledger of schema 1, brought to the current one on opening.
    Version1,
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
        APPLICATION_ID if version == 1 => Ok(SchemaState::Version1),
        APPLICATION_ID if version > SCHEMA_VERSION => Err(format!(
            "written by a newer sluice (ledger schema {version}; this one reads {SCHEMA_VERSION})"
        )
        .into()),
        APPLICATION_ID => Err(format!("unknown ledger schema {version}").into()),
        0 => Ok(SchemaState::Empty),
        _ => Err("a SQLite database but not a sluice ledger".into()),
    }
}
