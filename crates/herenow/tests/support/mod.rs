//! What the binary's end-to-end tests share: the binary with a clean
//! environment, and a running `herenow serve` on a free port.
//!
//! Every server is started with `--listen 127.0.0.1:0` and the port is read
//! from the line it prints; the environment is scrubbed of `HERENOW_*` and
//! `RUST_LOG` so a developer's shell cannot change results.

// Each test file uses part of this.
#![allow(dead_code)]

pub mod pusher_node;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_herenow");

/// How long a server may take to print its address and answer /healthz,
/// and to exit after SIGTERM. Generous: the machine is shared and slow
/// under parallel builds; a healthy run takes milliseconds.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// A fresh directory under cargo's per-target temporary directory, named
/// for the test and unique to this run.
pub fn temp_dir(name: &str) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("herenow-{name}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Milliseconds since the UNIX epoch, by the system clock (the server's
/// clock in these tests).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The binary with a clean environment.
pub fn herenow() -> Command {
    let mut cmd = Command::new(BIN);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("HERENOW_") {
            cmd.env_remove(&key);
        }
    }
    cmd.env_remove("RUST_LOG");
    cmd.stdin(Stdio::null());
    cmd
}

/// A running `herenow serve`, killed on drop if the test did not stop it.
pub struct Server {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    stderr: Arc<Mutex<String>>,
    /// The thread draining stderr; joined after exit so the log is whole.
    stderr_reader: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Starts `herenow serve --listen 127.0.0.1:0 EXTRA…` and waits, within
    /// [`DEADLINE`], until it answers /healthz.
    pub fn start(extra: &[&str]) -> Server {
        Self::start_with_env(extra, &[])
    }

