//! Screenshots on sway and Hyprland, which have no screenshot action of their own: niri's
//! `screenshot`, `screenshot-screen` and `screenshot-window` done with `grim`
//! (wlr-screencopy, which both serve), saved where niri saves them by default
//! (`~/Pictures/Screenshots/Screenshot from YYYY-MM-DD HH-MM-SS.png`), and checked: the
//! result is `verified` once the file is there and is a PNG.
//!
//! `screenshot` (niri's interactive picker) and `screenshot-screen` take the focused output;
//! `screenshot-window` the focused window's content rectangle.
//!
//! Where grim cannot work (no compositor IPC, as on GNOME and KDE Plasma; grim not
//! installed), the whole screen is asked of the xdg-desktop-portal instead
//! ([`take_with_portal`]: `org.freedesktop.portal.Screenshot`, not interactive; the portal
//! may ask the person once whether Utter may take screenshots, and saves the file itself).
//! The result's `tool` says which was used. The portal has no way to take one window without
//! asking the person to pick it, so `screenshot-window` is refused there with that reason.

use crate::model::Snapshot;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use utter_protocol::{ErrorCode, ErrorObject};

/// The longest `grim` may take.
const GRIM_WAIT: Duration = Duration::from_secs(15);

/// The file a screenshot taken now goes to, under `home`.
pub fn target_path(home: &Path, now: &str) -> PathBuf {
    home.join("Pictures/Screenshots")
        .join(format!("Screenshot from {now}.png"))
}

/// What `grim` is told to capture for `action`, from `snapshot`: `-o OUTPUT` or
/// `-g "X,Y WxH"`.
///
/// # Errors
/// Why nothing can be captured (no focused output or window, no geometry), in words.
pub fn grim_target(action: &str, snapshot: &Snapshot) -> Result<Vec<String>, String> {
    if action == "screenshot-window" {
        let window = snapshot
            .focused
            .as_ref()
            .ok_or("no window is focused, so there is no window to take")?;
        let rect = window.rect.ok_or_else(|| {
            format!(
                "{} gives no geometry for the focused window",
                snapshot.compositor.name
            )
        })?;
        return Ok(vec![
            "-g".into(),
            format!("{},{} {}x{}", rect.x, rect.y, rect.width, rect.height),
        ]);
    }
    let output = snapshot
        .outputs
        .iter()
        .find(|o| o.focused)
        .or_else(|| snapshot.outputs.first())
        .ok_or_else(|| format!("{} reports no output to take", snapshot.compositor.name))?;
    Ok(vec!["-o".into(), output.name.clone()])
}

/// Whether `bytes` start like a PNG file.
fn is_png(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x89PNG\r\n\x1a\n")
}

/// Whether `path` is a file (not a link) that starts like a PNG. Only the header is read: a
/// screenshot is megabytes.
fn is_png_file(path: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 8];
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
        && std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut head))
            .is_ok()
        && is_png(&head)
}

fn failed(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::PluginError, message)
}

/// Take `action`'s screenshot with grim (see the module docs); `snapshot` is the
/// compositor's current one (its name goes into the result and messages).
///
/// Result: `{ok, dry_run, command, compositor: "sway" | "hyprland", tool: "grim", grim_args,
/// path, verified, detail}`.
///
/// # Errors
/// `-32000` when grim is missing, nothing can be captured, grim fails, or no home directory
/// is known.
pub async fn take(action: &str, snapshot: &Snapshot, dry_run: bool) -> Result<Value, ErrorObject> {
    let Some(grim) = utter_desktop::spawn::find_program("grim", None) else {
        return take_with_portal(action, &snapshot.compositor.name, dry_run)
            .await
            .map_err(|e| {
                failed(format!(
                    "{} has no screenshot action and grim is not installed (Debian: apt install \
                     grim); {}",
                    snapshot.compositor.name, e.message
                ))
            });
    };
    let target = grim_target(action, snapshot).map_err(|why| failed(format!("{action}: {why}")))?;
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .ok_or_else(|| failed("HOME is not set, so there is no Pictures folder to save into"))?;
    let now = jiff::Zoned::now().strftime("%Y-%m-%d %H-%M-%S").to_string();
    let mut path = target_path(&home, &now);
    // Two in one second: the second is "… (2).png", never written over the first. A name
    // that is taken by anything (a link that leads nowhere too) is not used.
    let taken = |p: &std::path::Path| std::fs::symlink_metadata(p).is_ok();
    let mut n = 1;
    while taken(&path) {
        n += 1;
        if n > 100 {
            return Err(failed(format!(
                "{} and 99 more names of this second are taken; nothing was written",
                path.display()
            )));
        }
        path = target_path(&home, &format!("{now} ({n})"));
    }
    let mut result = json!({
        "ok": true,
        "dry_run": dry_run,
        "command": action,
        "compositor": snapshot.compositor.name,
        "tool": "grim",
        "grim_args": target,
        "path": path.display().to_string(),
    });
    if dry_run {
        result["detail"] = json!(format!(
            "would take the screenshot with grim {} into {}",
            target.join(" "),
            path.display()
        ));
        return Ok(result);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| failed(format!("cannot create {}: {e}", dir.display())))?;
    }
    let run = tokio::process::Command::new(&grim)
        .args(&target)
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(GRIM_WAIT, run)
        .await
        .map_err(|_| failed("grim did not finish within 15 s"))?
        .map_err(|e| failed(format!("grim could not run: {e}")))?;
    if !out.status.success() {
        return Err(failed(format!(
            "grim failed ({}): {}",
            utter_desktop::spawn::describe_status(out.status),
            crate::link::clean(String::from_utf8_lossy(&out.stderr).trim())
        )));
    }
    let verified = is_png_file(&path);
    if !verified {
        // What grim left that is no PNG is not kept as a screenshot.
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            let _ = std::fs::remove_file(&path);
        }
        return Err(failed(format!(
            "grim ran, but {} is not there as a PNG file, so no screenshot was taken",
            path.display()
        )));
    }
    result["verified"] = json!(true);
    result["detail"] = json!(format!(
        "took the screenshot with grim into {}",
        path.display()
    ));
    Ok(result)
}

