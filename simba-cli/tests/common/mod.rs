//! Helpers shared by the end-to-end tests: they spawn the real `simba` binary.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The PostgreSQL server the tests use.
pub const PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
/// The MySQL/MariaDB server the tests use.
pub const MYSQL_URL: &str = "mysql://root@127.0.0.1:3306/test";

/// A `simba` command with no `SIMBA_*` variables inherited from the caller.
/// `SIMBA_TEST_BIN` runs another build instead (e.g. an older one, to see a
/// check fire).
pub fn simba() -> Command {
    let bin =
        std::env::var_os("SIMBA_TEST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_simba").into());
    let mut c = Command::new(bin);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("SIMBA_") {
            c.env_remove(k);
        }
    }
    c.env("NO_COLOR", "1");
    c
}

/// A name unique to this test run: `tag` plus process id and a clock reading.
pub fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{tag}{}x{nanos}", std::process::id())
}

/// A backend for one test: a SQLite file in a fresh temporary directory, or
/// PostgreSQL with a table prefix of its own.
pub struct TestBackend {
    pub url: String,
    pub kind: &'static str,
    pub dir: tempfile::TempDir,
}

impl TestBackend {
    pub fn sqlite() -> TestBackend {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("simba.db").display());
        TestBackend {
            url,
            kind: "sqlite",
            dir,
        }
    }

    /// PostgreSQL, or `None` if it is not running and
    /// `SIMBA_TEST_SKIP_SERVERS` lists `postgres` (the skip is written to
    /// stderr past the harness's capture); otherwise a missing server fails
    /// the test.
    pub fn postgres(tag: &str) -> Option<TestBackend> {
        Self::server(tag, "postgres", PG_URL, "127.0.0.1:5432")
    }

    /// MySQL/MariaDB, like [`TestBackend::postgres`].
    pub fn mysql(tag: &str) -> Option<TestBackend> {
        Self::server(tag, "mysql", MYSQL_URL, "127.0.0.1:3306")
    }

    fn server(tag: &str, kind: &'static str, url: &str, addr: &str) -> Option<TestBackend> {
        let up =
            std::net::TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(2))
                .is_ok();
        if !up {
            let thread = std::thread::current();
            let test = thread.name().unwrap_or("a test");
            simba_backends::test_servers::missing_server(
                kind,
                &format!("{kind} at {url}"),
                test,
                &"nothing listens there",
            );
            return None;
        }
        let prefix = unique(&format!("cli_{tag}_")).to_ascii_lowercase();
        let prefix: String = prefix.chars().take(30).collect();
        let dir = tempfile::tempdir().unwrap();
        Some(TestBackend {
            url: format!("{url}?simba_table_prefix={prefix}_"),
            kind,
            dir,
        })
    }
}

/// Declares one `#[test]` per line `test: backend => check`: `test` runs
/// `check(&backend)` on a fresh SQLite file (`sqlite`), or on PostgreSQL or
/// MySQL with a table tag (`postgres("tag")`, `mysql("tag")`; a missing
/// server fails the test unless skipped: [`TestBackend::postgres`]).
#[allow(unused_macros)] // Not every test file declares tests per backend.
macro_rules! backend_tests {
    ($($test:ident: $kind:ident $(($tag:literal))? => $check:ident;)+) => {
        $(
            #[test]
            fn $test() {
                backend_tests!(@run $kind $(($tag))? $check);
            }
        )+
    };
    (@run sqlite $check:ident) => {
        $check(&TestBackend::sqlite())
    };
    (@run $kind:ident ($tag:literal) $check:ident) => {
        if let Some(b) = TestBackend::$kind($tag) {
            $check(&b);
        }
    };
}
#[allow(unused_imports)]
pub(crate) use backend_tests;

/// Drops a server backend's tables when the test ends (also when it
/// fails), so the suite leaves nothing in the shared databases; a SQLite
/// file goes with its temporary directory.
impl Drop for TestBackend {
    fn drop(&mut self) {
        if self.kind == "sqlite" {
            return;
        }
        let url = self.url.clone();
        let kind = self.kind;
        // A runtime of its own, on a thread of its own: a test may drop
        // this inside another runtime.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let Ok(config) = simba_backends::BackendConfig::parse(&url) else {
                    return;
                };
                let config = config.with_create_schema(false);
                match kind {
                    "postgres" => {
                        if let Ok(b) = simba_backends::postgres::PgBackend::connect(&config).await {
                            let _ = b.drop_tables().await;
                        }
                    }
                    "mysql" => {
                        if let Ok(b) = simba_backends::mysql::MysqlBackend::connect(&config).await {
                            let _ = b.drop_tables().await;
                        }
                    }
                    _ => {}
                }
            });
        })
        .join();
    }
}

impl TestBackend {
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    pub fn simba(&self) -> Command {
        let mut c = simba();
        c.arg("--backend").arg(&self.url);
        c
    }
}

