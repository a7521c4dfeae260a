//! `run` on a real loopback socket, and snapshots on disk: the refusal to
//! serve the network without keys, a serve-and-shutdown cycle that writes
//! the snapshot, restoring it, refusing a corrupt one, and shutdown ending
//! open event streams.

mod support;

use std::path::PathBuf;
use std::sync::Arc;

use herenow_core::{
    Heartbeat, ManualClock, MemberId, PresenceStore, SpaceConfig, SpaceName, Status,
};
use herenow_memory::MemoryStore;
use herenow_server::DEFAULT_SNAPSHOT_INTERVAL;
use herenow_server::{
    Backend, Config, ConfigError, ServerError, Snapshots, StoreSpec, persist, run,
};
use support::http::raw_http;
use support::{PATIENCE, T0, user_key};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("herenow-server-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn run_refuses_a_network_address_without_keys() {
    let listener = TcpListener::bind("0.0.0.0:0").await.unwrap();
    let err = run(listener, Config::default(), std::future::pending())
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServerError::Config(ConfigError::OpenOnNetwork(_))),
        "{err:?}"
    );
}

#[tokio::test]
async fn run_accepts_a_network_address_with_keys() {
    let listener = TcpListener::bind("0.0.0.0:0").await.unwrap();
    let config = Config {
        api_keys: vec!["writer-secret-1:write".parse().unwrap()],
        ..Config::default()
    };
    // Shut down at once: the point is that it starts.
    run(listener, config, async {}).await.unwrap();
}

#[tokio::test]
async fn snapshot_round_trip() {
    let dir = TempDir::new("round-trip");
    let clock = ManualClock::new(T0);
    let store = MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default());
    let lobby = SpaceName::new("lobby").unwrap();
    store
        .heartbeat(
            &lobby,
            &[Heartbeat::now(user_key("a")), Heartbeat::now(user_key("b"))],
        )
        .await
        .unwrap();
    store
        .set_friends(&MemberId::new("a").unwrap(), &[MemberId::new("b").unwrap()])
        .await
        .unwrap();
    let bytes = persist::write(&store, &dir.0).unwrap();
    assert!(bytes > 0);
    assert!(persist::snapshot_path(&dir.0).is_file());
    // No temporary file is left behind.
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 1);

    let restored = MemoryStore::new(Arc::new(clock), SpaceConfig::default());
    let report = persist::restore(&restored, &dir.0).unwrap().unwrap();
    assert_eq!(report.members, 2);
    let status = restored.status(&lobby, &[user_key("a")]).await.unwrap();
    assert_eq!(status[0].status, Status::Online);
    assert_eq!(status[0].last_seen_ms, Some(T0));
    assert_eq!(
        restored
            .friends(&MemberId::new("a").unwrap())
            .await
            .unwrap(),
        vec![MemberId::new("b").unwrap()]
    );
}

#[tokio::test]
async fn no_snapshot_yet_is_an_empty_start() {
    let dir = TempDir::new("empty");
    let store = MemoryStore::default();
    assert!(
        persist::restore(&store, &dir.0.join("sub"))
            .unwrap()
            .is_none()
    );
    assert!(dir.0.join("sub").is_dir(), "the data directory is created");
}

