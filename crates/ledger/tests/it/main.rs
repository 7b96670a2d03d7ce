//! The ledger stores' integration tests in one binary (one link instead of
//! one per file), each file a module built with its store's feature.

#[cfg(feature = "sqlite")]
mod ledger;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
mod postgres_fleet;
