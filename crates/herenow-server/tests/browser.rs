//! The who's-online page in a real browser.
//!
//! Each test starts the real server in-process on a free 127.0.0.1 port and
//! drives Debian's headless Chromium with npm `playwright-core`:
//!
//! - `tests/browser/drive.js` opens `/?space=browser-test`; the test sends a
//!   heartbeat and a leave for `ada` through the HTTP API and checks that
//!   the page shows and then drops her, live, without a reload. It also
//!   checks the chart's SVG and takes a screenshot.
//! - `tests/browser/two_users.js` opens two pages as Alice and Bob (the
//!   page joins with `?as=NAME` over `/v1/ws` and `/client.js`); each sees
//!   the other join, and Alice sees Bob leave when his page closes.
//! - `tests/browser/watch_friends.js` opens Alice's page, which watches
//!   her friends (issue 9): Bob's dot turns green when his page opens,
//!   yellow when the store's clock (a `ManualClock` the test moves) passes
//!   `online_ms`, grey with "last seen" when his page closes.
//! - `tests/browser/resync.js` blocks a subscribed page's main thread
//!   during a join storm (issue 15): the page lags, takes the `resync`
//!   snapshot and ends with exactly the room, never cut.
//! - `tests/browser/client_test.js` (no browser: `node --test`) checks
//!   `/client.js`'s reconnect, token, ping and watch logic with a
//!   scripted socket.
//!
//! What it needs installed (the test fails with these instructions if not):
//!
//! ```sh
//! apt-get update && apt-get install -y chromium nodejs npm
//! npm ci --prefix crates/herenow-server/tests/browser
//! ```
//!
//! `HERENOW_CHROMIUM` overrides the browser path (default
//! `/usr/bin/chromium`); `HERENOW_BROWSER_SCREENSHOT=/some/file.png` keeps
//! the screenshot. Only `playwright-core` is used: npm `playwright` and
//! `puppeteer` try to download a browser of their own, which fails offline.
//! The whole test takes a few seconds; every wait in it is bounded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use herenow_core::{ManualClock, PresenceStore, SpaceConfig};
use herenow_memory::MemoryStore;
use herenow_server::{AppState, Backend, Config};

/// How long the page may take to do each step.
const STEP: Duration = Duration::from_secs(15);

/// What every browser test needs: the browser, node with playwright-core,
/// and a scratch directory.
struct Setup {
    chromium: PathBuf,
    dir: PathBuf,
    scratch: Scratch,
}

impl Setup {
    fn new() -> Self {
        let chromium = std::env::var_os("HERENOW_CHROMIUM")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
        assert!(
            chromium.exists(),
            "{} not found: install chromium (apt-get install chromium)",
            chromium.display()
        );
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
        assert!(
            Command::new("node").arg("--version").output().is_ok(),
            "node not found: install Node.js (apt-get install nodejs npm)"
        );
        assert!(
            dir.join("node_modules/playwright-core").is_dir(),
            "playwright-core is not installed: run `npm ci --prefix {}`",
            dir.display()
        );
        Self {
            chromium,
            dir,
            scratch: Scratch::new(),
        }
    }

    /// Starts a node script of `tests/browser` with these arguments.
    fn browser(&self, script: &str, args: &[&std::ffi::OsStr]) -> Browser {
        Browser::start(&self.dir.join(script), &self.chromium, args)
    }
}

/// The real server on a free 127.0.0.1 port, on its own runtime so the test
/// thread may block on the browser.
struct Server {
    runtime: tokio::runtime::Runtime,
    addr: SocketAddr,
    /// The store, when the test built it (to tick it).
    store: Option<Arc<dyn PresenceStore>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), herenow_server::ServerError>>>,
}

impl Server {
    /// The server as the binary runs it, on the system clock.
    fn start() -> Self {
        Self::start_on(None, Config::default())
    }

    /// The server over a memory store whose time is `clock`, which only
    /// the test moves.
    fn start_with_clock(clock: &ManualClock, config: Config) -> Self {
        let store = Arc::new(MemoryStore::new(
            Arc::new(clock.clone()),
            SpaceConfig::default(),
        ));
        Self::start_on(Some(store), config)
    }

