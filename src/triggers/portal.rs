//! The portal trigger: `org.freedesktop.portal.GlobalShortcuts` of xdg-desktop-portal,
//! through `ashpd`.
//!
//! Flow (the portal spec's GlobalShortcuts interface, version 1): `CreateSession`, then
//! `BindShortcuts` with one shortcut, id [`PORTAL_SHORTCUT_ID`], a description and the
//! preferred trigger from `[ptt] shortcut` (XDG shortcuts format, e.g. `F13` or
//! `CTRL+ALT+space`); the desktop may show a dialog and bind another key. Then `Activated`
//! → press and `Deactivated` → release, with source `portal`.
//!
//! Only KDE, GNOME 48+ and Hyprland implement the portal; on other desktops (niri, sway) the
//! frontend has no GlobalShortcuts or there is no frontend at all. That is an expected state:
//! the trigger's status says `unavailable: <reason>` and one info line is logged; nothing
//! fails, and the compositor binding (`utter ptt …`) or evdev still work.
//!
//! The binding lives in the frontend process, so the trigger follows the frontend's bus name
//! ([`super::bus::follow`]): when xdg-desktop-portal exits or is replaced, the status turns
//! `unavailable` ("went away; waiting for it to come back") instead of staying `bound` over
//! a dead shortcut, and a new frontend gets a new session and `BindShortcuts`.

use futures::StreamExt;
use zbus::Connection;

use ashpd::desktop::global_shortcuts::{BindShortcutsOptions, GlobalShortcuts, NewShortcut};
use utter_core::ptt::{PORTAL_DICTATION_ID, PORTAL_SHORTCUT_ID, Ptt, Source};

/// The description shown by the desktop's shortcut dialog.
pub const SHORTCUT_DESCRIPTION: &str = "Push to talk: hold to speak to Utter";

/// The description of the key held to dictate.
pub const DICTATION_DESCRIPTION: &str = "Dictate: hold to type what you say";

/// A sentence for why the portal cannot be used.
fn reason(e: &ashpd::Error) -> String {
    match e {
        ashpd::Error::PortalNotFound(_) => {
            "the desktop portal has no GlobalShortcuts (this desktop does not implement it; niri and sway do not) – bind `utter ptt` in the compositor or enable evdev".to_owned()
        }
        // The bus cannot start or find org.freedesktop.portal.Desktop; ashpd wraps the bus
        // error in several ways, so the error's own words are checked.
        other
            if ["ServiceUnknown", "NameHasNoOwner", "not provided by any .service files"]
                .iter()
                .any(|w| other.to_string().contains(w)) =>
        {
            format!("no xdg-desktop-portal on the session bus ({other})")
        }
        ashpd::Error::Response(ashpd::desktop::ResponseError::Cancelled) => {
            "the shortcut was declined in the desktop's dialog".to_owned()
        }
        ashpd::Error::RequiresVersion(want, have) => {
            format!("the portal is too old (version {have}, needs {want})")
        }
        other => other.to_string(),
    }
}

/// Follow the portal on `conn` ([`super::bus::follow`]): bind the shortcut with each owner of
/// `org.freedesktop.portal.Desktop` and feed `ptt` until the task is dropped. A frontend that
/// exits or is replaced leaves the trigger `unavailable` until one is back, and is bound
/// again then. Status goes to trigger `portal`.
pub async fn run(ptt: Ptt, conn: Connection, shortcut: String, dictate: Option<String>) {
    ptt.set_trigger(
        "portal",
        "starting",
        &format!("binding {shortcut} through org.freedesktop.portal.GlobalShortcuts"),
    );
    let activatable = match activatable(&conn).await {
        Ok(a) => a,
        Err(why) => {
            tracing::info!("push-to-talk: the GlobalShortcuts portal is unavailable: {why}");
            ptt.set_trigger("portal", "unavailable", &why);
            return;
        }
    };
    let service = super::bus::Service {
        trigger: "portal",
        source: Source::Portal,
        name: DESKTOP,
        absent: format!(
            "no xdg-desktop-portal on the session bus ({DESKTOP} is neither running nor activatable); waiting for it to appear"
        ),
        gone: format!("xdg-desktop-portal ({DESKTOP}) went away; waiting for it to come back"),
        activate: activatable,
    };
    let (p, c) = (ptt.clone(), conn.clone());
    super::bus::follow(&ptt, &conn, service, move || {
        session(p.clone(), c.clone(), shortcut.clone(), dictate.clone())
    })
    .await;
}

/// One binding with the current frontend: check it serves GlobalShortcuts, bind, follow
/// `Activated`/`Deactivated`. Returns why it ended.
async fn session(
    ptt: Ptt,
    conn: Connection,
    shortcut: String,
    dictate: Option<String>,
) -> super::bus::Ended {
    if let Err(why) = probe(&conn).await {
        tracing::info!("push-to-talk: the GlobalShortcuts portal is unavailable: {why}");
        return ("unavailable", why);
    }
    match bind_and_follow(&ptt, conn, &shortcut, dictate.as_deref()).await {
        Ok(()) => {
            tracing::info!("push-to-talk: the GlobalShortcuts portal closed its signals");
            (
                "unavailable",
                "the portal stopped sending shortcut signals".to_owned(),
            )
        }
        Err(e) => {
            let why = reason(&e);
            tracing::info!("push-to-talk: the GlobalShortcuts portal is unavailable: {why}");
            ("unavailable", why)
        }
    }
}

