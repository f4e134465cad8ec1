//! The system volume: the default audio sink of PipeWire, through WirePlumber's `wpctl`
//! (`get-volume`, `set-volume`, `set-mute` on `@DEFAULT_AUDIO_SINK@`). What "volume up",
//! "mute" and "unmute" mean when no player is named: the sound of the whole desktop, not
//! one player's own volume slider.
//!
//! Every change is read back (`wpctl get-volume`), so the result says whether the sink took
//! it (`verified`). Up and down move by [`STEP`] and never above 100%.

use crate::plugin_error;
use serde_json::{Value, json};
use std::time::Duration;
use utter_protocol::ErrorObject;

/// One step of "volume up" and "volume down", as a fraction of full volume.
pub const STEP: f64 = 0.05;
/// The sink `wpctl` acts on.
const SINK: &str = "@DEFAULT_AUDIO_SINK@";
/// The longest one `wpctl` call may take.
const WPCTL_WAIT: Duration = Duration::from_secs(5);
/// The most of `wpctl`'s output read (its answers are one short line).
const WPCTL_OUTPUT: u64 = 64 * 1024;
/// The highest level read as one (10 times full volume).
const MAX_LEVEL: f64 = 10.0;

/// What `wpctl get-volume` said: `Volume: 0.40 [MUTED]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    /// The volume, 0.0 to 1.0 (or above, when something raised it past 100%).
    pub volume: f64,
    /// Whether the sink is muted.
    pub muted: bool,
}

/// Read `wpctl get-volume`'s answer (`Volume: 0.40`, `Volume: 0.40 [MUTED]`).
pub fn parse_level(text: &str) -> Option<Level> {
    let rest = text.trim().strip_prefix("Volume:")?.trim();
    let mut words = rest.split_whitespace();
    let volume: f64 = words.next()?.parse().ok()?;
    // PipeWire's volumes go to a few times full at most; anything else is not a level.
    if !volume.is_finite() || !(0.0..=MAX_LEVEL).contains(&volume) {
        return None;
    }
    Some(Level {
        volume,
        muted: words.any(|w| w == "[MUTED]"),
    })
}

/// Run `wpctl ARGS`; its standard output, or why it failed in words.
async fn wpctl(args: &[&str]) -> Result<String, String> {
    let Some(program) = crate::spawn::find_program("wpctl", None) else {
        return Err(
            "wpctl is not installed (Debian: apt install wireplumber), so the system volume cannot be set"
                .into(),
        );
    };
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("wpctl could not run: {e}"))?;
    // Read at most WPCTL_OUTPUT of each stream: a wpctl that never stops writing is cut off
    // by the wait below, not held in memory.
    let mut stdout = child
        .stdout
        .take()
        .map(|s| tokio::io::AsyncReadExt::take(s, WPCTL_OUTPUT));
    let mut stderr = child
        .stderr
        .take()
        .map(|s| tokio::io::AsyncReadExt::take(s, WPCTL_OUTPUT));
    let run = async {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        if let Some(s) = stdout.as_mut() {
            let _ = tokio::io::AsyncReadExt::read_to_end(s, &mut out).await;
        }
        if let Some(s) = stderr.as_mut() {
            let _ = tokio::io::AsyncReadExt::read_to_end(s, &mut err).await;
        }
        let status = child.wait().await;
        (status, out, err)
    };
    let (status, out, err) = tokio::time::timeout(WPCTL_WAIT, run)
        .await
        .map_err(|_| format!("wpctl {} did not answer within 5 s", args.join(" ")))?;
    let status = status.map_err(|e| format!("wpctl could not run: {e}"))?;
    if !status.success() {
        let said = String::from_utf8_lossy(&err);
        return Err(format!(
            "wpctl {} failed ({}): {}; is PipeWire with WirePlumber running, with an audio output?",
            args.join(" "),
            crate::spawn::describe_status(status),
            utter_protocol::text::clip(said.trim(), 300)
        ));
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The default sink's level now.
///
/// # Errors
/// Why it could not be read (no wpctl, no PipeWire, no sink), in words.
pub async fn level() -> Result<Level, String> {
    let said = wpctl(&["get-volume", SINK]).await?;
    parse_level(&said).ok_or_else(|| {
        format!(
            "wpctl get-volume answered {:?}, which is no volume",
            utter_protocol::text::clip(said.trim(), 120)
        )
    })
}

/// A change of the system volume (what the media commands `volume_up`, `volume_down`,
/// `mute` and `unmute` do when no player is named).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    /// Up a step.
    Up,
    /// Down a step.
    Down,
    /// Muted.
    Mute,
    /// Unmuted.
    Unmute,
    /// To a level, 0.0 to [`MAX_SET`] (full is 1.0), and muted or not when given (what an
    /// undo of one of the others sends back).
    Set {
        /// The level.
        volume: f64,
        /// Muted or not; `None` leaves it.
        muted: Option<bool>,
    },
}

/// The highest level `set_volume` sets (wpctl allows more; a person's ears do not).
pub const MAX_SET: f64 = 1.5;

