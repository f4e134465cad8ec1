//! The accessibility bus, its applications and a bounded walk of one application's tree.
//!
//! [`Bus::connect`] reaches the session bus (`$DBUS_SESSION_BUS_ADDRESS`), turns session
//! accessibility on (`org.a11y.Status.IsEnabled`; Chromium and Electron build their tree
//! only then), asks `org.a11y.Bus.GetAddress` for the accessibility bus and connects to it.
//! `$AT_SPI_BUS_ADDRESS`, when set (libatspi's own variable; the runner's sandbox sets it
//! when it passes the accessibility bus in), names the accessibility bus instead; then the
//! session bus is optional (a sandboxed plugin without the `dbus` permission has none, and
//! cannot switch accessibility on for Chromium and Electron, which the health says). Every
//! D-Bus call is bounded by [`CALL_TIMEOUT`].

use atspi::proxy::accessible::AccessibleProxy;
use atspi::proxy::action::ActionProxy;
use atspi::proxy::bus::{BusProxy, StatusProxy};
use atspi::{Interface, State};
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use zbus::names::BusName;

/// The bound on one D-Bus call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// The bound on connecting to a bus.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// The registry's well-known name on the accessibility bus.
const REGISTRY: &str = "org.a11y.atspi.Registry";
/// Every application's (and the registry's) root object.
const ROOT: &str = "/org/a11y/atspi/accessible/root";

/// A connection to the session bus and to the accessibility bus it names.
pub struct Bus {
    /// The session bus; `None` when it is out of reach and `$AT_SPI_BUS_ADDRESS` named the
    /// accessibility bus.
    session: Option<zbus::Connection>,
    /// Why session accessibility could not be switched on, when it could not.
    pub not_enabled: Option<String>,
    /// The accessibility bus.
    pub a11y: zbus::Connection,
    /// The accessibility bus's address, for health reports.
    pub address: String,
}

/// Why the accessibility bus could not be used, in words for a person.
pub type BusError = String;