/// The portal frontend's well-known name and object.
const DESKTOP: &str = "org.freedesktop.portal.Desktop";
const DESKTOP_PATH: &str = "/org/freedesktop/portal/desktop";
const INTERFACE: &str = "org.freedesktop.portal.GlobalShortcuts";

/// Whether the frontend can be started by the bus when it is not running (a `.service`
/// file for [`DESKTOP`]): then the first session activates it.
async fn activatable(conn: &Connection) -> Result<bool, String> {
    let bus = zbus::fdo::DBusProxy::builder(conn)
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
        .map_err(|e| format!("cannot talk to the bus daemon: {e}"))?;
    Ok(bus
        .list_activatable_names()
        .await
        .map(|names| names.iter().any(|n| n.as_str() == DESKTOP))
        .unwrap_or(false))
}

/// Whether the frontend serves GlobalShortcuts, asked quietly (before any ashpd proxy, whose
/// property cache logs a warning when the interface is missing). Its version, or why not.
async fn probe(conn: &Connection) -> Result<u32, String> {
    let props = zbus::fdo::PropertiesProxy::builder(conn)
        .destination(DESKTOP)
        .and_then(|b| b.path(DESKTOP_PATH))
        .map_err(|e| e.to_string())?
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
        .map_err(|e| format!("cannot reach {DESKTOP}: {e}"))?;
    let iface = zbus::names::InterfaceName::try_from(INTERFACE).map_err(|e| e.to_string())?;
    match props.get(iface, "version").await {
        Ok(v) => Ok(u32::try_from(v).unwrap_or(1)),
        Err(e) => Err(format!(
            "the desktop portal has no GlobalShortcuts (this desktop does not implement it; niri and sway do not) – bind `utter ptt` in the compositor or enable evdev ({e})"
        )),
    }
}

async fn bind_and_follow(
    ptt: &Ptt,
    conn: Connection,
    shortcut: &str,
    dictate: Option<&str>,
) -> Result<(), ashpd::Error> {
    let portal = GlobalShortcuts::with_connection(conn).await?;
    // Subscribe first, so no activation between binding and following is lost.
    let mut activated = portal.receive_activated().await?;
    let mut deactivated = portal.receive_deactivated().await?;
    let session = portal.create_session(Default::default()).await?;
    let mut wanted = vec![
        NewShortcut::new(PORTAL_SHORTCUT_ID, SHORTCUT_DESCRIPTION)
            .preferred_trigger(Some(shortcut)),
    ];
    if let Some(key) = dictate {
        wanted.push(
            NewShortcut::new(PORTAL_DICTATION_ID, DICTATION_DESCRIPTION)
                .preferred_trigger(Some(key)),
        );
    }
    let bound = portal
        .bind_shortcuts(&session, &wanted, None, BindShortcutsOptions::default())
        .await?
        .response()?;
    let described = |id: &str, preferred: &str| {
        let trigger = bound
            .shortcuts()
            .iter()
            .find(|s| s.id() == id)
            .map(|s| s.trigger_description().to_owned());
        match trigger.as_deref() {
            Some("") | None => format!(
                "{id} bound (preferred {preferred}); the desktop shows no key for it yet: assign one in its shortcut settings"
            ),
            Some(t) => format!("{id} bound to {t}"),
        }
    };
    let mut detail = described(PORTAL_SHORTCUT_ID, shortcut);
    if let Some(key) = dictate {
        detail = format!("{detail}; {}", described(PORTAL_DICTATION_ID, key));
    }
    tracing::info!(portal_version = portal.version(), "push-to-talk: {detail}");
    ptt.set_trigger("portal", "bound", &detail);
    loop {
        tokio::select! {
            a = activated.next() => match a {
                Some(a) if a.shortcut_id() == PORTAL_SHORTCUT_ID => { ptt.press(Source::Portal); }
                Some(a) if dictate.is_some() && a.shortcut_id() == PORTAL_DICTATION_ID => {
                    ptt.press_for(Source::Portal, true);
                }
                Some(_) => {}
                None => break,
            },
            d = deactivated.next() => match d {
                Some(d) if d.shortcut_id() == PORTAL_SHORTCUT_ID
                    || (dictate.is_some() && d.shortcut_id() == PORTAL_DICTATION_ID) => {
                    ptt.release(Source::Portal);
                }
                Some(_) => {}
                None => break,
            },
        }
    }
    drop(session);
    Ok(())
}

/// Connect to the session bus and start [`run`] as a task; without a session bus the trigger
/// is `unavailable` at once.
pub fn spawn(ptt: Ptt, shortcut: String, dictate: Option<String>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        match super::session_bus().await {
            Ok(conn) => run(ptt, conn, shortcut, dictate).await,
            Err(why) => ptt.set_trigger("portal", "unavailable", &why),
        }
    })
}
