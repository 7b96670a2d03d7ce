//! The ledger stores' integration tests in one binary (one link instead of
//! one per file), each file a module built with its store's feature.

#[cfg(all(feature = "sqlite", feature = "postgres"))]
mod abandoned;
#[cfg(feature = "sqlite")]
mod ledger;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
mod postgres_fleet;
