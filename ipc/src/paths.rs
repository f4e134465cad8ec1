//! Where a client finds the runner: the one place that reads the XDG base-directory
//! variables (XDG Base Directory Specification 0.8). The runner (`utter-core`) uses the same
//! [`BaseDirs`] for everything it keeps.
//!
//! Every path is derived from a [`BaseDirs`], read once from the environment (or from a
//! lookup function in tests). A variable that is unset, empty or relative is ignored, as the
//! specification asks; `HOME` supplies the defaults (`~/.config`, `~/.local/share`,
//! `~/.local/state`). The runtime directory is `$XDG_RUNTIME_DIR`, else
//! `<tmp>/utter-<uid>` (the older runner's fallback, reference §9.1).
//!
//! | what | path |
//! |---|---|
//! | user config | `$XDG_CONFIG_HOME/utter/config.toml` |
//! | client socket | `$XDG_RUNTIME_DIR/utter/runner.sock` |
//! | plugin sockets | `$XDG_RUNTIME_DIR/utter/plugins/<id>.sock` |
//! | handle blobs | `$XDG_RUNTIME_DIR/utter/handles/` |
//! | socket token | `$XDG_STATE_HOME/utter/runner-token` |
//! | install manifest | `$XDG_STATE_HOME/utter/installed.json` |
//! | RemoteDesktop portal restore token | `$XDG_STATE_HOME/utter/remote-desktop-token` |
//! | speech models (`utter models`) | `$XDG_DATA_HOME/utter/models/<name>/` |

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The application's directory name under each base directory.
pub const APP: &str = "utter";

/// The XDG base directories of this user. A directory is `None` when neither its variable
/// nor `HOME` gives an absolute path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseDirs {
    /// `$HOME`, when absolute.
    pub home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME`, else `~/.config`.
    pub config_home: Option<PathBuf>,
    /// `$XDG_DATA_HOME`, else `~/.local/share`.
    pub data_home: Option<PathBuf>,
    /// `$XDG_STATE_HOME`, else `~/.local/state`.
    pub state_home: Option<PathBuf>,
    /// `$XDG_RUNTIME_DIR`, else `<tmp>/utter-<uid>`.
    pub runtime: PathBuf,
}

impl BaseDirs {
    /// From the process environment. With no absolute `HOME` (a service or a CI job that
    /// clears it), the home directory is the user's entry in the password database.
    pub fn from_env() -> BaseDirs {
        BaseDirs::from_lookup(|name| {
            let value = std::env::var_os(name);
            if name == "HOME" && !value.as_deref().is_some_and(|v| Path::new(v).is_absolute()) {
                return nix::unistd::User::from_uid(nix::unistd::getuid())
                    .ok()
                    .flatten()
                    .map(|user| user.dir.into_os_string())
                    .filter(|dir| Path::new(dir).is_absolute());
            }
            value
        })
    }

    /// From `lookup` (a variable's value by name), so tests need not touch the environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> BaseDirs {
        let absolute = |name: &str| lookup(name).map(PathBuf::from).filter(|p| p.is_absolute());
        let home = absolute("HOME");
        let base = |name: &str, under_home: &str| {
            absolute(name).or_else(|| home.as_ref().map(|h| h.join(under_home)))
        };
        let runtime = absolute("XDG_RUNTIME_DIR").unwrap_or_else(|| {
            std::env::temp_dir().join(format!("{APP}-{}", nix::unistd::getuid()))
        });
        BaseDirs {
            config_home: base("XDG_CONFIG_HOME", ".config"),
            data_home: base("XDG_DATA_HOME", ".local/share"),
            state_home: base("XDG_STATE_HOME", ".local/state"),
            home,
            runtime,
        }
    }

    /// `$XDG_RUNTIME_DIR` itself: where the session's own sockets are (Wayland's display,
    /// PipeWire's `pipewire-0`).
    pub fn session_runtime_dir(&self) -> &Path {
        &self.runtime
    }

    /// `$XDG_RUNTIME_DIR/utter`: sockets and handles (see [`ensure_private_dir`]).
    pub fn runtime_dir(&self) -> PathBuf {
        self.runtime.join(APP)
    }

    /// The user's config file, `$XDG_CONFIG_HOME/utter/config.toml`.
    pub fn config_file(&self) -> Option<PathBuf> {
        Some(self.config_home.as_ref()?.join(APP).join("config.toml"))
    }

    /// `$XDG_DATA_HOME/utter/models`: the speech models `utter models pull` installs, one
    /// directory per model (`<models_dir>/tiny.en/model.bin`, ...), which `[stt] model =
    /// "tiny.en"` names. `None` when neither `XDG_DATA_HOME` nor `HOME` is absolute.
    pub fn models_dir(&self) -> Option<PathBuf> {
        Some(self.data_home.as_ref()?.join(APP).join("models"))
    }

    /// `$XDG_STATE_HOME/utter`: the socket token and the install manifest.
    pub fn state_dir(&self) -> Option<PathBuf> {
        Some(self.state_home.as_ref()?.join(APP))
    }

    /// The client socket's default path, `$XDG_RUNTIME_DIR/utter/runner.sock`.
    pub fn socket(&self) -> PathBuf {
        self.runtime_dir().join("runner.sock")
    }

    /// The directory of plugin sockets, `$XDG_RUNTIME_DIR/utter/plugins`.
    pub fn plugin_sockets(&self) -> PathBuf {
        self.runtime_dir().join("plugins")
    }

    /// Markers of the plugins' process groups, `$XDG_RUNTIME_DIR/utter/groups` (so a runner
    /// can stop what a killed runner's plugins left running).
    pub fn plugin_groups(&self) -> PathBuf {
        self.runtime_dir().join("groups")
    }

    /// The handle store's default root, `$XDG_RUNTIME_DIR/utter/handles`.
    pub fn handles(&self) -> PathBuf {
        self.runtime_dir().join("handles")
    }

    /// The socket token file, `$XDG_STATE_HOME/utter/runner-token`.
    pub fn token(&self) -> Option<PathBuf> {
        Some(self.state_dir()?.join("runner-token"))
    }

    /// The restore token the RemoteDesktop portal gave the input plugin, so the person is
    /// asked to allow input once rather than at every start (xdg-desktop-portal
    /// `org.freedesktop.portal.RemoteDesktop`, `persist_mode` and `restore_token`):
    /// `$XDG_STATE_HOME/utter/remote-desktop-token`.
    pub fn remote_desktop_token(&self) -> Option<PathBuf> {
        Some(self.state_dir()?.join("remote-desktop-token"))
    }
}