    fn start_on(store: Option<Arc<MemoryStore>>, config: Config) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async {
            let _ = stopped.await;
        };
        let (task, store) = match store {
            None => (
                runtime.spawn(herenow_server::run(listener, config, shutdown)),
                None,
            ),
            Some(memory) => {
                let state = AppState::new(Backend::memory(memory), &config);
                let store = state.store().clone();
                let task = runtime.spawn(herenow_server::serve(listener, config, state, shutdown));
                (task, Some(store))
            }
        };
        wait_until_serving(addr);
        Self {
            runtime,
            addr,
            store,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Waits, within a minute, until every live connection of `user` in
    /// `space` lingers in its grace (its socket closed without a goodbye).
    fn wait_lingering(&self, space: &str, user: &str) {
        let store = self.store.as_ref().expect("a store the test built");
        let space = herenow_core::SpaceName::new(space).unwrap();
        let member = herenow_core::MemberKey::user(herenow_core::MemberId::new(user).unwrap());
        let started = std::time::Instant::now();
        loop {
            let conns = self
                .runtime
                .block_on(
                    store
                        .live_connections()
                        .unwrap()
                        .connections(&space, std::slice::from_ref(&member)),
                )
                .unwrap();
            if !conns[0].is_empty() && conns[0].iter().all(|c| c.lingering) {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{user}'s connections never went to the grace: {conns:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// One round of the store's maintenance (away and leave by time) now,
    /// rather than at the background ticker's next round.
    fn tick(&self) {
        let store = self.store.as_ref().expect("a store the test built");
        self.runtime
            .block_on(store.tick())
            .expect("the store ticks");
    }

    fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the server and checks that it stopped cleanly.
    fn stop(mut self) {
        let _ = self.stop.take().expect("running").send(());
        let task = self.task.take().expect("running");
        let result = self
            .runtime
            .block_on(async { tokio::time::timeout(Duration::from_secs(10), task).await })
            .expect("the server shuts down")
            .expect("the server task does not panic");
        result.expect("the server stops cleanly");
    }
}

/// Checks a screenshot, and keeps it where `HERENOW_BROWSER_SCREENSHOT`
/// asks (with `name` added), since the scratch directory goes away.
fn check_screenshot(path: &Path, name: &str) {
    let png = std::fs::read(path).expect("the screenshot was written");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "the screenshot is a real PNG ({} bytes)",
        png.len()
    );
    if let Some(keep) = std::env::var_os("HERENOW_BROWSER_SCREENSHOT") {
        let keep = PathBuf::from(keep).with_extension(format!("{name}.png"));
        std::fs::copy(path, &keep).expect("copy the screenshot");
        eprintln!("screenshot: {}", keep.display());
    }
}

#[test]
fn the_page_shows_members_join_and_leave_live() {
    let setup = Setup::new();
    let screenshot = setup.scratch.0.join("page.png");
    let server = Server::start();
    let addr = server.addr;
    let base = server.base();
    let profile = setup.scratch.0.join("profile");
    let mut browser = setup.browser(
        "drive.js",
        &[base.as_ref(), screenshot.as_ref(), profile.as_ref()],
    );
    browser.expect("connected");

    let (status, body) = post(
        addr,
        "/v1/spaces/browser-test/heartbeat",
        r#"{"id":"ada","kind":"user","meta":{"name":"Ada Lovelace"}}"#,
    );
    assert_eq!(status, 200, "heartbeat answered {body}");
    assert!(body.contains(r#""joined":1"#), "heartbeat answered {body}");
    browser.send("joined");
    browser.expect("appeared");

    let (status, body) = post(
        addr,
        "/v1/spaces/browser-test/leave",
        r#"{"members":[{"id":"ada"}]}"#,
    );
    assert_eq!(status, 200, "leave answered {body}");
    assert!(body.contains(r#""left":1"#), "leave answered {body}");
    browser.send("left");
    browser.expect("disappeared");
    browser.expect("done");
    browser.finish();
    check_screenshot(&screenshot, "page");
    server.stop();
}

/// Issue 4's browser test: two pages as two users over the WebSocket; each
/// sees the other join, and Alice sees Bob leave when his page closes.
#[test]
fn two_pages_as_two_users_see_each_other_come_and_go() {
    let setup = Setup::new();
    let screenshot = setup.scratch.0.join("two-users.png");
    let server = Server::start();
    let base = server.base();
    let mut browser = setup.browser("two_users.js", &[base.as_ref(), screenshot.as_ref()]);
    browser.expect("alice-sees-bob");
    browser.expect("bob-sees-alice");
    // Bob's socket closed: he left once his grace was over.
    browser.expect("alice-sees-bob-leave");
    browser.expect("done");
    browser.finish();
    // Both browsers are closed now: their sockets closed, so nobody is left
    // behind as a ghost once the grace (5 s) is over.
    let started = std::time::Instant::now();
    loop {
        let (status, body) = request(
            server.addr,
            "GET",
            "/v1/spaces/ws-browser-test/online?kind=all",
            None,
        )
        .expect("the API answers");
        assert_eq!(status, 200, "{body}");
        if body.contains(r#""members":[]"#) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "after both pages closed and the grace, nobody is online: {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    check_screenshot(&screenshot, "two-users");
    server.stop();
}

/// Issue 9's browser test: Alice's page watches her friends Bob and Cy.
/// Bob's page opens: his dot on hers turns green; the store's clock moves
/// past `online_ms`: yellow; his page closes and his grace ends: grey,
/// with "last seen".
/// Cy, never seen, stays grey with no last seen. The clock starts in 2023,
/// so a page reading last-seen times on the browser's clock instead of
/// the server's (from `welcome`) would say "… days ago".
#[test]
fn a_page_watching_friends_shows_them_online_away_and_gone() {
    let setup = Setup::new();
    let screenshot = setup.scratch.0.join("watch-friends.png");
    let clock = ManualClock::new(1_700_000_000_000);
    // A TTL longer than the clock's jump, and pings far apart: a ping
    // would make Bob online again, and a connection outlived by the jump
    // would expire (offline, not away).
    let config = Config {
        ws_ttl: Duration::from_secs(600),
        ws_ping: Duration::from_secs(300),
        ..Config::default()
    };
    let server = Server::start_with_clock(&clock, config);
    let (status, body) = request(
        server.addr,
        "PUT",
        "/v1/friends/alice",
        Some(r#"{"friends":["bob"]}"#),
    )
    .expect("the API answers");
    assert_eq!(status, 200, "{body}");

    let base = server.base();
    let mut browser = setup.browser("watch_friends.js", &[base.as_ref(), screenshot.as_ref()]);
    browser.expect("watching");
    browser.expect("bob-online");
    clock.advance(Duration::from_millis(
        SpaceConfig::default().online_ms + 1_000,
    ));
    server.tick();
    browser.send("idle");
    browser.expect("bob-away");
    browser.expect("bob-closed");
    // His page closed without a goodbye: no change until his grace ends.
    server.wait_lingering("watch-browser-test", "bob");
    clock.advance(Duration::from_millis(
        SpaceConfig::default().grace_ms + 1_000,
    ));
    server.tick();
    browser.send("graced");
    browser.expect("bob-offline");
    browser.expect("done");
    browser.finish();
    let (status, body) = request(server.addr, "GET", "/v1/friends/alice", None).expect("answers");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(r#""friends":["bob","cy"]"#),
        "the page added cy: {body}"
    );
    check_screenshot(&screenshot, "watch-friends");
    server.stop();
}

/// Issue 15's browser test: a page subscribed to a room is busy (its main
/// thread blocked, so Chromium stops reading the socket) while 9,000
/// members join and 500 leave. The server lags it instead of cutting it;
/// once the page runs again, `/client.js` takes the `resync` snapshot and
/// its map is exactly the room's 8,500 members.
#[test]
fn a_busy_page_catches_up_after_a_join_storm() {
    let setup = Setup::new();
    let clock = ManualClock::new(1_700_000_000_000);
    let server = Server::start_with_clock(&clock, Config::default());
    let base = server.base();
    let mut browser = setup.browser("resync.js", &[base.as_ref(), "8500".as_ref()]);
    browser.expect("subscribed");
    browser.expect("blocking");
    let store = server.store.clone().expect("a store the test built");
    server.runtime.block_on(async {
        let storm = herenow_core::SpaceName::new("storm").unwrap();
        // 800 bytes of metadata each: about 9 MB, more than the socket's
        // buffers and the server's queue hold.
        let meta =
            herenow_core::Metadata::from_json(&format!(r#"{{"pad":"{}"}}"#, "x".repeat(800)))
                .unwrap();
        let key = |i: usize| {
            herenow_core::MemberKey::user(herenow_core::MemberId::new(&format!("m{i}")).unwrap())
        };
        for chunk in (0..9_000).collect::<Vec<_>>().chunks(500) {
            let beats: Vec<herenow_core::Heartbeat> = chunk
                .iter()
                .map(|&i| herenow_core::Heartbeat {
                    member: key(i),
                    at_ms: None,
                    meta: Some(meta.clone()),
                })
                .collect();
            store.heartbeat(&storm, &beats).await.unwrap();
        }
        let leaving: Vec<_> = (0..500).map(key).collect();
        store.leave(&storm, &leaving).await.unwrap();
    });
    browser.send("stormed");
    browser.expect("exact");
    browser.finish();
    server.stop();
}

/// `/client.js`'s connection logic (reconnect with backoff and jitter,
/// restoring joins and watches, refreshing refused tokens, dead-socket
/// detection, pings on visibility, snapshot pages and metas, watching
/// pages, status changes and resyncs) against a scripted WebSocket and
/// fake timers: `node --test tests/browser/client_test.js`.
#[test]
fn client_js_unit_tests() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    let out = Command::new("node")
        .args(["--test", "client_test.js"])
        .current_dir(&dir)
        .output()
        .expect("node not found: install Node.js (apt-get install nodejs npm)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("# fail 0"),
        "client.js tests failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits for `/healthz` to answer, so the browser never races the listener.
fn wait_until_serving(addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok((200, _)) = request(addr, "GET", "/healthz", None) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the server never answered /healthz"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn post(addr: SocketAddr, path: &str, json: &str) -> (u16, String) {
    request(addr, "POST", path, Some(json)).expect("the API answers")
}

/// A one-shot HTTP/1.1 request: enough for a test, and no client crate.
fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    json: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let body = json.unwrap_or("");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if json.is_some() {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// The node script driving Chromium, and the lines it prints.
struct Browser {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
}

impl Browser {
    fn start(script: &Path, chromium: &Path, args: &[&std::ffi::OsStr]) -> Self {
        let mut child = Command::new("node")
            .arg(script)
            .args(args)
            .env("HERENOW_CHROMIUM", chromium)
            .current_dir(script.parent().expect("the script's folder"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("node starts");
        let stdin = child.stdin.take();
        let lines = spawn_reader(child.stdout.take().expect("piped stdout"));
        let stderr = spawn_reader(child.stderr.take().expect("piped stderr"));
        Self {
            child,
            stdin,
            lines,
            stderr,
        }
    }

    /// Waits for the script to print `want`; on anything else, fails with
    /// what the script said on stderr.
    fn expect(&mut self, want: &str) {
        match self.lines.recv_timeout(STEP) {
            Ok(line) if line == want => {}
            Ok(line) => panic!(
                "the browser said {line:?}, expected {want:?}\n{}",
                self.errors()
            ),
            Err(_) => panic!(
                "the browser did not say {want:?} within {STEP:?}\n{}",
                self.errors()
            ),
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{line}").expect("the browser script is listening");
    }

    fn finish(&mut self) {
        self.stdin = None;
        let deadline = Instant::now() + STEP;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait on node") {
                assert!(
                    status.success(),
                    "the browser script failed\n{}",
                    self.errors()
                );
                return;
            }
            assert!(Instant::now() < deadline, "the browser script did not exit");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn errors(&mut self) -> String {
        // Give the script a moment to print why it failed and exit.
        let deadline = Instant::now() + Duration::from_secs(3);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let text: Vec<String> = self.stderr.try_iter().collect();
        format!("browser script stderr:\n{}", text.join("\n"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Never leave node (and its Chromium) running after a failed test.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn spawn_reader(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// A fresh directory for the browser profile and the screenshot, removed at
/// the end unless the test failed (then it is kept to look at).
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir =
            std::env::temp_dir().join(format!("herenow-browser-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
