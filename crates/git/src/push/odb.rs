//! The local object store as the push reads it: the handle counting and
//! writing share ([`Db`]) and the one typed read of an object of a known
//! kind ([`find_kind`]). Both `pack` and `bitmap` read through here.

use gix::ObjectId;

use crate::local::ObjectStoreError;

/// The object store handle counting and writing use (a cache over the
/// repository's store; cloned for each thread).
pub(super) type Db = gix::odb::Cache<gix::odb::store::Handle<std::sync::Arc<gix::odb::Store>>>;

/// Object `id`, which must be a `kind`, with where it is stored.
pub(super) fn find_kind<'a>(
    db: &Db,
    id: &ObjectId,
    kind: gix::object::Kind,
    buf: &'a mut Vec<u8>,
) -> Result<(gix::objs::Data<'a>, Option<gix_pack::data::entry::Location>), ObjectStoreError> {
    use gix_pack::Find;
    let (data, location) = db
        .try_find(id, buf)
        .map_err(|e| ObjectStoreError::unreadable(format!("{kind} {id}"), &e))?
        .ok_or(ObjectStoreError::Missing {
            id: *id,
            kind: Some(kind),
        })?;
    if data.kind != kind {
        return Err(ObjectStoreError::WrongKind {
            id: *id,
            found: data.kind,
            expected: kind,
        });
    }
    Ok((data, location))
}
