//! herenow-testkit: support shared by the tests of herenow's crates (a
//! dev-dependency only, never published).
//!
//! Real `redis-server` processes: a standalone server and a cluster of
//! three masters, with or without a replica each ([`RedisCluster`], in
//! `cluster.rs`), from Debian's `redis-server`, on free ports, in temporary
//! directories, killed and cleaned up on drop. Never the Redis that may be
//! running on 127.0.0.1:6379.
//!
//! Another server speaking the same protocol (Valkey's `valkey-server`
//! and `valkey-cli`) runs the same tests when `HERENOW_TEST_REDIS_SERVER`
//! and `HERENOW_TEST_REDIS_CLI` name its binaries ([`server_binary`],
//! [`cli_binary`]). Only the tests read these variables: herenow's
//! library crates take the store's URL and nothing else.

#![forbid(unsafe_code)]

mod cluster;

pub use cluster::{ClusterNode, RedisCluster};

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static DIRS: AtomicU64 = AtomicU64::new(0);

/// Ports this process already handed out: tests start servers in parallel,
/// and a port released by `free_port` could otherwise be picked twice.
static TAKEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());

/// The server binary the tests start: `HERENOW_TEST_REDIS_SERVER` when
/// set (a path to `valkey-server`, say), else `redis-server` on the PATH.
pub fn server_binary() -> String {
    binary_from("HERENOW_TEST_REDIS_SERVER", "redis-server")
}

/// The command-line client that forms clusters: `HERENOW_TEST_REDIS_CLI`
/// when set (a path to `valkey-cli`), else `redis-cli` on the PATH.
pub fn cli_binary() -> String {
    binary_from("HERENOW_TEST_REDIS_CLI", "redis-cli")
}

fn binary_from(var: &str, default: &str) -> String {
    std::env::var(var)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_owned())
}

fn require(binary: &str) {
    let probe = if binary == "openssl" {
        "version"
    } else {
        "--version"
    };
    let found = Command::new(binary)
        .arg(probe)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "{binary} not found: these tests start their own Redis (with TLS: \
         certificates from openssl); install it: apt-get install -y redis-server openssl"
    );
}

/// A free port below 55535 (a cluster node's bus listens on port + 10000),
/// with the bus port free too when `bus` is set.
fn free_port(bus: bool) -> u16 {
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let port = l.local_addr().expect("local address").port();
        drop(l);
        if port >= 55535 || port == 6379 {
            continue;
        }
        if bus && TcpListener::bind(("127.0.0.1", port + 10000)).is_err() {
            continue;
        }
        let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
        if taken.contains(&port) {
            continue;
        }
        taken.push(port);
        return port;
    }
}

fn temp_dir() -> PathBuf {
    let n = DIRS.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("herenow-redis-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a temporary directory");
    dir
}

