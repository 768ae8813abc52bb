//! A Nagios check's answer (level and one line): shared by the checks
//! (checks.rs) and the certificate expiry judge (expiry.rs), below both.

/// Nagios' exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Ok = 0,
    Warning = 1,
    Critical = 2,
    Unknown = 3,
}

/// What a check found: its level and one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub level: Level,
    pub message: String,
}
