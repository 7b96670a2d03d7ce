//! Every local failure of the forge is built here: a typed [`LocalCause`]
//! wrapped as [`ForgeFailure::Local`] (its source kept), so a caller tells
//! the causes apart by type and the words stay the cause's own.

use std::sync::Arc;

use crate::error::{ForgeFailure, LocalCause};

/// The failure of a request this side could not make, for `cause`.
pub(crate) fn failure(cause: LocalCause) -> ForgeFailure {
    ForgeFailure::Local {
        cause: Arc::new(cause),
    }
}