/// Makes `ca.pem` and a certificate for 127.0.0.1 it signs (`server.pem`,
/// `server.key`) in `dir`, with the `openssl` command. P-256 keys: quick to
/// make.
fn make_certificates(dir: &Path) {
    require("openssl");
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .expect("write the certificate extensions");
    let ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    let steps = [
        (
            format!("req -x509 {ec} -keyout ca.key -out ca.pem -days 2"),
            Some("/CN=herenow test CA"),
        ),
        (
            format!("req {ec} -keyout server.key -out server.csr"),
            Some("/CN=127.0.0.1"),
        ),
        (
            "x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem \
             -days 2 -extfile server.ext"
                .to_owned(),
            None,
        ),
    ];
    for (args, subject) in &steps {
        let mut args: Vec<&str> = args.split_whitespace().collect();
        args.extend(subject.iter().flat_map(|s| ["-subj", *s]));
        let out = Command::new("openssl")
            .args(&args)
            .current_dir(dir)
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Sends one inline command and returns the raw reply: a simple reply, an
/// error, a number or a bulk string read to its end (`INFO`, `CLUSTER
/// NODES`); of other replies (arrays), what the first read brought.
pub fn raw_command(port: u16, cmd: &str) -> std::io::Result<String> {
    let mut s =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(format!("{cmd}\r\n").as_bytes())?;
    let mut reply = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = s.read(&mut buf)?;
        reply.extend_from_slice(&buf[..n]);
        if n == 0 || reply_complete(&reply) {
            return Ok(String::from_utf8_lossy(&reply).into_owned());
        }
    }
}

/// Whether `reply` holds a whole reply of the kinds [`raw_command`] reads
/// to the end; any other kind counts as whole after one read.
fn reply_complete(reply: &[u8]) -> bool {
    let Some(eol) = reply.windows(2).position(|w| w == b"\r\n") else {
        return false;
    };
    match reply[0] {
        b'$' => {
            let len: i64 = std::str::from_utf8(&reply[1..eol])
                .ok()
                .and_then(|l| l.parse().ok())
                .unwrap_or(-1);
            len < 0 || reply.len() >= eol + 2 + len as usize + 2
        }
        _ => true,
    }
}

/// One `redis-server` process.
pub struct RedisServer {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
    cluster: bool,
    /// A cluster node's `cluster-node-timeout`: how long a node may stay
    /// silent before the others count it as failing.
    node_timeout: Duration,
    /// With TLS: the TLS port (the plain `port` stays open for the test's
    /// own checks).
    tls_port: Option<u16>,
}

impl RedisServer {
    /// A standalone server on a free port, answering `PING` before this
    /// returns (it panics if the server will not start).
    pub fn standalone() -> Self {
        Self::start_with(false, false, cluster::DEFAULT_NODE_TIMEOUT)
    }

    /// A standalone server that also speaks TLS, with a certificate for
    /// 127.0.0.1 signed by a CA made for this server alone
    /// ([`ca_file`](Self::ca_file)). Needs the `openssl` command.
    pub fn standalone_tls() -> Self {
        Self::start_with(false, true, cluster::DEFAULT_NODE_TIMEOUT)
    }

    fn start_with(cluster: bool, tls: bool, node_timeout: Duration) -> Self {
        require(&server_binary());
        let port = free_port(cluster);
        let dir = temp_dir();
        let tls_port = tls.then(|| {
            make_certificates(&dir);
            free_port(false)
        });
        let mut s = RedisServer {
            child: None,
            port,
            dir,
            cluster,
            node_timeout,
            tls_port,
        };
        s.spawn();
        s
    }

    /// `rediss://127.0.0.1:TLS_PORT`, for a server started with TLS.
    pub fn tls_url(&self) -> String {
        let port = self.tls_port.expect("a server started with TLS");
        format!("rediss://127.0.0.1:{port}")
    }

    /// The PEM file of the CA that signed a TLS server's certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    fn spawn(&mut self) {
        let port = self.port.to_string();
        let dir = self.dir.to_string_lossy().into_owned();
        let log = self.dir.join("redis.log").to_string_lossy().into_owned();
        let mut cmd = Command::new(server_binary());
        cmd.args(["--port", &port, "--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "no", "--dir", &dir, "--logfile", &log]);
        if let Some(tls) = self.tls_port {
            let file = |name: &str| self.dir.join(name).to_string_lossy().into_owned();
            cmd.args(["--tls-port", &tls.to_string()])
                .args(["--tls-cert-file", &file("server.pem")])
                .args(["--tls-key-file", &file("server.key")])
                .args(["--tls-ca-cert-file", &file("ca.pem")])
                .args(["--tls-auth-clients", "no"]);
        }
        if self.cluster {
            let conf = self.dir.join("nodes.conf").to_string_lossy().into_owned();
            cmd.args(["--cluster-enabled", "yes", "--cluster-config-file", &conf])
                .args([
                    "--cluster-node-timeout",
                    &self.node_timeout.as_millis().to_string(),
                ]);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", server_binary()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if raw_command(self.port, "PING").is_ok_and(|r| r.starts_with("+PONG")) {
                return;
            }
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                panic!("redis-server exited with {status}; log:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} not ready within 10 s; log:\n{}",
                self.port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The server's log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the process (`Child::kill`: SIGKILL) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port (data is not kept: no persistence).
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the process (SIGKILL: no shutdown, no goodbye to clients)
    /// and waits for it to be gone: [`stop`](Self::stop), under the name
    /// the crash tests say it by.
    pub fn kill(&mut self) {
        self.stop();
    }

    /// Stops the process with SIGSTOP (it keeps its connections open and
    /// answers nothing, the worst kind of slow) and returns once every one
    /// of its threads has stopped: see [`wait_stopped`].
    pub fn pause(&self) {
        let pid = self.pid().expect("redis-server runs");
        send_signal(pid, "-STOP");
        assert!(
            wait_stopped(pid, Duration::from_secs(5)),
            "redis-server (pid {pid}) did not stop within 5 s of SIGSTOP"
        );
    }

    /// Continues the process after [`RedisServer::pause`] (SIGCONT).
    pub fn resume(&self) {
        send_signal(self.pid().expect("redis-server runs"), "-CONT");
    }

    /// Starts a server that was stopped or killed again on the same port.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "still running");
        self.spawn();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Sends `signal` (`-STOP`, `-CONT`, …) to `pid` with kill(1).
pub fn send_signal(pid: u32, signal: &str) {
    let sent = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(sent, "kill {signal} {pid}");
}

/// True once every thread of `pid` shows state `T` (stopped) in Linux's
/// `/proc/PID/task/TID/stat`, within `timeout`; without `/proc`, true after
/// 100 ms.
///
/// kill(2) returns when SIGSTOP is queued, not when it has taken effect:
/// each thread of a busy process stops when it next enters the kernel, so
/// a request sent at once can still be answered by a thread that has not
/// stopped yet. A test that asserts on what a stopped process no longer
/// does waits here first.
pub fn wait_stopped(pid: u32, timeout: Duration) -> bool {
    let dir = PathBuf::from(format!("/proc/{pid}/task"));
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        let Ok(tasks) = std::fs::read_dir(&dir) else {
            std::thread::sleep(Duration::from_millis(100));
            return true;
        };
        let stopped = tasks.flatten().all(|task| {
            // A thread that ended meanwhile has no stat: it answers nothing.
            std::fs::read_to_string(task.path().join("stat")).map_or(true, |stat| {
                stat.rfind(')')
                    .is_some_and(|i| stat[i..].starts_with(") T"))
            })
        });
        if stopped {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}
