//! A connection to the daemon: handshake on connect, then one request at a
//! time, each through a typed method (`status() -> StatusReport`) so that
//! no caller matches replies itself.

use std::path::{Path, PathBuf};

use futures_util::{SinkExt, StreamExt};
use interprocess::local_socket::tokio::{prelude::*, Stream};
use interprocess::local_socket::{GenericFilePath, ToFsName};
use tokio_util::codec::Framed;

use crate::codec::{JsonLines, Line};
use crate::paths::{check_socket, current_uid};
use crate::*;

pub struct Client {
    io: Framed<Stream, JsonLines>,
    socket: PathBuf,
    next_id: u64,
    server: String,
    pid: u32,
}

impl Client {
    /// Connects to the daemon on `socket` and says hello; `client` names the
    /// caller (e.g. `drsctl 0.1.0`) in the daemon's log.
    pub async fn connect(socket: &Path, client: &str) -> Result<Client, IpcError> {
        let stream = connect_stream(socket).await?;
        let mut me = Client {
            io: Framed::new(stream, JsonLines::new(MAX_RESPONSE_LINE)),
            socket: socket.to_path_buf(),
            next_id: 1,
            server: String::new(),
            pid: 0,
        };
        let hello = Request::Hello(HelloRequest {
            version: PROTOCOL_VERSION,
            client: client.to_string(),
        });
        match me.call(hello).await {
            Ok(Reply::Hello(HelloReply { server, pid, .. })) => (me.server, me.pid) = (server, pid),
            Ok(other) => return Err(me.unexpected(&other)),
            // A daemon stopping (idle, or told to) may have taken the
            // connection without serving it: as good as none running.
            Err(IpcError::Closed { socket }) => {
                return Err(IpcError::NotRunning {
                    socket,
                    source: std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        "it closed the connection before the handshake (stopping)",
                    ),
                })
            }
            Err(e) => return Err(e),
        }
        Ok(me)
    }

    /// The daemon's name and version, from the handshake.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The daemon's process id, from the handshake.
    pub fn server_pid(&self) -> u32 {
        self.pid
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub async fn status(&mut self) -> Result<StatusReport, IpcError> {
        let reply = self.call(Request::Status).await?;
        match reply {
            Reply::Status(report) => Ok(*report),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Registers the repo at `path`; its state after the first scan.
    pub async fn repos_add(&mut self, path: PathBuf) -> Result<RepoReport, IpcError> {
        let reply = self.call(Request::ReposAdd(RepoPath { path })).await?;
        match reply {
            Reply::Repo { repo } => Ok(repo),
            other => Err(self.unexpected(&other)),
        }
    }

    pub async fn repos_remove(&mut self, path: PathBuf) -> Result<RepoReport, IpcError> {
        let reply = self.call(Request::ReposRemove(RepoPath { path })).await?;
        match reply {
            Reply::Repo { repo } => Ok(repo),
            other => Err(self.unexpected(&other)),
        }
    }

    pub async fn repos_list(&mut self) -> Result<Vec<RepoReport>, IpcError> {
        let reply = self.call(Request::ReposList).await?;
        match reply {
            Reply::Repos { repos } => Ok(repos),
            other => Err(self.unexpected(&other)),
        }
    }

    pub async fn pool_verify(
        &mut self,
        on_progress: impl FnMut(&Progress),
    ) -> Result<VerifyReport, IpcError> {
        let reply = self
            .call_with_progress(Request::PoolVerify, on_progress)
            .await?;
        match reply {
            Reply::Verify(report) => Ok(report),
            other => Err(self.unexpected(&other)),
        }
    }

    pub async fn gc(
        &mut self,
        request: GcRequest,
        on_progress: impl FnMut(&Progress),
    ) -> Result<GcReport, IpcError> {
        let reply = self
            .call_with_progress(Request::Gc(request), on_progress)
            .await?;
        match reply {
            Reply::Gc(report) => Ok(report),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Frees the copies here of objects proven elsewhere; `on_progress`
    /// gets a line per object as it is decided.
    pub async fn prune(
        &mut self,
        request: PruneRequest,
        on_progress: impl FnMut(&Progress),
    ) -> Result<PruneReport, IpcError> {
        let reply = self
            .call_with_progress(Request::Prune(request), on_progress)
            .await?;
        match reply {
            Reply::Pruned(report) => Ok(report),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Removes what node `node` published as its repos' roots.
    pub async fn team_forget(&mut self, node: String) -> Result<TeamForgetReport, IpcError> {
        let reply = self
            .call(Request::TeamForget(TeamForgetRequest { node }))
            .await?;
        match reply {
            Reply::TeamForgot(report) => Ok(report),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Copies this node's own pool and registry into the team's.
    pub async fn team_join(&mut self) -> Result<TeamMigrateReport, IpcError> {
        match self.call(Request::TeamJoin(TeamJoinRequest {})).await? {
            Reply::TeamJoined(report) => Ok(report),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Copies back into this node's own pool and registry what its repos need.
    pub async fn team_leave(&mut self) -> Result<TeamMigrateReport, IpcError> {
        match self.call(Request::TeamLeave(TeamLeaveRequest {})).await? {
            Reply::TeamLeft(report) => Ok(report),
            other => Err(self.unexpected(&other)),
        }
    }

    /// The settings in force in the daemon and where each came from.
    pub async fn config(&mut self) -> Result<ConfigReport, IpcError> {
        let reply = self.call(Request::Config(ConfigRequest {})).await?;
        match reply {
            Reply::Config(report) => Ok(report),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Asks the daemon to stop; it answers before it drains.
    pub async fn shutdown(&mut self) -> Result<(), IpcError> {
        let reply = self.call(Request::Shutdown).await?;
        match reply {
            Reply::Done => Ok(()),
            other => Err(self.unexpected(&other)),
        }
    }

    pub async fn repo_init(&mut self, request: RepoInitRequest) -> Result<SetupReport, IpcError> {
        let reply = self.call(Request::RepoInit(request)).await?;
        match reply {
            Reply::Setup(report) => Ok(report),
            other => Err(self.unexpected(&other)),
        }
    }

    pub async fn lfs_download(
        &mut self,
        request: LfsDownloadRequest,
        on_progress: impl FnMut(&Progress),
    ) -> Result<LfsObject, IpcError> {
        let reply = self
            .call_with_progress(Request::LfsDownload(request), on_progress)
            .await?;
        match reply {
            Reply::LfsObject(object) => Ok(object),
            other => Err(self.unexpected(&other)),
        }
    }

    pub async fn lfs_upload(
        &mut self,
        request: LfsUploadRequest,
        on_progress: impl FnMut(&Progress),
    ) -> Result<LfsUploaded, IpcError> {
        let reply = self
            .call_with_progress(Request::LfsUpload(request), on_progress)
            .await?;
        match reply {
            Reply::LfsUploaded(uploaded) => Ok(uploaded),
            other => Err(self.unexpected(&other)),
        }
    }

    pub async fn add_url(
        &mut self,
        request: AddUrlRequest,
        on_progress: impl FnMut(&Progress),
    ) -> Result<AddUrlReport, IpcError> {
        let reply = self
            .call_with_progress(Request::AddUrl(request), on_progress)
            .await?;
        match reply {
            Reply::AddUrl(report) => Ok(report),
            other => Err(self.unexpected(&other)),
        }
    }

    pub async fn pre_push(
        &mut self,
        request: PrePushRequest,
        on_progress: impl FnMut(&Progress),
    ) -> Result<PushReport, IpcError> {
        let reply = self
            .call_with_progress(Request::PrePush(request), on_progress)
            .await?;
        match reply {
            Reply::PrePush(report) => Ok(report),
            other => Err(self.unexpected(&other)),
        }
    }

    pub async fn promote(&mut self, request: PromoteRequest) -> Result<PromoteReport, IpcError> {
        let reply = self.call(Request::Promote(request)).await?;
        match reply {
            Reply::Promoted(report) => Ok(report),
            other => Err(self.unexpected(&other)),
        }
    }

    pub async fn fetch(&mut self, request: FetchRequest) -> Result<FetchReport, IpcError> {
        let reply = self.call(Request::Fetch(request)).await?;
        match reply {
            Reply::Fetched(report) => Ok(report),
            other => Err(self.unexpected(&other)),
        }
    }

    pub async fn provisional(&mut self, cwd: PathBuf) -> Result<ProvisionalReport, IpcError> {
        let reply = self
            .call(Request::Provisional(ProvisionalRequest { cwd }))
            .await?;
        match reply {
            Reply::Provisional(report) => Ok(report),
            other => Err(self.unexpected(&other)),
        }
    }

    pub async fn hydrate(
        &mut self,
        repo: PathBuf,
        on_progress: impl FnMut(&Progress),
    ) -> Result<HydrateReport, IpcError> {
        let reply = self
            .call_with_progress(Request::Hydrate(HydrateRequest { repo }), on_progress)
            .await?;
        match reply {
            Reply::Hydrated(report) => Ok(report),
            other => Err(self.unexpected(&other)),
        }
    }

    pub async fn check_out(&mut self, repo: PathBuf) -> Result<CheckOutReport, IpcError> {
        match self
            .call(Request::CheckOut(CheckOutRequest { repo }))
            .await?
        {
            Reply::CheckedOut(report) => Ok(report),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Sends `request` and waits for its result, ignoring progress. The
    /// untyped way in, for tests of the protocol itself; callers use the
    /// typed methods above.
    pub async fn call(&mut self, request: Request) -> Result<Reply, IpcError> {
        self.call_with_progress(request, |_| {}).await
    }

    /// Sends `request`, hands every progress event to `on_progress`, returns the result.
    pub async fn call_with_progress(
        &mut self,
        request: Request,
        mut on_progress: impl FnMut(&Progress),
    ) -> Result<Reply, IpcError> {
        let id = self.next_id;
        self.next_id += 1;
        let frame = RequestFrame { id, request };
        if let Err(e) = self.io.send(&frame).await {
            // The daemon may have answered and closed before reading us (a
            // refused peer): its answer is still there to read.
            return match self.read_frame().await {
                Ok(ResponseFrame {
                    body: Body::Error { error },
                    ..
                }) => Err(IpcError::Daemon(error)),
                _ => Err(IpcError::io("write to", &self.socket, e)),
            };
        }
        loop {
            let response = self.read_frame().await?;
            if response.id.is_some() && response.id != Some(id) {
                continue; // an answer to an abandoned request
            }
            match response.body {
                Body::Progress { progress } => on_progress(&progress),
                Body::Result { result } => return Ok(result),
                Body::Error { error } => return Err(IpcError::Daemon(error)),
            }
        }
    }

    async fn read_frame(&mut self) -> Result<ResponseFrame, IpcError> {
        let line = match self.io.next().await {
            None => {
                return Err(IpcError::Closed {
                    socket: self.socket.clone(),
                })
            }
            Some(Err(e)) => return Err(IpcError::io("read from", &self.socket, e)),
            Some(Ok(line)) => line,
        };
        let text = match line {
            Line::Text(text) => text,
            Line::TooLong => return Err(self.protocol("a line over the length limit".into())),
            Line::NotText => return Err(self.protocol("a line that is not UTF-8".into())),
        };
        serde_json::from_str(&text).map_err(|e| self.protocol(format!("{e}")))
    }

    fn protocol(&self, why: String) -> IpcError {
        IpcError::Protocol {
            socket: self.socket.clone(),
            why,
        }
    }

    fn unexpected(&self, reply: &Reply) -> IpcError {
        self.protocol(format!("an unexpected reply {reply:?}"))
    }
}

/// Opens the socket; a missing or refusing socket is [`IpcError::NotRunning`].
/// Nothing is sent before the socket's folder, the socket and the process
/// listening on it are known to be ours ([`check_socket`], [`check_peer`]).
pub(crate) async fn connect_stream(socket: &Path) -> Result<Stream, IpcError> {
    check_socket(socket)?;
    let name = socket
        .to_fs_name::<GenericFilePath>()
        .map_err(|e| IpcError::io("use as a socket name", socket, e))?;
    let stream = Stream::connect(name)
        .await
        .map_err(|source| IpcError::NotRunning {
            socket: socket.to_path_buf(),
            source,
        })?;
    check_peer(socket, &stream)?;
    Ok(stream)
}

/// The listener must run as our user: the socket could have been replaced
/// between [`check_socket`] and the connect, and only the kernel's record of
/// the peer (SO_PEERCRED on Linux, LOCAL_PEERCRED, which getpeereid reads,
/// on macOS and the BSDs) cannot be planted.
fn check_peer(socket: &Path, stream: &Stream) -> Result<(), IpcError> {
    let unknown = |why: String| IpcError::PeerUnknown {
        socket: socket.to_path_buf(),
        why,
    };
    let creds = stream.peer_creds().map_err(|e| unknown(e.to_string()))?;
    match creds.euid() {
        Some(uid) if uid == current_uid() => Ok(()),
        Some(uid) => Err(IpcError::PeerNotUs {
            socket: socket.to_path_buf(),
            uid,
            me: current_uid(),
        }),
        None => Err(unknown("the OS does not tell its uid".into())),
    }
}

#[cfg(test)]
mod tests {
    //! A client facing sockets that are not ours. Each case has a listener
    //! that records what it is sent: the client must refuse before sending.
    //! Other users are played by uid 65534 (nobody), so these run as root.

    use std::io::Read;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::os::unix::net::UnixListener;
    use std::time::Duration;

    use super::*;

    const NOBODY: u32 = 65534;

    fn as_root() {
        assert_eq!(
            current_uid(),
            0,
            "these tests run as root, to act as another user"
        );
    }

    /// A listener of ours on `socket`: its first connection's bytes (what
    /// arrives before the client hangs up or 2 s pass).
    fn recording(socket: &Path) -> std::thread::JoinHandle<Vec<u8>> {
        let listener = UnixListener::bind(socket).unwrap();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(2)))
                .unwrap();
            let mut got = vec![0; 4096];
            let n = stream.read(&mut got).unwrap_or(0);
            got.truncate(n);
            got
        })
    }

    /// Connects to `socket`; its error, and what the listener received.
    fn refused(socket: &Path, listener: std::thread::JoinHandle<Vec<u8>>) -> (String, Vec<u8>) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let outcome = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), Client::connect(socket, "test")).await
        });
        // Wake the listener should the client not have connected at all.
        let _ = std::os::unix::net::UnixStream::connect(socket);
        let got = listener.join().unwrap();
        match outcome {
            Ok(Err(e)) => (one_line_of(&e), got),
            Ok(Ok(_)) => panic!("connected to a socket not ours"),
            Err(_) => panic!("the client waited for an answer instead of refusing"),
        }
    }

    fn one_line_of(e: &IpcError) -> String {
        one_line(e)
    }

    fn private_dir(parent: &Path, name: &str) -> PathBuf {
        let dir = parent.join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    fn chown(path: &Path, uid: u32) {
        std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
    }

    #[test]
    fn a_socket_folder_open_to_others_is_refused_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = private_dir(tmp.path(), "run");
        let socket = dir.join("drsd.sock");
        let listener = recording(&socket);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (err, got) = refused(&socket, listener);
        assert!(
            err.contains(&dir.display().to_string()) && err.contains("755"),
            "{err}"
        );
        assert!(got.is_empty(), "sent {:?}", String::from_utf8_lossy(&got));
        assert!(IpcError::SocketDir { dir, why: err }.is_untrusted());
    }

    #[test]
    fn a_symlinked_socket_folder_is_refused_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let real = private_dir(tmp.path(), "real");
        let listener = recording(&real.join("drsd.sock"));
        let link = tmp.path().join("link");
        symlink(&real, &link).unwrap();
        let (err, got) = refused(&link.join("drsd.sock"), listener);
        assert!(
            err.contains(&link.display().to_string()) && err.contains("symbolic link"),
            "{err}"
        );
        assert!(got.is_empty(), "sent {:?}", String::from_utf8_lossy(&got));
    }

    #[test]
    fn a_socket_folder_of_another_user_is_refused_naming_its_owner() {
        as_root();
        let tmp = tempfile::tempdir().unwrap();
        let dir = private_dir(tmp.path(), "drsd-0");
        let socket = dir.join("drsd.sock");
        let listener = recording(&socket);
        chown(&dir, NOBODY);
        let (err, got) = refused(&socket, listener);
        assert!(
            err.contains(&dir.display().to_string()) && err.contains("uid 65534"),
            "{err}"
        );
        assert!(got.is_empty(), "sent {:?}", String::from_utf8_lossy(&got));
    }

    #[test]
    fn a_socket_file_of_another_user_is_refused_naming_it() {
        as_root();
        let tmp = tempfile::tempdir().unwrap();
        let socket = private_dir(tmp.path(), "run").join("drsd.sock");
        let listener = recording(&socket);
        chown(&socket, NOBODY);
        let (err, got) = refused(&socket, listener);
        assert!(
            err.contains(&socket.display().to_string()) && err.contains("uid 65534"),
            "{err}"
        );
        assert!(got.is_empty(), "sent {:?}", String::from_utf8_lossy(&got));
    }

    #[test]
    fn a_listener_of_another_user_is_refused_before_anything_is_sent() {
        as_root();
        let tmp = tempfile::tempdir().unwrap();
        let socket = private_dir(tmp.path(), "run").join("drsd.sock");
        // Folder and socket file are ours: only the peer's uid gives it away.
        let nobody = ListenerAsNobody::start(&socket);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let outcome = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), Client::connect(&socket, "test")).await
        });
        let err = match outcome {
            Ok(Err(e)) => one_line_of(&e),
            Ok(Ok(_)) => panic!("connected to another user's listener"),
            Err(_) => panic!("the client waited for an answer instead of refusing"),
        };
        assert!(
            err.contains(&socket.display().to_string()) && err.contains("uid 65534"),
            "{err}"
        );
        assert_eq!(nobody.received(), 0, "the client sent bytes to it");
    }

    /// A child process that binds `socket` as root (so the file is ours),
    /// then becomes uid 65534 and listens: the kernel records the
    /// listener's credentials at listen(). It accepts one connection and
    /// reports how many bytes the first read got (0: the client hung up).
    struct ListenerAsNobody {
        pid: libc::pid_t,
        report: std::fs::File,
    }

    impl ListenerAsNobody {
        fn start(socket: &Path) -> ListenerAsNobody {
            use std::os::fd::FromRawFd;
            use std::os::unix::ffi::OsStrExt;
            // Everything the child needs is made before fork: after it,
            // the child makes only system calls.
            let bytes = socket.as_os_str().as_bytes();
            // SAFETY: plain system calls on descriptors and memory we own;
            // the child allocates nothing and ends with _exit.
            unsafe {
                let mut addr: libc::sockaddr_un = std::mem::zeroed();
                addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
                assert!(bytes.len() < addr.sun_path.len());
                for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
                    *d = *s as libc::c_char;
                }
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                assert!(fd >= 0);
                let len = size_of::<libc::sockaddr_un>() as libc::socklen_t;
                assert_eq!(
                    libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len),
                    0
                );
                let (mut ready, mut report) = ([0; 2], [0; 2]);
                assert_eq!(libc::pipe(ready.as_mut_ptr()), 0);
                assert_eq!(libc::pipe(report.as_mut_ptr()), 0);
                let pid = libc::fork();
                assert!(pid >= 0);
                if pid == 0 {
                    let ok = libc::setgroups(0, std::ptr::null()) == 0
                        && libc::setresgid(NOBODY, NOBODY, NOBODY) == 0
                        && libc::setresuid(NOBODY, NOBODY, NOBODY) == 0
                        && libc::listen(fd, 4) == 0;
                    if !ok {
                        libc::_exit(1);
                    }
                    libc::write(ready[1], b"r".as_ptr().cast(), 1);
                    let conn = libc::accept(fd, std::ptr::null_mut(), std::ptr::null_mut());
                    let mut buf = [0u8; 4096];
                    let n = libc::read(conn, buf.as_mut_ptr().cast(), buf.len()) as i64;
                    libc::write(report[1], (&n as *const i64).cast(), 8);
                    libc::_exit(0);
                }
                libc::close(fd);
                libc::close(ready[1]);
                libc::close(report[1]);
                let mut byte = 0u8;
                assert_eq!(
                    libc::read(ready[0], (&mut byte as *mut u8).cast(), 1),
                    1,
                    "the child could not become uid 65534 and listen"
                );
                libc::close(ready[0]);
                ListenerAsNobody {
                    pid,
                    report: std::fs::File::from_raw_fd(report[0]),
                }
            }
        }

        /// The bytes its connection's first read got.
        fn received(mut self) -> i64 {
            let mut n = [0u8; 8];
            self.report.read_exact(&mut n).expect("the child reports");
            i64::from_ne_bytes(n)
        }
    }

    impl Drop for ListenerAsNobody {
        fn drop(&mut self) {
            // SAFETY: our own child, killed and reaped once.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            }
        }
    }
}
