//! What the rules plugin's test binaries share: the real `utter-rules` binary started over
//! stdio in a private home (no user profiles, no niri config, no catalog or search engine
//! from the environment), so nothing of the machine running the tests plans.

use std::ffi::OsString;
use std::path::Path;
use utter_protocol::testkit::{SpawnOptions, TestPlugin};

/// The router binary of this build.
pub const BIN: &str = env!("CARGO_BIN_EXE_utter-rules");

/// Start the router in `home`, with the applications of `data_dir/applications` installed
/// (`None`: none at all).
///
/// # Panics
/// When the binary does not start and answer its handshake.
pub async fn start_router(home: &tempfile::TempDir, data_dir: Option<&Path>) -> TestPlugin {
    let dir = |sub: &str| {
        let path = home.path().join(sub);
        std::fs::create_dir_all(&path).expect("mkdir");
        path.into_os_string()
    };
    let data_dirs = data_dir.map_or_else(|| dir("sys"), |d| d.as_os_str().to_owned());
    let env: Vec<(OsString, OsString)> = vec![
        ("HOME".into(), dir("home")),
        ("XDG_CONFIG_HOME".into(), dir("config")),
        ("XDG_DATA_HOME".into(), dir("data")),
        ("XDG_DATA_DIRS".into(), data_dirs),
        ("NIRI_CONFIG".into(), "".into()),
        ("UTTER_SITES".into(), "".into()),
        ("UTTER_SEARCH_URL".into(), "".into()),
    ];
    let options = SpawnOptions {
        env,
        ..SpawnOptions::default()
    };
    TestPlugin::start(&[BIN.into()], options)
        .await
        .unwrap_or_else(|e| panic!("utter-rules starts: {e}"))
}