async fn bounded<T, E: std::fmt::Display>(
    what: &str,
    limit: Duration,
    f: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, BusError> {
    match tokio::time::timeout(limit, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {e}")),
        Err(_) => Err(format!("{what}: no answer in {} ms", limit.as_millis())),
    }
}

impl Bus {
    /// Connect to the session bus, enable accessibility and connect to the a11y bus (see the
    /// module docs for `$AT_SPI_BUS_ADDRESS`).
    pub async fn connect() -> Result<Bus, BusError> {
        let session = bounded("cannot reach the session bus", CONNECT_TIMEOUT, async {
            zbus::connection::Builder::session()?
                .method_timeout(CALL_TIMEOUT)
                .build()
                .await
        })
        .await;
        let named = std::env::var("AT_SPI_BUS_ADDRESS")
            .ok()
            .filter(|a| !a.trim().is_empty());
        let (session, not_enabled, address) = match (session, named) {
            (Ok(session), named) => {
                ensure_enabled(&session).await?;
                let address = match named {
                    Some(address) => address,
                    None => {
                        bounded(
                            "the session bus has no accessibility bus (org.a11y.Bus; is at-spi2-core installed?)",
                            CALL_TIMEOUT,
                            async { BusProxy::new(&session).await?.get_address().await },
                        )
                        .await?
                    }
                };
                (Some(session), None, address)
            }
            (Err(why), Some(address)) => (
                None,
                Some(format!(
                    "session accessibility was not switched on ({why}; a sandboxed plugin needs the dbus permission): Chromium and Electron apps may show no tree"
                )),
                address,
            ),
            (Err(why), None) => {
                return Err(format!(
                    "{why}; the accessibility bus is found through the session bus: run Utter in your desktop session (or give the service DBUS_SESSION_BUS_ADDRESS with `systemctl --user import-environment`)"
                ));
            }
        };
        let a11y = bounded(
            &format!("cannot connect to the accessibility bus at {address}"),
            CONNECT_TIMEOUT,
            async {
                zbus::connection::Builder::address(address.as_str())?
                    .method_timeout(CALL_TIMEOUT)
                    .build()
                    .await
            },
        )
        .await?;
        Ok(Bus {
            session,
            not_enabled,
            a11y,
            address,
        })
    }

    /// Make sure session accessibility is still on (someone may have turned it off); without
    /// a session bus there is nothing to check.
    pub async fn ensure_enabled(&self) -> Result<(), BusError> {
        match &self.session {
            Some(session) => ensure_enabled(session).await,
            None => Ok(()),
        }
    }

    /// An `Accessible` proxy for the object `path` of the connection `name`.
    pub async fn accessible(
        &self,
        name: &str,
        path: &str,
    ) -> zbus::Result<AccessibleProxy<'static>> {
        AccessibleProxy::builder(&self.a11y)
            .destination(name.to_owned())?
            .path(path.to_owned())?
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
    }

    /// The applications the registry knows: their bus names.
    pub async fn applications(&self) -> Result<Vec<String>, BusError> {
        let registry = bounded(
            "the accessibility registry",
            CALL_TIMEOUT,
            self.accessible(REGISTRY, ROOT),
        )
        .await?;
        let children = bounded(
            "the accessibility registry's applications",
            CALL_TIMEOUT,
            registry.get_children(),
        )
        .await?;
        Ok(children
            .iter()
            .filter_map(|c| c.name_as_str().map(str::to_owned))
            .collect())
    }

    /// The unix process id of the connection `name` on the accessibility bus.
    pub async fn pid_of(&self, name: &str) -> Option<u32> {
        let dbus = zbus::fdo::DBusProxy::new(&self.a11y).await.ok()?;
        let bus_name = BusName::try_from(name.to_owned()).ok()?;
        tokio::time::timeout(CALL_TIMEOUT, dbus.get_connection_unix_process_id(bus_name))
            .await
            .ok()?
            .ok()
    }

    /// The application's own name (the root object's `Name`).
    pub async fn app_name(&self, name: &str) -> String {
        match self.accessible(name, ROOT).await {
            Ok(p) => p.name().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// Whether any direct child of the application (its windows) is `ACTIVE`.
    pub async fn has_active_frame(&self, name: &str) -> bool {
        self.active_frame(name).await.is_some()
    }

    /// The name (the window's title, as the application gives it) of the application's
    /// `ACTIVE` direct child, if one is; the first 64 children are looked at.
    pub async fn active_frame(&self, name: &str) -> Option<String> {
        let root = self.accessible(name, ROOT).await.ok()?;
        let children = root.get_children().await.ok()?;
        for child in children.iter().take(64) {
            let (Some(n), path) = (child.name_as_str(), child.path_as_str()) else {
                continue;
            };
            if let Ok(p) = self.accessible(n, path).await
                && let Ok(states) = p.get_state().await
                && states.contains(State::Active)
            {
                return Some(p.name().await.unwrap_or_default());
            }
        }
        None
    }

    /// Walk the application `name`'s tree breadth first within `limits`.
    pub async fn walk(&self, name: &str, limits: Limits) -> Walk {
        let started = Instant::now();
        let mut nodes: Vec<Node> = Vec::new();
        let mut truncated = false;
        let mut queue: VecDeque<(String, String, Option<usize>, usize)> = VecDeque::new();
        queue.push_back((name.to_owned(), ROOT.to_owned(), None, 0));
        while let Some((bus, path, parent, depth)) = queue.pop_front() {
            if nodes.len() >= limits.max_nodes || started.elapsed() >= limits.budget {
                truncated = true;
                break;
            }
            let Some((node, children)) = self.read_node(&bus, &path, parent, depth).await else {
                continue;
            };
            let id = nodes.len();
            nodes.push(node);
            if depth >= limits.max_depth {
                truncated |= !children.is_empty();
                continue;
            }
            for (b, p) in children {
                queue.push_back((b, p, Some(id), depth + 1));
            }
        }
        Walk { nodes, truncated }
    }

    /// Read one object; `None` when it went away or does not answer.
    async fn read_node(
        &self,
        bus: &str,
        path: &str,
        parent: Option<usize>,
        depth: usize,
    ) -> Option<(Node, Vec<(String, String)>)> {
        let p = self.accessible(bus, path).await.ok()?;
        let (role, name, states, interfaces, children) = futures::join!(
            p.get_role(),
            p.name(),
            p.get_state(),
            p.get_interfaces(),
            p.get_children()
        );
        let role = role.ok()?;
        let interfaces = interfaces.unwrap_or_default();
        let states = states.unwrap_or_default();
        let mut actions = Vec::new();
        if interfaces.contains(Interface::Action)
            && let Ok(a) = self.action(bus, path).await
            && let Ok(list) = a.get_actions().await
        {
            actions = list.into_iter().take(16).map(|a| a.name).collect();
        }
        let children = children
            .unwrap_or_default()
            .into_iter()
            .filter_map(|c| Some((c.name_as_str()?.to_owned(), c.path_as_str().to_owned())))
            .collect();
        Some((
            Node {
                bus: bus.to_owned(),
                path: path.to_owned(),
                role: role.name().to_owned(),
                name: name.unwrap_or_default(),
                states: states
                    .iter()
                    .map(|s| s.to_static_str().to_owned())
                    .collect(),
                actions,
                parent,
                depth,
                editable_text: interfaces.contains(Interface::EditableText),
                text: interfaces.contains(Interface::Text),
            },
            children,
        ))
    }

    /// An `Action` proxy for one object.
    pub async fn action(&self, bus: &str, path: &str) -> zbus::Result<ActionProxy<'static>> {
        ActionProxy::builder(&self.a11y)
            .destination(bus.to_owned())?
            .path(path.to_owned())?
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
    }
}

async fn ensure_enabled(session: &zbus::Connection) -> Result<(), BusError> {
    bounded(
        "cannot turn session accessibility on (org.a11y.Status.IsEnabled; is at-spi2-core installed?)",
        CALL_TIMEOUT,
        async {
            let status = StatusProxy::builder(session)
                .cache_properties(zbus::proxy::CacheProperties::No)
                .build()
                .await?;
            if !status.is_enabled().await? {
                status.set_is_enabled(true).await?;
            }
            Ok::<(), zbus::Error>(())
        },
    )
    .await
}

/// Bounds on one walk of a tree.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The deepest level read (the application is level 0).
    pub max_depth: usize,
    /// The most nodes read.
    pub max_nodes: usize,
    /// The time the walk may take.
    pub budget: Duration,
}

/// One accessible object as read.
#[derive(Debug, Clone)]
pub struct Node {
    /// The connection that owns it.
    pub bus: String,
    /// Its object path.
    pub path: String,
    /// Its role's name, e.g. `"push button"`.
    pub role: String,
    /// Its name (untrusted).
    pub name: String,
    /// Its states' names, e.g. `"focused"`.
    pub states: Vec<String>,
    /// Its actions' names, e.g. `"click"`.
    pub actions: Vec<String>,
    /// The index of its parent in the walk.
    pub parent: Option<usize>,
    /// Its level (the application is 0).
    pub depth: usize,
    /// It implements `EditableText`.
    pub editable_text: bool,
    /// It implements `Text`.
    pub text: bool,
}

impl Node {
    /// Whether it has the state `name`.
    pub fn has(&self, name: &str) -> bool {
        self.states.iter().any(|s| s == name)
    }
}

/// The nodes one walk read, and whether it stopped at a bound.
#[derive(Debug, Clone)]
pub struct Walk {
    /// In breadth-first order; a node's id is its index.
    pub nodes: Vec<Node>,
    /// A bound (depth, nodes, time) left part of the tree unread.
    pub truncated: bool,
}