/// Waits until `path` exists and is non-empty; returns when it appeared.
pub fn wait_for_file(path: &Path, timeout: Duration) -> Instant {
    let start = Instant::now();
    loop {
        if std::fs::metadata(path)
            .map(|m| m.len() > 0)
            .unwrap_or(false)
        {
            return Instant::now();
        }
        assert!(
            start.elapsed() < timeout,
            "{} did not appear within {timeout:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for a child process to exit; kills it and fails if it does not.
pub fn wait_exit(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            panic!("simba did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends SIGTERM to a process.
pub fn sigterm(child: &Child) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
}

/// Sends SIGTERM to a process and waits for it to exit (see [`wait_exit`]).
pub fn stop(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    sigterm(child);
    wait_exit(child, timeout)
}

/// Sends SIGTERM to a simba process and waits for it: a clean stop on
/// SIGTERM exits 0.
pub fn stop_cleanly(child: &mut Child, timeout: Duration) {
    assert_eq!(
        stop(child, timeout).code(),
        Some(0),
        "a clean stop on SIGTERM exits 0"
    );
}

/// Whether process `pid` is gone (or a zombie waiting to be reaped).
pub fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
    }
}

/// A shell script for a child that writes `token pid` to `$MARK` then
/// sleeps until stopped.
pub const MARK_AND_SLEEP: &str = "echo \"$SIMBA_FENCING_TOKEN $$\" > \"$MARK.tmp\" && mv \"$MARK.tmp\" \"$MARK\" && exec sleep 60";

/// Starts simba on `backend` with `args`, the variable `var` set to
/// `value` (where its child writes), stdin closed.
pub fn spawn_with(
    backend: &TestBackend,
    args: &[&str],
    var: &str,
    value: impl AsRef<std::ffi::OsStr>,
) -> Child {
    backend
        .simba()
        .args(args)
        .env(var, value)
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

/// Starts `simba run NAME` with a 3 s lease whose child marks `mark`.
pub fn spawn_marking_leader(backend: &TestBackend, name: &str, mark: &Path) -> Child {
    spawn_with(
        backend,
        &[
            "--lease-duration",
            "3s",
            "run",
            name,
            "--",
            "sh",
            "-c",
            MARK_AND_SLEEP,
        ],
        "MARK",
        mark,
    )
}

/// Starts `simba lock NAME` whose child marks `mark` then sleeps, and
/// waits until it holds the lock.
pub fn spawn_lock_holder(backend: &TestBackend, name: &str, mark: &Path) -> Child {
    let holder = spawn_with(
        backend,
        &["lock", name, "--", "sh", "-c", MARK_AND_SLEEP],
        "MARK",
        mark,
    );
    wait_for_file(mark, Duration::from_secs(30));
    holder
}

/// Each line of `text` as three numbers separated by white space (what a
/// recording child appended, one line a run).
pub fn number_triples<A, B, C>(text: &str) -> Vec<(A, B, C)>
where
    A: std::str::FromStr,
    B: std::str::FromStr,
    C: std::str::FromStr,
    A::Err: std::fmt::Debug,
    B::Err: std::fmt::Debug,
    C::Err: std::fmt::Debug,
{
    text.lines()
        .map(|l| {
            let v: Vec<&str> = l.split_whitespace().collect();
            (
                v[0].parse().unwrap(),
                v[1].parse().unwrap(),
                v[2].parse().unwrap(),
            )
        })
        .collect()
}

/// Reads the `token pid` a marking child wrote.
pub fn read_mark(mark: &Path) -> (u64, u32) {
    let text = std::fs::read_to_string(mark).unwrap();
    let mut parts = text.split_whitespace();
    let token = parts.next().unwrap().parse().unwrap();
    let pid = parts.next().unwrap().parse().unwrap();
    (token, pid)
}

/// The lines a child writes on one of its pipes, read by a thread of their own.
pub struct Lines {
    rx: std::sync::mpsc::Receiver<String>,
    /// Every line read so far, for failure messages.
    pub seen: Vec<String>,
}

impl Lines {
    /// Reads `pipe` (a child's stdout or stderr) line by line.
    pub fn new(pipe: impl std::io::Read + Send + 'static) -> Lines {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(pipe).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Lines {
            rx,
            seen: Vec::new(),
        }
    }

    /// Waits for the next line that satisfies `pred`; fails after `timeout`.
    pub fn wait_for(&mut self, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if pred(&line) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "no expected line within {timeout:?}; lines so far:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// Every line until the pipe closes (the child exited), at most `timeout`.
    pub fn rest(&mut self, timeout: Duration) -> Vec<String> {
        let end = Instant::now() + timeout;
        let mut out = Vec::new();
        while let Ok(line) = self
            .rx
            .recv_timeout(end.saturating_duration_since(Instant::now()))
        {
            self.seen.push(line.clone());
            out.push(line);
        }
        out
    }
}
