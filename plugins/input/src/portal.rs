//! The RemoteDesktop portal (`org.freedesktop.portal.RemoteDesktop`, xdg-desktop-portal; the
//! path to input on GNOME and KDE, whose compositors offer neither uinput to the user nor the
//! wlroots virtual-input protocols): a session with keyboard and pointer devices, started once,
//! whose `ConnectToEIS` (interface version 2) hands over the socket of the compositor's EIS
//! server ([`crate::eis`]).
//!
//! The first start asks the person (the portal's dialog); the restore token the portal then
//! gives is kept in [`utter_ipc::paths::BaseDirs::remote_desktop_token`] and sent with the
//! next session (`persist_mode` 2, until revoked), so the question comes once. The session
//! lives as long as the D-Bus connection that made it, which [`PortalSession`] holds.

use ashpd::desktop::remote_desktop::{
    ConnectToEISOptions, DeviceType, RemoteDesktop, SelectDevicesOptions, StartOptions,
};
use ashpd::desktop::{CreateSessionOptions, PersistMode, Session};
use ashpd::enumflags2::BitFlags;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long the person has to answer the portal's dialog.
pub const START_TIMEOUT: Duration = Duration::from_secs(120);

/// A started RemoteDesktop session. Dropping it closes the session (and so the compositor's
/// side of the EIS connection).
pub struct PortalSession {
    // Field order is drop order: the session before the proxy, both before the runtime that
    // drives their connection.
    _session: Session<RemoteDesktop>,
    _proxy: RemoteDesktop,
    _runtime: tokio::runtime::Runtime,
    /// Whether the person let the session have the keyboard (the portal answers which
    /// device types were granted).
    pub keyboard: bool,
    /// Whether it has the pointer.
    pub pointer: bool,
}

impl std::fmt::Debug for PortalSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortalSession")
            .field("keyboard", &self.keyboard)
            .field("pointer", &self.pointer)
            .finish_non_exhaustive()
    }
}

/// Why no session started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortalError {
    /// The person declined in the portal's dialog.
    #[error("{0}")]
    Declined(String),
    /// Anything else: no portal, too old, no answer, an error reply.
    #[error("{0}")]
    Failed(String),
}

/// Start a session on the session bus and return the EIS socket with the session that must
/// outlive it.
///
/// Runs on its own thread with a runtime of its own (the caller is the device thread, which
/// has none), so a portal that misbehaves badly enough to panic the portal library takes
/// down only this attempt.
///
/// # Errors
/// A line saying what is missing or what the portal answered: no portal, an interface
/// version without `ConnectToEIS` (it came with version 2), the person declined, no answer
/// within [`START_TIMEOUT`].
pub fn connect(token_file: Option<PathBuf>) -> Result<(OwnedFd, PortalSession), PortalError> {
    std::thread::Builder::new()
        .name("utter-input-portal".into())
        .spawn(move || connect_here(token_file))
        .map_err(|e| PortalError::Failed(format!("cannot start the portal thread: {e}")))?
        .join()
        .unwrap_or_else(|_| {
            Err(PortalError::Failed(
                "the portal library failed on the portal's answer".into(),
            ))
        })
}

fn connect_here(token_file: Option<PathBuf>) -> Result<(OwnedFd, PortalSession), PortalError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("utter-input-portal-bus")
        .enable_all()
        .build()
        .map_err(|e| PortalError::Failed(format!("cannot start a runtime for the portal: {e}")))?;
    let token = token_file.as_deref().and_then(utter_ipc::paths::read_token);
    let started = runtime.block_on(async {
        tokio::time::timeout(START_TIMEOUT, start(token))
            .await
            .unwrap_or_else(|_| {
                Err(PortalError::Failed(format!(
                    "the RemoteDesktop portal did not answer within {} s (was its dialog left open?)",
                    START_TIMEOUT.as_secs()
                )))
            })
    })?;
    let Started {
        proxy,
        session,
        fd,
        devices,
        restore_token,
    } = started;
    if let (Some(path), Some(token)) = (token_file.as_deref(), restore_token.as_deref()) {
        if let Err(e) = keep_token(path, token) {
            tracing::warn!(
                "cannot keep the portal's restore token in {}: {e}; the portal will ask again at the next start",
                path.display()
            );
        }
    }
    Ok((
        fd,
        PortalSession {
            _session: session,
            _proxy: proxy,
            _runtime: runtime,
            keyboard: devices.contains(DeviceType::Keyboard),
            pointer: devices.contains(DeviceType::Pointer),
        },
    ))
}