/// Take `action`'s screenshot through the xdg-desktop-portal (see the module docs);
/// `compositor` is the name the result carries (`"none"` without compositor IPC).
///
/// Result: `{ok, dry_run, command, compositor, tool: "portal", path, verified, detail}`:
/// `path` is the file the portal saved, `verified` that it is there as a PNG.
///
/// # Errors
/// `-32000` for `screenshot-window` (the portal takes one window only when the person picks
/// it), no session bus, no portal, the person refusing, or an answer that is no PNG file.
pub async fn take_with_portal(
    action: &str,
    compositor: &str,
    dry_run: bool,
) -> Result<Value, ErrorObject> {
    if action == "screenshot-window" {
        return Err(failed(format!(
            "{action}: without compositor IPC the screenshot portal is the way, and it takes \
             one window only when the person picks it; say \"take a screenshot\" for the whole \
             screen"
        )));
    }
    let (conn, _) = utter_desktop::bus::connect()
        .await
        .map_err(|e| failed(format!("{action}: {}", e.with_fix())))?;
    let mut result = json!({
        "ok": true,
        "dry_run": dry_run,
        "command": action,
        "compositor": compositor,
        "tool": "portal",
    });
    if dry_run {
        utter_desktop::portal::available(&conn)
            .await
            .map_err(|why| failed(format!("{action}: {why}")))?;
        result["detail"] = json!(
            "would ask the xdg-desktop-portal for a screenshot of the whole screen (it saves the file)"
        );
        return Ok(result);
    }
    let path = match utter_desktop::portal::screenshot(&conn).await {
        Ok(path) => path,
        Err(utter_desktop::portal::Failure::Cancelled) => {
            return Err(failed(format!(
                "{action}: the screenshot portal was refused (its dialog was dismissed or \
                 Utter may not take screenshots); nothing was taken"
            )));
        }
        Err(utter_desktop::portal::Failure::Failed(why)) => {
            return Err(failed(format!("{action} through the portal: {why}")));
        }
    };
    let verified = is_png_file(&path);
    if !verified {
        return Err(failed(format!(
            "the portal answered {}, which is no PNG file, so no screenshot was taken",
            path.display()
        )));
    }
    result["path"] = json!(path.display().to_string());
    result["verified"] = json!(true);
    result["detail"] = json!(format!(
        "took the screenshot through the xdg-desktop-portal into {}",
        path.display()
    ));
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Output, Rect, Window};

    #[test]
    fn the_window_or_the_focused_output_is_what_grim_takes() {
        let mut snapshot = Snapshot {
            outputs: vec![
                Output {
                    name: "HEADLESS-1".into(),
                    ..Default::default()
                },
                Output {
                    name: "HEADLESS-2".into(),
                    focused: true,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        assert_eq!(
            grim_target("screenshot-screen", &snapshot).unwrap(),
            ["-o", "HEADLESS-2"]
        );
        assert!(grim_target("screenshot-window", &snapshot).is_err());
        snapshot.focused = Some(Window {
            rect: Some(Rect {
                x: 10,
                y: 20,
                width: 300,
                height: 200,
            }),
            ..Default::default()
        });
        assert_eq!(
            grim_target("screenshot-window", &snapshot).unwrap(),
            ["-g", "10,20 300x200"]
        );
        assert_eq!(
            target_path(Path::new("/home/u"), "2026-12-04 10-00-00"),
            PathBuf::from("/home/u/Pictures/Screenshots/Screenshot from 2026-12-04 10-00-00.png")
        );
        assert!(is_png(b"\x89PNG\r\n\x1a\nrest"));
        assert!(!is_png(b"GIF89a"));
    }
}
