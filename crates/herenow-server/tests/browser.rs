//! The who's-online page in a real browser.
//!
//! Starts the real server in-process on a free 127.0.0.1 port, opens
//! `/?space=browser-test` in Debian's headless Chromium (driven by npm
//! `playwright-core` from `tests/browser/drive.js`), then sends a heartbeat
//! and a leave for `ada` through the HTTP API and checks that the page shows
//! and then drops her, live, without a reload. It also checks the chart's SVG
//! and takes a screenshot.
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
use std::sync::mpsc;
use std::time::{Duration, Instant};

use herenow_server::Config;

/// How long the page may take to do each step.
const STEP: Duration = Duration::from_secs(15);

#[test]
fn the_page_shows_members_join_and_leave_live() {
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

    let scratch = Scratch::new();
    let screenshot = scratch.0.join("page.png");

    // The server, on its own runtime so this thread may block on the browser.
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
    let server = runtime.spawn(herenow_server::run(listener, Config::default(), async {
        let _ = stopped.await;
    }));
    wait_until_serving(addr);

    let mut browser = Browser::start(
        &dir,
        &chromium,
        addr,
        &screenshot,
        &scratch.0.join("profile"),
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

    let png = std::fs::read(&screenshot).expect("the screenshot was written");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "the screenshot is a real PNG ({} bytes)",
        png.len()
    );
    // Kept only where asked for: the scratch directory goes away.
    if let Some(keep) = std::env::var_os("HERENOW_BROWSER_SCREENSHOT") {
        std::fs::copy(&screenshot, &keep).expect("copy the screenshot");
        eprintln!("screenshot: {}", PathBuf::from(keep).display());
    }

    let _ = stop.send(());
    let result = runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(10), server).await })
        .expect("the server shuts down")
        .expect("the server task does not panic");
    result.expect("the server stops cleanly");
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
    fn start(dir: &Path, chromium: &Path, addr: SocketAddr, shot: &Path, profile: &Path) -> Self {
        let mut child = Command::new("node")
            .arg(dir.join("drive.js"))
            .arg(format!("http://{addr}"))
            .arg(shot)
            .arg(profile)
            .env("HERENOW_CHROMIUM", chromium)
            .current_dir(dir)
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
