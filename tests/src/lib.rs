//! Shared support for the integration tests (simulator launcher, test CA).
