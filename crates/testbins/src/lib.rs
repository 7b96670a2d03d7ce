//! What the test programs of this package and the tests that spawn them
//! share. Nothing here is for use outside sluice-remote's tests.
#![forbid(unsafe_code)]

pub mod shuffle;
