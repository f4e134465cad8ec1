//! `utter audit [--since WHEN]`: the running service's recent policy decisions
//! (`runner.audit`), oldest first, one line each: local time, decision (allowed, denied,
//! confirmed, reasked, chosen, executed, failed, dry-run), op, exact arguments, provenance,
//! and the error code, the deciding door or chooser and the plugin concerned where there is
//! one; `--json` prints the entries (times in Unix seconds). Exit 0 when the service
//! answered, 2 for a `--since` it cannot read.

use utter_ipc::AuditEntry;

use super::connect::{Service, call_failed};
use super::output::{exit, out, print_answer, sanitize};

/// The arguments of `utter audit`.
#[derive(clap::Args)]
pub struct Args {
    /// Only decisions at or after WHEN: a time back from now (`10m`, `2h`, `1d`, `90s`,
    /// `1h 30m`), a local date and time (`2026-12-01T10:00`, `2026-12-01 10:00:30`), a local
    /// date (`2026-12-01`, from its midnight), or Unix seconds (`1764583200`).
    #[arg(long, value_name = "WHEN", value_parser = parse_since)]
    since: Option<u64>,
    /// Print JSON: [{time, utterance, op, args, provenance, decision, code?, by?, plugin?}].
    #[arg(long)]
    json: bool,
}

/// `--since` as Unix seconds (see [`Args`]); the error says which forms are read.
fn parse_since(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(seconds);
    }
    let tz = jiff::tz::TimeZone::system();
    let at = if let Ok(span) = text.parse::<jiff::Span>() {
        jiff::Timestamp::now()
            .to_zoned(tz)
            .checked_sub(span)
            .map_err(|e| format!("{text:?} reaches too far back: {e}"))?
            .timestamp()
    } else if let Ok(civil) = text.replacen(' ', "T", 1).parse::<jiff::civil::DateTime>() {
        civil
            .to_zoned(tz)
            .map_err(|e| format!("{text:?} is not a time here: {e}"))?
            .timestamp()
    } else if let Ok(date) = text.parse::<jiff::civil::Date>() {
        date.to_zoned(tz)
            .map_err(|e| format!("{text:?} is not a date here: {e}"))?
            .timestamp()
    } else {
        return Err(format!(
            "cannot read {text:?} as a time: give a time back from now (10m, 2h, 1d), a local date and time (2026-12-01T10:00), a date (2026-12-01) or Unix seconds"
        ));
    };
    Ok(u64::try_from(at.as_second()).unwrap_or(0))
}

/// Run `utter audit`.
pub async fn run(args: &Args, service: Service<'_>) -> u8 {
    let client = match service.with_json(args.json).connect("audit").await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let entries = match client.audit(args.since).await {
        Ok(entries) => entries,
        Err(e) => return call_failed("audit", &e),
    };
    if args.json {
        print_answer(&entries);
        return exit::OK;
    }
    if entries.is_empty() {
        out!(
            "no decisions recorded{}",
            if args.since.is_some() {
                " in that time"
            } else {
                " yet"
            }
        );
    }
    let tz = jiff::tz::TimeZone::system();
    if entries.len() >= utter_core::audit::AUDIT_CAPACITY {
        // The runner keeps a ring of the last decisions: older ones are gone, and a burst of
        // requests can push out what came before it.
        out!(
            "(the runner keeps only its last {} decisions: older ones, from before {}, were dropped)",
            utter_core::audit::AUDIT_CAPACITY,
            entries
                .first()
                .map(|e| local_time(e.time, &tz))
                .unwrap_or_default()
        );
    }
    for e in &entries {
        out!("{}", describe(e, &tz));
    }
    exit::OK
}

/// A Unix time as the local `YYYY-MM-DD HH:MM:SS`.
pub(super) fn local_time(seconds: u64, tz: &jiff::tz::TimeZone) -> String {
    i64::try_from(seconds)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .map(|t| {
            t.to_zoned(tz.clone())
                .strftime("%Y-%m-%d %H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|| seconds.to_string())
}

/// `TIME DECISION OP ARGS [PROVENANCE] code=… by=… plugin=…`.
fn describe(e: &AuditEntry, tz: &jiff::tz::TimeZone) -> String {
    let extra: String = [
        ("code", e.code.map(|c| c.to_string())),
        ("by", e.by.clone()),
        ("plugin", e.plugin.clone()),
    ]
    .into_iter()
    .filter_map(|(key, value)| value.map(|v| format!(" {key}={v}")))
    .collect();
    format!(
        "{} {:<9} {} {} [{}]{extra}",
        local_time(e.time, tz),
        e.decision,
        sanitize(&e.op),
        sanitize(&e.args.to_string()),
        e.provenance
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_reads_spans_local_times_dates_and_unix_seconds() {
        let now = jiff::Timestamp::now().as_second() as u64;
        let ten_minutes = parse_since("10m").unwrap();
        assert!((now - 600).abs_diff(ten_minutes) <= 2, "{ten_minutes}");
        let day = parse_since("1d").unwrap();
        assert!((now - 86_400).abs_diff(day) <= 3_601, "{day}");
        assert!(parse_since("1h 30m").is_ok());
        assert_eq!(parse_since("1764583200"), Ok(1_764_583_200));
        let tz = jiff::tz::TimeZone::system();
        let local = parse_since("2026-12-01T10:00").unwrap();
        assert_eq!(local_time(local, &tz), "2026-12-01 10:00:00");
        assert_eq!(
            parse_since("2026-12-01 10:00"),
            Ok(local),
            "a space for the T"
        );
        assert_eq!(
            local_time(parse_since("2026-12-01").unwrap(), &tz),
            "2026-12-01 00:00:00"
        );
        for bad in ["banana", "", "-5", "10 parsecs"] {
            let e = parse_since(bad).expect_err(bad);
            assert!(e.contains("10m") && e.contains("Unix seconds"), "{e}");
        }
    }
}