/// Read a token file (surrounding whitespace removed); `None` when it is missing, unreadable
/// or empty.
pub fn read_token(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let token = text.trim();
    (!token.is_empty()).then(|| token.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(vars: &[(&str, &str)]) -> BaseDirs {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        BaseDirs::from_lookup(move |name| {
            vars.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| OsString::from(v))
        })
    }

    #[test]
    fn home_supplies_the_defaults() {
        let d = dirs(&[("HOME", "/h"), ("XDG_RUNTIME_DIR", "/run/user/7")]);
        assert_eq!(d.config_file(), Some("/h/.config/utter/config.toml".into()));
        assert_eq!(d.token(), Some("/h/.local/state/utter/runner-token".into()));
        assert_eq!(d.models_dir(), Some("/h/.local/share/utter/models".into()));
        assert_eq!(d.socket(), PathBuf::from("/run/user/7/utter/runner.sock"));
        assert_eq!(
            d.plugin_sockets(),
            PathBuf::from("/run/user/7/utter/plugins")
        );
    }

    #[test]
    fn relative_or_empty_variables_are_ignored() {
        let d = dirs(&[
            ("HOME", "/h"),
            ("XDG_CONFIG_HOME", "relative"),
            ("XDG_STATE_HOME", ""),
            ("XDG_RUNTIME_DIR", "run"),
        ]);
        assert_eq!(d.config_home, Some("/h/.config".into()));
        assert_eq!(d.state_home, Some("/h/.local/state".into()));
        assert!(d.runtime.starts_with(std::env::temp_dir()));
    }

    #[test]
    fn no_home_and_no_variables_means_no_user_dirs() {
        let d = dirs(&[]);
        assert_eq!(d.config_file(), None);
        assert_eq!(d.token(), None);
        assert_eq!(d.models_dir(), None);
        let d = dirs(&[("HOME", "/h"), ("XDG_DATA_HOME", "/data")]);
        assert_eq!(d.models_dir(), Some("/data/utter/models".into()));
    }
}
