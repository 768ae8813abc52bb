//! The simulator's one error type: a message for a person and the exit code
//! the process ends with.

use std::fmt;

#[derive(Debug)]
pub struct SimError {
    pub message: String,
    pub code: u8,
}

pub type Result<T> = std::result::Result<T, SimError>;

impl SimError {
    pub fn new(message: impl Into<String>) -> SimError {
        SimError {
            message: message.into(),
            code: 1,
        }
    }

    pub fn with_code(mut self, code: u8) -> SimError {
        self.code = code;
        self
    }

    /// Prefixes the message with what was being done.
    pub fn context(self, what: impl fmt::Display) -> SimError {
        SimError {
            message: format!("{what}: {}", self.message),
            code: self.code,
        }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SimError {}

impl From<std::io::Error> for SimError {
    fn from(e: std::io::Error) -> SimError {
        SimError::new(e.to_string())
    }
}

impl From<serde_json::Error> for SimError {
    fn from(e: serde_json::Error) -> SimError {
        SimError::new(e.to_string())
    }
}

impl From<serde_yaml::Error> for SimError {
    fn from(e: serde_yaml::Error) -> SimError {
        SimError::new(e.to_string())
    }
}

impl From<nix::Error> for SimError {
    fn from(e: nix::Error) -> SimError {
        SimError::new(e.to_string())
    }
}

/// `return Err(SimError::new(format!(...)))` in one line.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::sim::error::SimError::new(format!($($arg)*)))
    };
}
pub(crate) use bail;

/// Adds context to any error on its way up.
pub trait Context<T> {
    fn ctx(self, what: impl fmt::Display) -> Result<T>;
}

impl<T, E: Into<SimError>> Context<T> for std::result::Result<T, E> {
    fn ctx(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| e.into().context(what))
    }
}
