//! The layout the compiler keeps (ARCHITECTURE.md): the core names no door and links no
//! desktop library, and the runner binary links no audio library. A crate cannot name a
//! crate it does not depend on, so these dependency checks are what keep `utter-core` from
//! reaching the socket, D-Bus, the portal, evdev or PipeWire.

use std::collections::BTreeSet;
use std::process::Command;

/// The crates `package` depends on (normal and build dependencies, transitively), by name.
fn dependencies(package: &str) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--offline", "-p", package, "-e", "normal,build"])
        .args(["--prefix", "none", "--format", "{p}"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

fn offending<'a>(deps: &BTreeSet<String>, banned: &[&'a str]) -> Vec<&'a str> {
    banned
        .iter()
        .copied()
        .filter(|b| deps.contains(*b))
        .collect()
}

#[test]
fn the_core_depends_on_no_door_and_no_desktop_library() {
    let deps = dependencies("utter-core");
    assert!(deps.contains("utter-protocol"), "{deps:?}");
    let banned = [
        "utter",
        "zbus",
        "ashpd",
        "evdev",
        "pipewire",
        "pipewire-sys",
        "libspa",
        "libspa-sys",
        "sd-notify",
        "clap",
    ];
    assert_eq!(offending(&deps, &banned), Vec::<&str>::new(), "{deps:?}");
}

/// The config is a crate of its own, so that a client that edits it (the settings app) and
/// a config checker need neither the runner's core nor a plugin to read, check and write it.
#[test]
fn the_config_crate_and_the_settings_app_need_no_core() {
    let config = dependencies("utter-config");
    assert!(config.contains("utter-protocol"), "{config:?}");
    assert_eq!(
        offending(&config, &["utter-core", "utter", "zbus", "gtk4"]),
        Vec::<&str>::new(),
        "{config:?}"
    );
    let settings = dependencies("utter-settings");
    assert!(settings.contains("utter-config"), "{settings:?}");
    assert_eq!(
        offending(&settings, &["utter-core", "utter"]),
        Vec::<&str>::new(),
        "{settings:?}"
    );
}

#[test]
fn the_runner_binary_links_no_audio_library() {
    let deps = dependencies("utter");
    assert!(deps.contains("utter-core"), "{deps:?}");
    assert_eq!(
        offending(
            &deps,
            &[
                "pipewire",
                "pipewire-sys",
                "libspa",
                "libspa-sys",
                "rubato",
                "ct2rs"
            ]
        ),
        Vec::<&str>::new(),
        "{deps:?}"
    );
    // Bindings to C libraries other than libc's need -dev packages on a fresh machine.
    let sys: Vec<&String> = deps
        .iter()
        .filter(|d| d.ends_with("-sys") && !["linux-raw-sys", "libc-sys"].contains(&d.as_str()))
        .collect();
    assert!(sys.is_empty(), "system-library bindings in utter: {sys:?}");
}

/// The `crate::<module>` paths a top-level module of the crate in `src` names (the module's
/// file and its children), comments left out. Children naming their parent are part of it.
fn module_graph(src: &str) -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(src);
    let mut graph = std::collections::BTreeMap::new();
    let files = |dir: &std::path::Path| -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    out.push(path);
                }
            }
        }
        out
    };
    for entry in std::fs::read_dir(&root).expect("the crate's source") {
        let path = entry.expect("a directory entry").path();
        let Some(name) = path
            .file_stem()
            .and_then(|n| n.to_str())
            .filter(|_| path.extension().is_some_and(|e| e == "rs"))
            .map(str::to_owned)
        else {
            continue;
        };
        if name == "lib" || name == "main" {
            continue;
        }
        let mut sources = vec![path.clone()];
        sources.extend(files(&root.join(&name)));
        let mut uses = BTreeSet::new();
        for file in sources {
            let text = std::fs::read_to_string(&file).expect("readable source");
            for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for (i, _) in line.match_indices("crate::") {
                    let rest = &line[i + "crate::".len()..];
                    let module: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !module.is_empty() && module != name {
                        uses.insert(module);
                    }
                }
            }
        }
        graph.insert(name, uses);
    }
    graph
}

/// A cycle in `graph`, as the modules along it, if there is one.
fn find_cycle(graph: &std::collections::BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &std::collections::BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if graph.contains_key(next) {
                if let Some(cycle) = visit(next, graph, path, done) {
                    return Some(cycle);
                }
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_cycles_in_the_core_the_doors_or_the_plugins() {
    for src in ["core/src", "config/src", "src", "ipc/src"] {
        let graph = module_graph(src);
        assert!(graph.len() > 3, "{src}: {graph:?}");
        assert_eq!(find_cycle(&graph), None, "{src}: {graph:#?}");
    }
    // Every plugin too: a family, a client or a layer names what it builds on, never what
    // builds on it (shared types live in a leaf module of their own).
    let plugins = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins");
    let mut checked = 0;
    for entry in std::fs::read_dir(&plugins).expect("the plugins folder") {
        let src = entry.expect("a directory entry").path().join("src");
        if !src.is_dir() {
            continue;
        }
        let src = src
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .expect("below the manifest")
            .to_str()
            .expect("a UTF-8 path")
            .to_owned();
        let graph = module_graph(&src);
        assert_eq!(find_cycle(&graph), None, "{src}: {graph:#?}");
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} plugins were checked");
    // The checker itself finds a cycle when there is one.
    let mut graph = std::collections::BTreeMap::new();
    graph.insert("a".to_owned(), BTreeSet::from(["b".to_owned()]));
    graph.insert("b".to_owned(), BTreeSet::from(["a".to_owned()]));
    assert!(find_cycle(&graph).is_some());
}