/// A D-Bus library's error said in plain words: what is missing rather than the library's
/// own wrapping ("ZBus Error: org.freedesktop.DBus.Error.ServiceUnknown: …").
/// `named`: whether the environment names a session bus ([`session_bus_named`]).
fn bus_reason(error: &str, named: bool) -> String {
    if !named {
        return "there is no session bus: DBUS_SESSION_BUS_ADDRESS and XDG_RUNTIME_DIR are unset"
            .into();
    }
    if error.contains("ServiceUnknown") || error.contains("not provided by any .service") {
        return "xdg-desktop-portal is not running and cannot be started on this bus".into();
    }
    let plain = error
        .trim_start_matches("ZBus Error: ")
        .trim_start_matches("zbus error: ");
    plain.chars().take(300).collect()
}

/// Whether `DBUS_SESSION_BUS_ADDRESS` or `XDG_RUNTIME_DIR` (where the bus's socket is) is set.
fn session_bus_named() -> bool {
    ["DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|a| !a.is_empty()))
}

struct Started {
    proxy: RemoteDesktop,
    session: Session<RemoteDesktop>,
    fd: OwnedFd,
    devices: BitFlags<DeviceType>,
    restore_token: Option<String>,
}

async fn start(token: Option<String>) -> Result<Started, PortalError> {
    use PortalError::Failed;
    let proxy = RemoteDesktop::new().await.map_err(|e| {
        Failed(format!(
            "no RemoteDesktop portal on the session bus ({}; it needs xdg-desktop-portal with a backend that offers it, such as GNOME's or KDE's)",
            bus_reason(&e.to_string(), session_bus_named())
        ))
    })?;
    let version = proxy.version();
    if version < 2 {
        return Err(Failed(format!(
            "the RemoteDesktop portal is interface version {version}; sending input through libei needs ConnectToEIS (version 2: xdg-desktop-portal 1.18 or later with GNOME 46+ or KDE Plasma 6.1+)"
        )));
    }
    let session = proxy
        .create_session(CreateSessionOptions::default())
        .await
        .map_err(|e| Failed(format!("the RemoteDesktop portal refused a session: {e}")))?;
    let wanted = DeviceType::Keyboard | DeviceType::Pointer;
    let available = proxy.available_device_types().await.unwrap_or(wanted);
    let options = SelectDevicesOptions::default()
        .set_devices(wanted & available)
        .set_persist_mode(PersistMode::ExplicitlyRevoked)
        .set_restore_token(token.as_deref());
    proxy
        .select_devices(&session, options)
        .await
        .and_then(|r| r.response())
        .map_err(|e| Failed(format!("the RemoteDesktop portal refused the devices: {e}")))?;
    let selected = proxy
        .start(&session, None, StartOptions::default())
        .await
        .and_then(|r| r.response())
        .map_err(|e| match e {
            ashpd::Error::Response(ashpd::desktop::ResponseError::Cancelled) => {
                PortalError::Declined(
                    "the person declined remote input in the portal's dialog".to_owned(),
                )
            }
            e => Failed(format!("the RemoteDesktop session did not start: {e}")),
        })?;
    let fd = proxy
        .connect_to_eis(&session, ConnectToEISOptions::default())
        .await
        .map_err(|e| Failed(format!("the RemoteDesktop portal gave no EIS socket: {e}")))?;
    Ok(Started {
        devices: selected.devices(),
        restore_token: selected.restore_token().map(str::to_owned),
        proxy,
        session,
        fd,
    })
}

/// Write the restore token readable by the user alone (it lets a process skip the dialog).
fn keep_token(path: &Path, token: &str) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if token.len() > 4096 || token.contains(['\n', '\0']) {
        return Err(std::io::Error::other("the token is not one short line"));
    }
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    utter_protocol::files::write_atomic(path, token.as_bytes(), 0o600)
}

#[cfg(test)]
mod tests {
    use super::bus_reason;

    #[test]
    fn a_bus_error_is_said_without_the_librarys_wrapping() {
        let unknown = bus_reason(
            "ZBus Error: org.freedesktop.DBus.Error.ServiceUnknown: The name is not activatable",
            true,
        );
        assert_eq!(
            unknown,
            "xdg-desktop-portal is not running and cannot be started on this bus"
        );
        let other = bus_reason("ZBus Error: Connection refused (os error 111)", true);
        assert_eq!(other, "Connection refused (os error 111)");
        assert!(bus_reason("anything", false).starts_with("there is no session bus"));
        assert!(bus_reason(&"x".repeat(1000), true).chars().count() <= 300);
    }
}
