//! One error type for every stage: a message with context, meant for a human.

use std::fmt;

/// A generator failure. The generator fails loudly: any schema shape it does
/// not understand is an error, never silently skipped.
#[derive(Debug)]
pub struct Error(String);

impl Error {
    /// An error with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Error(message.into())
    }

    /// The same error, prefixed with where it happened.
    pub fn context(self, context: impl fmt::Display) -> Self {
        Error(format!("{context}: {}", self.0))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error(e.to_string())
    }
}

/// `Result` with the generator's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Returns early with a formatted [`Error`].
#[macro_export]
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::error::Error::new(format!($($arg)*)))
    };
}
