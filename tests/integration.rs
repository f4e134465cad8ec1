//! Every integration test of the runner, in one binary: one link of the dependency tree
//! instead of one per file, and one `cargo test` process. Each file of `tests/` is a module
//! here (`cargo test --test integration socket::` runs the socket tests); the helpers they
//! share are declared once.

#[path = "common/mod.rs"]
mod common;
#[path = "../plugins/a11y/tests/desktop/mod.rs"]
mod desktop;
#[path = "../plugins/a11y/tests/grounding_server/mod.rs"]
mod grounding_server;
#[path = "../plugins/compositor/tests/niri_server/mod.rs"]
mod niri_server;
#[path = "../plugins/llm/tests/openai/mod.rs"]
mod openai;
#[path = "../plugins/compositor/tests/sway_session/mod.rs"]
mod sway_session;

#[path = "abuse.rs"]
mod abuse;
#[path = "architecture.rs"]
mod architecture;
#[path = "audio.rs"]
mod audio;
#[path = "cli.rs"]
mod cli;
#[path = "compositor.rs"]
mod compositor;
#[path = "dataplane.rs"]
mod dataplane;
#[path = "dbus.rs"]
mod dbus;
#[path = "desktop_plugin.rs"]
mod desktop_plugin;
#[path = "docs.rs"]
mod docs;
#[path = "doctor.rs"]
mod doctor;
#[path = "e2e.rs"]
mod e2e;
#[path = "ensure_url.rs"]
mod ensure_url;
#[path = "install_script.rs"]
mod install_script;
#[path = "models.rs"]
mod models;
#[path = "noctalia.rs"]
mod noctalia;
#[path = "pipeline.rs"]
mod pipeline;
#[path = "plugin_check.rs"]
mod plugin_check;
#[path = "ptt.rs"]
mod ptt;
#[path = "rules_plugin.rs"]
mod rules_plugin;
#[path = "sandbox.rs"]
mod sandbox;
#[path = "settings.rs"]
mod settings;
#[path = "socket.rs"]
mod socket;
#[path = "spoken.rs"]
mod spoken;
#[path = "storms.rs"]
mod storms;
#[path = "streams.rs"]
mod streams;
#[path = "supervisor.rs"]
mod supervisor;
#[path = "systemd.rs"]
mod systemd;
#[path = "transports.rs"]
mod transports;
#[path = "trust.rs"]
mod trust;
#[path = "trust_desktop.rs"]
mod trust_desktop;
#[path = "undo.rs"]
mod undo;
#[path = "voice.rs"]
mod voice;
