//! UTC times as text, without a date crate: the one civil-date algorithm
//! behind backup names and the direct supervisor's log lines.

use std::time::{SystemTime, UNIX_EPOCH};

/// `2026-11-29T17-40-05Z`: a file-name-safe stamp, for backup names.
pub fn utc_stamp(t: SystemTime) -> String {
    format_utc(t, '-')
}

/// `2026-03-01T12:00:00Z`: RFC 3339, for log lines.
pub fn utc_timestamp(t: SystemTime) -> String {
    format_utc(t, ':')
}

fn format_utc(t: SystemTime, sep: char) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_date(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}{sep}{:02}{sep}{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01, counting in
/// 400-year eras that start on a March 1st (so leap days end each year;
/// Howard Hinnant's algorithm).
pub fn civil_date(days: i64) -> (i64, i64, i64) {
    const ERA_DAYS: i64 = 146_097;
    let since_0000_03_01 = days + 719_468;
    let era = since_0000_03_01.div_euclid(ERA_DAYS);
    let day_of_era = since_0000_03_01.rem_euclid(ERA_DAYS);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / (ERA_DAYS - 1)) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(11_016), (2000, 2, 29));
        assert_eq!(civil_date(11_017), (2000, 3, 1));
        assert_eq!(civil_date(-1), (1969, 12, 31));
        assert_eq!(civil_date(20_513), (2026, 3, 1));
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400 + 3_723);
        assert_eq!(utc_timestamp(t), "2000-02-29T01:02:03Z");
    }

    #[test]
    fn utc_stamp_formats_known_instants() {
        assert_eq!(utc_stamp(UNIX_EPOCH), "1970-01-01T00-00-00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_974_005);
        assert_eq!(utc_stamp(t), "2026-11-29T17-40-05Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(utc_stamp(leap), "2000-02-29T00-00-00Z");
    }
}
