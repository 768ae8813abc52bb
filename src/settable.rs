//! Product waits that the environment may shorten or lengthen (whole
//! seconds): an operator on a slow machine, or a test that would otherwise
//! sit out a production bound in full. Unset or unparseable: the default.

use std::time::Duration;

/// `env` in seconds, else `default`.
pub fn seconds(env: &str, default: Duration) -> Duration {
    parse(std::env::var(env).ok().as_deref()).unwrap_or(default)
}

fn parse(v: Option<&str>) -> Option<Duration> {
    v?.trim().parse::<u64>().ok().map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_seconds_or_nothing() {
        assert_eq!(parse(Some(" 15 ")), Some(Duration::from_secs(15)));
        assert_eq!(parse(Some("15s")), None);
        assert_eq!(parse(Some("-1")), None);
        assert_eq!(parse(None), None);
    }
}
