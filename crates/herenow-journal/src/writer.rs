//! The writer thread: owns the open file, batches what is queued into one
//! write, syncs once per batch when any append asked for it (group
//! commit), and syncs lazy records within their deadline.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Instant;

use tokio::sync::oneshot;

use crate::file::{self, RECORD_HEAD};
use crate::{Counters, JournalOptions};

/// Most bytes one batch gathers before it is written.
const BATCH_BYTES: usize = 4 * 1024 * 1024;

pub(crate) enum Cmd {
    Append {
        record: Vec<u8>,
        ack: Option<oneshot::Sender<Result<(), String>>>,
    },
    Rotate {
        ack: oneshot::Sender<Result<u64, String>>,
    },
    Close,
}

pub(crate) struct Writer {
    dir: PathBuf,
    number: u64,
    file: File,
    options: JournalOptions,
    counters: Arc<Counters>,
    /// Written but not yet synced since this instant.
    dirty_since: Option<Instant>,
    /// Set by the first write or sync error: from then on every append is
    /// refused, so nothing is acknowledged that may not be on disk.
    failed: Option<String>,
}

impl Writer {
    pub(crate) fn new(
        dir: PathBuf,
        number: u64,
        file: File,
        options: JournalOptions,
        counters: Arc<Counters>,
    ) -> Self {
        Self {
            dir,
            number,
            file,
            options,
            counters,
            dirty_since: None,
            failed: None,
        }
    }

    pub(crate) fn run(mut self, rx: Receiver<Cmd>) {
        let mut buf = Vec::with_capacity(64 * 1024);
        let mut acks = Vec::new();
        loop {
            let first = match self.dirty_since {
                None => match rx.recv() {
                    Ok(c) => c,
                    Err(_) => break,
                },
                Some(since) => {
                    let wait = self.options.lazy_sync.saturating_sub(since.elapsed());
                    match rx.recv_timeout(wait) {
                        Ok(c) => c,
                        Err(RecvTimeoutError::Timeout) => {
                            self.sync();
                            continue;
                        }
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
            };
            // Everything queued behind the first command joins its batch.
            let mut next = Some(first);
            let mut stop = false;
            let mut rotate = None;
            while let Some(cmd) = next.take() {
                match cmd {
                    Cmd::Append { record, ack } => {
                        file::frame(&record, &mut buf);
                        self.counters.records.fetch_add(1, Ordering::Relaxed);
                        self.counters
                            .bytes
                            .fetch_add((RECORD_HEAD + record.len()) as u64, Ordering::Relaxed);
                        if let Some(a) = ack {
                            acks.push(a);
                        }
                    }
                    // A rotation or close ends the batch: what came before
                    // it belongs to the old file.
                    Cmd::Rotate { ack } => {
                        rotate = Some(ack);
                        break;
                    }
                    Cmd::Close => {
                        stop = true;
                        break;
                    }
                }
                if buf.len() >= BATCH_BYTES {
                    break;
                }
                next = rx.try_recv().ok();
            }
            self.write(&mut buf);
            if !acks.is_empty() || rotate.is_some() || stop {
                self.sync();
            }
            let outcome = match &self.failed {
                None => Ok(()),
                Some(why) => Err(why.clone()),
            };
            for a in acks.drain(..) {
                let _ = a.send(outcome.clone());
            }
            if let Some(ack) = rotate {
                let _ = ack.send(self.rotate());
            }
            if stop {
                break;
            }
        }
        self.sync();
    }

    fn write(&mut self, buf: &mut Vec<u8>) {
        if buf.is_empty() {
            return;
        }
        if self.failed.is_none() {
            match self.file.write_all(buf) {
                Ok(()) => {
                    self.dirty_since.get_or_insert_with(Instant::now);
                }
                Err(e) => self.fail(format!("writing the journal: {e}")),
            }
        }
        buf.clear();
    }

    fn sync(&mut self) {
        if self.dirty_since.is_none() || self.failed.is_some() {
            return;
        }
        match self.file.sync_data() {
            Ok(()) => {
                self.counters.syncs.fetch_add(1, Ordering::Relaxed);
                self.dirty_since = None;
            }
            Err(e) => self.fail(format!("syncing the journal: {e}")),
        }
    }

    fn rotate(&mut self) -> Result<u64, String> {
        if let Some(why) = &self.failed {
            return Err(why.clone());
        }
        let number = self.number + 1;
        match file::create(&self.dir, number) {
            Ok(f) => {
                self.file = f;
                self.number = number;
                self.counters.file.store(number, Ordering::Relaxed);
                Ok(number)
            }
            Err(e) => Err(e.to_string()),
        }
    }

    fn fail(&mut self, why: String) {
        tracing::error!(error = %why, "the journal failed; durable writes are refused from now on");
        self.failed = Some(why);
    }
}