#[tokio::test]
async fn a_corrupt_snapshot_is_an_error_naming_the_file() {
    let dir = TempDir::new("corrupt");
    let path = persist::snapshot_path(&dir.0);

    // Foreign bytes.
    std::fs::write(&path, b"definitely not a snapshot").unwrap();
    let err = persist::restore(&MemoryStore::default(), &dir.0).unwrap_err();
    match &err {
        ServerError::Snapshot { path: p, .. } => assert_eq!(p, &path),
        other => panic!("expected a snapshot error, got {other:?}"),
    }
    assert!(err.to_string().contains(&path.display().to_string()));

    // A real snapshot with a flipped byte.
    let good = MemoryStore::default();
    good.heartbeat(
        &SpaceName::new("s").unwrap(),
        &[Heartbeat::now(user_key("a"))],
    )
    .await
    .unwrap();
    let mut bytes = good.snapshot();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        persist::restore(&MemoryStore::default(), &dir.0),
        Err(ServerError::Snapshot { .. })
    ));

    // run refuses to start over it, and leaves the file alone.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let config = Config {
        store: StoreSpec::Memory {
            data_dir: Some(dir.0.clone()),
            snapshot_interval: DEFAULT_SNAPSHOT_INTERVAL,
            space_stripes: None,
        },
        ..Config::default()
    };
    let err = run(listener, config, std::future::pending())
        .await
        .unwrap_err();
    assert!(matches!(err, ServerError::Snapshot { .. }), "{err:?}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[tokio::test]
async fn serve_write_snapshot_on_shutdown_and_restore_it() {
    let dir = TempDir::new("serve");
    let config = Config {
        store: StoreSpec::Memory {
            data_dir: Some(dir.0.clone()),
            snapshot_interval: DEFAULT_SNAPSHOT_INTERVAL,
            space_stripes: None,
        },
        ..Config::default()
    };

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(run(listener, config.clone(), async {
        let _ = stopped.await;
    }));

    let health = raw_http(
        addr,
        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let body = r#"{"id":"alice"}"#;
    let beat = raw_http(
        addr,
        &format!(
            "POST /v1/spaces/lobby/heartbeat HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
    .await;
    assert!(beat.starts_with("HTTP/1.1 200"), "{beat}");

    // An open event stream must not hold the shutdown.
    let mut sse = TcpStream::connect(addr).await.unwrap();
    sse.write_all(b"GET /v1/spaces/lobby/events HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut first = vec![0u8; 4096];
    let n = tokio::time::timeout(PATIENCE, sse.read(&mut first))
        .await
        .unwrap()
        .unwrap();
    let head = String::from_utf8_lossy(&first[..n]).into_owned();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    stop.send(()).unwrap();
    tokio::time::timeout(PATIENCE, server)
        .await
        .expect("shutdown waited on the open stream")
        .unwrap()
        .unwrap();
    // The stream was ended by the server.
    let mut rest = Vec::new();
    tokio::time::timeout(PATIENCE, sse.read_to_end(&mut rest))
        .await
        .expect("the stream was not closed")
        .unwrap();

    // The snapshot holds alice; a new server restores her.
    let restored = MemoryStore::default();
    let report = persist::restore(&restored, &dir.0).unwrap().unwrap();
    assert_eq!(report.members, 1);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(run(listener, config, async {
        let _ = stopped.await;
    }));
    let member = raw_http(
        addr,
        "GET /v1/spaces/lobby/members/alice HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(member.contains("\"status\":\"online\""), "{member}");
    stop.send(()).unwrap();
    tokio::time::timeout(PATIENCE, server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// A memory store on disk whose writes were acknowledged, then dropped
/// without a shutdown (as a crash would leave it): a second open on the
/// same directory replays the journal and has everything.
#[tokio::test]
async fn acknowledged_writes_survive_without_a_shutdown_through_the_journal() {
    let dir = TempDir::new("journal-replay");
    let clock = ManualClock::new(T0);
    let on_disk = || Snapshots {
        dir: dir.0.clone(),
        interval: DEFAULT_SNAPSHOT_INTERVAL,
    };
    let ann = MemberId::new("ann").unwrap();
    let lobby = SpaceName::new("lobby").unwrap();
    {
        let store = Arc::new(MemoryStore::new(
            Arc::new(clock.clone()),
            SpaceConfig::default(),
        ));
        let backend = Backend::memory_on_disk(store.clone(), on_disk())
            .await
            .unwrap();
        let store = backend.store();
        store
            .set_friends(&ann, &[MemberId::new("bob").unwrap()])
            .await
            .unwrap();
        let config = SpaceConfig {
            online_ms: 7_000,
            ..SpaceConfig::default()
        };
        store.set_config(&lobby, config).await.unwrap();
        store
            .heartbeat(&lobby, &[Heartbeat::now(user_key("ann"))])
            .await
            .unwrap();
        // No shutdown, no fold: only the journal holds these.
        assert!(!persist::snapshot_path(&dir.0).exists());
    }
    let store = Arc::new(MemoryStore::new(
        Arc::new(clock.clone()),
        SpaceConfig::default(),
    ));
    let backend = Backend::memory_on_disk(store, on_disk()).await.unwrap();
    let store = backend.store();
    assert_eq!(
        store.friends(&ann).await.unwrap(),
        vec![MemberId::new("bob").unwrap()]
    );
    assert_eq!(store.config(&lobby).await.unwrap().online_ms, 7_000);
    let status = store.status(&lobby, &[user_key("ann")]).await.unwrap();
    assert_eq!(status[0].last_seen_ms, Some(T0));
}

/// A journal damaged in the middle (not a torn tail) is refused at start
/// with an error naming the file: starting without it would drop
/// acknowledged writes and then fold the loss into the next snapshot.
#[tokio::test]
async fn a_corrupt_journal_is_an_error_naming_the_file() {
    let dir = TempDir::new("journal-corrupt");
    let on_disk = || Snapshots {
        dir: dir.0.clone(),
        interval: DEFAULT_SNAPSHOT_INTERVAL,
    };
    {
        let backend = Backend::memory_on_disk(Arc::new(MemoryStore::default()), on_disk())
            .await
            .unwrap();
        for i in 0..20 {
            backend
                .store()
                .set_friends(
                    &MemberId::new(&format!("u{i}")).unwrap(),
                    &[MemberId::new("bob").unwrap()],
                )
                .await
                .unwrap();
        }
    }
    let file = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("journal-")
        })
        .expect("a journal file");
    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(&file, &bytes).unwrap();

    let err = match Backend::memory_on_disk(Arc::new(MemoryStore::default()), on_disk()).await {
        Ok(_) => panic!("a corrupt journal was accepted"),
        Err(e) => e,
    };
    assert!(
        matches!(err, ServerError::Journal { .. }),
        "expected a journal error, got {err:?}"
    );
    let message = format!("{err}: {:?}", std::error::Error::source(&err));
    assert!(
        message.contains(&file.file_name().unwrap().to_str().unwrap().to_string()),
        "the error names the file: {message}"
    );
}
