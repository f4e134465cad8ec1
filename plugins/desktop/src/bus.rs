//! The D-Bus session bus: where it is and a connection to it, with bounded waits.
//!
//! Each request opens its own connection (a few milliseconds) rather than keeping one: a
//! bus that restarts with the session, or appears after the plugin started, is then picked
//! up without any reconnect logic.

use std::path::PathBuf;
use std::time::Duration;
use zbus::Connection;

/// How long connecting (socket, authentication, `Hello`) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The session bus could not be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BusError {
    /// Neither `DBUS_SESSION_BUS_ADDRESS` nor `$XDG_RUNTIME_DIR/bus` exists.
    #[error("no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS unset)")]
    NoAddress,
    /// The address is known but the bus did not accept us.
    #[error("cannot reach the D-Bus session bus at {address}: {reason}")]
    Unreachable {
        /// The address tried.
        address: String,
        /// What failed.
        reason: String,
    },
}

impl BusError {
    /// The error and what to do about it, for a step that cannot work without the bus (the
    /// `Display` form says only what is wrong, for where the bus is one of several ways).
    pub fn with_fix(&self) -> String {
        match self {
            BusError::NoAddress => format!(
                "{self}; run Utter in your desktop session, or give the service the variable (`systemctl --user import-environment DBUS_SESSION_BUS_ADDRESS`, then `systemctl --user restart utter`)"
            ),
            BusError::Unreachable { .. } => {
                format!("{self}; check that the session's dbus-daemon (or dbus-broker) runs")
            }
        }
    }
}

/// The session bus address: `DBUS_SESSION_BUS_ADDRESS` when set and not empty, else
/// `unix:path=$XDG_RUNTIME_DIR/bus` when that socket exists (the systemd user bus, which
/// libdbus, sd-bus and zbus also fall back to).
pub fn session_address() -> Option<String> {
    if let Some(address) = std::env::var("DBUS_SESSION_BUS_ADDRESS")
        .ok()
        .filter(|a| !a.is_empty())
    {
        return Some(address);
    }
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")?;
    let socket = PathBuf::from(runtime).join("bus");
    let path = socket.to_str()?;
    socket.exists().then(|| format!("unix:path={path}"))
}

/// Connect to the session bus.
///
/// # Errors
///
/// [`BusError::NoAddress`] when there is no bus to try; [`BusError::Unreachable`] when the
/// address is bad, the socket refuses, or the handshake takes longer than 3 s.
pub async fn connect() -> Result<(Connection, String), BusError> {
    let address = session_address().ok_or(BusError::NoAddress)?;
    let unreachable = |reason: String| BusError::Unreachable {
        address: address.clone(),
        reason,
    };
    let builder = zbus::connection::Builder::address(address.as_str())
        .map_err(|e| unreachable(e.to_string()))?;
    match tokio::time::timeout(CONNECT_TIMEOUT, builder.build()).await {
        Ok(Ok(conn)) => Ok((conn, address)),
        Ok(Err(e)) => Err(unreachable(e.to_string())),
        Err(_) => Err(unreachable(format!(
            "no answer within {} s",
            CONNECT_TIMEOUT.as_secs()
        ))),
    }
}

/// Run a bus call with a time limit, folding a timeout into the call's own error text.
pub async fn bounded<T, E: std::fmt::Display>(
    limit: Duration,
    what: &str,
    call: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(format!("{what}: {e}")),
        Err(_) => Err(format!("{what}: no answer within {} ms", limit.as_millis())),
    }
}
