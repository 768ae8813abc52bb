//! The CLI.