    pub fn start_with_env(extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut cmd = herenow();
        cmd.args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn herenow serve");

        // Drain stderr (the log) so the server never blocks on a full pipe,
        // and keep it to explain a failure.
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().unwrap();
        let sink = Arc::clone(&stderr);
        let stderr_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });

        // The first stdout line names the address; read it on a thread so
        // a server that never prints cannot hang the test.
        let out_pipe = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(out_pipe).lines();
            let _ = tx.send(lines.next());
            // Keep reading so later writes never fail with a closed pipe.
            for _ in lines {}
        });
        let mut server = Server {
            child: Some(child),
            url: String::new(),
            stderr,
            stderr_reader: Some(stderr_reader),
        };
        let line = match rx.recv_timeout(DEADLINE) {
            Ok(Some(Ok(line))) => line,
            other => panic!(
                "herenow serve printed no address ({other:?}); stderr:\n{}",
                server.log()
            ),
        };
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .trim_end_matches('/')
            .to_owned();
        server.url = url;
        server.wait_healthy();
        server
    }

    pub fn addr(&self) -> SocketAddr {
        self.url.trim_start_matches("http://").parse().unwrap()
    }

    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Polls /healthz until it answers 200, within [`DEADLINE`].
    pub fn wait_healthy(&self) {
        let started = Instant::now();
        loop {
            if healthz(self.addr()) {
                return;
            }
            assert!(
                started.elapsed() < DEADLINE,
                "{} never answered /healthz; stderr:\n{}",
                self.url,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Runs the client against this server: `herenow ARGS… --server URL`.
    pub fn cli(&self, args: &[&str]) -> Output {
        herenow()
            .args(args)
            .args(["--server", &self.url])
            .output()
            .expect("run herenow")
    }

    /// Like [`Server::cli`], and asserts success; the standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(
            out.status.success(),
            "herenow {args:?} failed with {:?}: {}\nserver log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `--json` output, parsed.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        let out = self.ok(&args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the server runs").id()
    }

    /// Waits, within [`DEADLINE`], for a process something else stopped
    /// (a test's script signalled it by [`Server::pid`]); its exit status.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("the server ran");
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                if let Some(reader) = self.stderr_reader.take() {
                    reader.join().unwrap();
                }
                return status;
            }
            assert!(
                started.elapsed() < DEADLINE,
                "herenow serve did not exit; stderr:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Kills the process with SIGKILL (no shutdown: no detach, no close
    /// frames, no flush) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends SIGHUP (reload the config file) and waits, within
    /// [`DEADLINE`], for the line that tells how the reload went (reloaded,
    /// refused, or nothing to reload), which the server logs last; what
    /// it logged since the signal.
    pub fn hang_up(&self) -> String {
        let told = |log: &str| {
            log.contains("reloaded ")
                || log.contains("reload of ")
                || log.contains("nothing to reload")
        };
        let from = self.log().len();
        let sent = Command::new("kill")
            .args(["-HUP", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -HUP");
        let started = Instant::now();
        loop {
            let since = self.log()[from..].to_owned();
            if told(&since) {
                return since;
            }
            assert!(
                started.elapsed() < DEADLINE,
                "no reload told in the log after SIGHUP:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM and waits, within [`DEADLINE`], for the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        self.stop("-TERM")
    }

    /// Sends `signal` (`-TERM`, `-INT`) and waits, within [`DEADLINE`],
    /// for the exit status.
    pub fn stop(&mut self, signal: &str) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        let pid = child.id().to_string();
        let sent = Command::new("kill").args([signal, &pid]).status().unwrap();
        assert!(sent.success(), "kill {signal} {pid}");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        match rx.recv_timeout(DEADLINE) {
            Ok(status) => {
                // The child is gone, so its stderr is at end of file.
                if let Some(reader) = self.stderr_reader.take() {
                    reader.join().unwrap();
                }
                status.unwrap()
            }
            Err(_) => {
                let _ = Command::new("kill").args(["-KILL", &pid]).status();
                panic!(
                    "herenow serve did not exit after kill {signal}; stderr:\n{}",
                    self.log()
                );
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One `GET /healthz`; true when it answers 200.
pub fn healthz(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200")
}

/// A command's standard error, as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A WebSocket to `server` with `token` in the URL; the first message (the
/// welcome, or the close code).
pub fn ws_with_token(
    server: &Server,
    token: &str,
) -> (
    tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>,
    Result<Value, Option<u16>>,
) {
    let url = format!("ws://{}/v1/ws?token={token}", server.addr());
    let (mut ws, _) = tungstenite::connect(url).expect("the upgrade failed");
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(DEADLINE)).unwrap();
    }
    let first = ws_read(&mut ws);
    (ws, first)
}

/// The next JSON message, or the close code.
pub fn ws_read(
    ws: &mut tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>,
) -> Result<Value, Option<u16>> {
    loop {
        match ws.read() {
            Ok(tungstenite::Message::Text(t)) => {
                return Ok(serde_json::from_str(t.as_str()).unwrap());
            }
            Ok(tungstenite::Message::Close(frame)) => {
                return Err(frame.map(|f| u16::from(f.code)));
            }
            Ok(_) => continue,
            Err(e) => panic!("reading the socket: {e}"),
        }
    }
}

/// `GET url`, its answer's body as JSON. Panics (failing the test) when
/// the server cannot be reached or the body is not JSON.
pub async fn get_json(http: &reqwest::Client, url: &str) -> Value {
    let answer = http
        .get(url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    answer
        .json()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
}

/// `POST url` with `body` as JSON, the answer's body as JSON; panics as
/// [`get_json`] does.
pub async fn post_json(http: &reqwest::Client, url: &str, body: &Value) -> Value {
    let answer = http
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    answer
        .json()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"))
}

/// A local port that refuses connections for as long as the value lives:
/// the local end of an open connection, so nothing listens on it and no
/// other test is handed it meanwhile (a port bound and freed again could
/// be, and then someone would answer).
pub struct RefusedPort {
    pub port: u16,
    _held: (std::net::TcpListener, TcpStream, TcpStream),
}

impl RefusedPort {
    pub fn new() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (theirs, _) = listener.accept().unwrap();
        Self {
            port: ours.local_addr().unwrap().port(),
            _held: (listener, ours, theirs),
        }
    }
}