/// Change the system volume by `change` and read it back.
///
/// Result: `{ok, dry_run, target: "system", sink: "@DEFAULT_AUDIO_SINK@", volume_before,
/// volume_after, muted_before, muted_after, verified, detail}`.
///
/// # Errors
/// `-32000` when the level cannot be read or set (with the reason and what to install).
pub async fn run(change: Change, dry_run: bool) -> Result<Value, ErrorObject> {
    let before = level().await.map_err(plugin_error)?;
    let percent = |v: f64| (v * 100.0).round();
    // The wpctl arguments, the level wanted, and what is done in words (to do, done).
    let (args, wanted, to_do, done): (Vec<String>, Level, String, String) = match change {
        Change::Set { volume, muted } => {
            if !(0.0..=MAX_SET).contains(&volume) {
                return Err(ErrorObject::invalid_params(format!(
                    "set_volume: the level must be from 0 to {MAX_SET} (1 is full), not {volume}"
                )));
            }
            let wanted = Level {
                volume: (volume * 100.0).round() / 100.0,
                muted: muted.unwrap_or(before.muted),
            };
            let args = vec![
                "set-volume".to_owned(),
                SINK.to_owned(),
                format!("{:.2}", wanted.volume),
            ];
            let change = format!(
                "the system volume from {:.0}%{} to {:.0}%{}",
                percent(before.volume),
                if before.muted { " (muted)" } else { "" },
                percent(wanted.volume),
                if wanted.muted { " (muted)" } else { "" }
            );
            (
                args,
                wanted,
                format!("set {change}"),
                format!("set {change}"),
            )
        }
        Change::Up | Change::Down => {
            let up = change == Change::Up;
            if up && before.volume >= 1.0 {
                return Err(plugin_error(format!(
                    "the system volume is at {:.0}%, full or more already, so it was not raised (wpctl would set it back to 100%)",
                    percent(before.volume)
                )));
            }
            let volume = if up {
                (before.volume + STEP).min(1.0_f64.max(before.volume))
            } else {
                (before.volume - STEP).max(0.0)
            };
            let mut args = vec!["set-volume".to_owned()];
            if up {
                args.extend(["-l".to_owned(), "1.0".to_owned()]);
            }
            args.push(SINK.to_owned());
            args.push(format!("{}%{}", percent(STEP), if up { '+' } else { '-' }));
            let change = format!(
                "the system volume from {:.0}% to {:.0}%",
                percent(before.volume),
                percent(volume)
            );
            let (to_do, done) = if up {
                (format!("raise {change}"), format!("raised {change}"))
            } else {
                (format!("lower {change}"), format!("lowered {change}"))
            };
            let wanted = Level {
                volume,
                muted: before.muted,
            };
            (args, wanted, to_do, done)
        }
        Change::Mute | Change::Unmute => {
            let mute = change == Change::Mute;
            let args = vec![
                "set-mute".to_owned(),
                SINK.to_owned(),
                if mute { "1" } else { "0" }.to_owned(),
            ];
            let (to_do, done) = if mute {
                ("mute the system sound", "muted the system sound")
            } else {
                ("unmute the system sound", "unmuted the system sound")
            };
            let wanted = Level {
                muted: mute,
                ..before
            };
            (args, wanted, to_do.to_owned(), done.to_owned())
        }
    };
    let mut result = json!({
        "ok": true,
        "dry_run": dry_run,
        "target": "system",
        "sink": SINK,
        "volume_before": before.volume,
        "muted_before": before.muted,
    });
    if dry_run {
        result["detail"] = json!(format!(
            "would {to_do} (the default audio sink, with wpctl)"
        ));
        return Ok(result);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    wpctl(&args).await.map_err(plugin_error)?;
    if let Change::Set {
        muted: Some(muted), ..
    } = change
        && muted != before.muted
    {
        wpctl(&["set-mute", SINK, if muted { "1" } else { "0" }])
            .await
            .map_err(plugin_error)?;
    }
    let after = level().await.ok();
    let verified =
        after.is_some_and(|a| a.muted == wanted.muted && (a.volume - wanted.volume).abs() < 0.011);
    result["volume_after"] = json!(after.map(|a| a.volume));
    result["muted_after"] = json!(after.map(|a| a.muted));
    result["verified"] = json!(verified);
    // A change the sink did not take is a failure, not a success "not verified".
    match after {
        Some(_) if verified => {
            result["detail"] = json!(format!("{done}; read back from the default audio sink"));
            Ok(result)
        }
        Some(a) => Err(plugin_error(format!(
            "wpctl was asked to {to_do}, but the default audio sink reads {:.0}%{}: the change did not take",
            percent(a.volume),
            if a.muted { ", muted" } else { "" }
        ))),
        None => Err(plugin_error(format!(
            "wpctl was asked to {to_do}, but the level could not be read back, so whether it did is not known"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wpctl_levels_are_read_and_anything_else_is_not() {
        assert_eq!(parse_level("Volume: 1e308\n"), None, "no level");
        assert_eq!(parse_level("Volume: inf\n"), None);
        assert_eq!(
            parse_level("Volume: 0.40\n"),
            Some(Level {
                volume: 0.40,
                muted: false
            })
        );
        assert_eq!(
            parse_level("Volume: 1.00 [MUTED]"),
            Some(Level {
                volume: 1.0,
                muted: true
            })
        );
        for bad in [
            "",
            "Volume:",
            "Volume: loud",
            "Volume: -1",
            "Volume: NaN",
            "0.4",
        ] {
            assert_eq!(parse_level(bad), None, "{bad:?}");
        }
    }
}
