//! A simulated disk for the crash simulation (`tests/session_sim.rs`), implementing the writer's
//! [`Disk`] trait.
//!
//! It keeps two states of everything: what a reader sees now (the page cache) and what is durable.
//! A file's bytes and length become durable on `sync_data`/`sync_all`; a directory's entries (created
//! files and directories, renames, removals) only when that directory is synced, so a file created in
//! a directory nobody synced can vanish whole. A scheduled crash stops the disk after a number of
//! operations (the operation it stops in may half happen); then either the process restarts with the
//! page cache intact ([`SimDisk::restart`], a SIGKILL) or the power is cut ([`SimDisk::power_cycle`]):
//! every unsynced change is kept, lost, or kept in part, at random:
//! - a directory keeps a random prefix of its unsynced entry changes (in the order they were made);
//! - a file keeps its synced bytes, and of the unsynced ones: all, none, a prefix of any length, or a
//!   mix per sector of new bytes, old bytes, zeros, garbage, and sectors torn at a random byte.
//!
//! It can also fail operations as a full or failing disk does (a write that stops part way, a sync,
//! a cut-back, a directory sync that fail), so the writer's error paths run too. Everything random
//! comes from one seeded generator: a seed replays exactly.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::{Component, Path};
use std::sync::{Arc, Mutex, MutexGuard};

use pseudoclaude::session::disk::{Disk, DiskFile, Open};
use pseudoclaude::session::lock::Guard;
use pseudoclaude::session::{Context, Error, Result as SessionResult};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Ino = usize;

/// What the power cuts and faults did, summed over a run.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub power_cuts: u64,
    pub restarts: u64,
    /// Files that had unsynced changes at a power cut, by what became of them.
    pub files_kept_whole: u64,
    pub files_lost_whole: u64,
    pub files_cut_to_prefix: u64,
    pub files_sector_mix: u64,
    /// Sectors of the mixes, by kind.
    pub sectors_new: u64,
    pub sectors_old: u64,
    pub sectors_zero: u64,
    pub sectors_garbage: u64,
    pub sectors_torn: u64,
    /// Unsynced directory entry changes (create, rename, remove) kept and lost at power cuts.
    pub dir_changes_kept: u64,
    pub dir_changes_lost: u64,
    /// Operations that failed on purpose, by kind.
    pub faults_write: u64,
    pub faults_sync: u64,
    pub faults_set_len: u64,
    pub faults_dir: u64,
    /// A cut-back (`set_len`) that succeeded on a file whose previous cut-back had failed: the
    /// writer's `needs_truncate` retry.
    pub cutback_retries: u64,
}

impl Stats {
    pub fn add(&mut self, o: &Stats) {
        macro_rules! sum {
            ($($f:ident),*) => { $(self.$f += o.$f;)* };
        }
        sum!(
            power_cuts,
            restarts,
            files_kept_whole,
            files_lost_whole,
            files_cut_to_prefix,
            files_sector_mix,
            sectors_new,
            sectors_old,
            sectors_zero,
            sectors_garbage,
            sectors_torn,
            dir_changes_kept,
            dir_changes_lost,
            faults_write,
            faults_sync,
            faults_set_len,
            faults_dir,
            cutback_retries
        );
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Power {
    On,
    /// A scheduled crash happened: every operation fails until a restart or power cycle.
    Down,
}

/// How the simulated disk cheats, to check that the simulation catches a writer that forgets a sync.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sabotage {
    /// `sync_data`/`sync_all` return `Ok` and make nothing durable.
    pub skip_file_sync: bool,
    /// `sync_dir` returns `Ok` and makes nothing durable.
    pub skip_dir_sync: bool,
}

#[derive(Debug)]
struct FileNode {
    durable: Vec<u8>,
    data: Vec<u8>,
    /// The shortest `data` has been since the last sync: bytes below it are the same in both.
    low: usize,
    cutback_failed: bool,
}

#[derive(Debug)]
enum DirOp {
    Link(String, Ino),
    Unlink(String),
    Rename(String, String),
}

#[derive(Debug, Default)]
struct DirNode {
    durable: BTreeMap<String, Ino>,
    entries: BTreeMap<String, Ino>,
    pending: Vec<DirOp>,
}

#[derive(Debug)]
enum Node {
    File(FileNode),
    Dir(DirNode),
}

#[derive(Debug)]
struct State {
    rng: StdRng,
    nodes: Vec<Node>,
    power: Power,
    /// Operations left before the scheduled crash.
    ops_left: Option<u64>,
    /// Bumped at each restart, so handles of a dead process stay dead.
    generation: u64,
    fault_rate: f64,
    sabotage: Sabotage,
    stats: Stats,
    /// `PSEUDOCLAUDE_SIM_TRACE` set: every operation is printed, to follow a failing seed.
    trace: bool,
}

const ROOT: Ino = 0;

/// The disk; clones share it.
#[derive(Debug, Clone)]
pub struct SimDisk {
    state: Arc<Mutex<State>>,
}

fn power_err() -> io::Error {
    io::Error::other("simulated crash: the disk is gone")
}

fn fault(kind: &str) -> io::Error {
    io::Error::other(format!("simulated {kind} failure"))
}

impl SimDisk {
    /// An empty disk (just `/`, durable). `fault_rate`: the chance that an operation that can fail does.
    pub fn new(seed: u64, fault_rate: f64) -> SimDisk {
        let state = State {
            rng: StdRng::seed_from_u64(seed),
            nodes: vec![Node::Dir(DirNode::default())],
            power: Power::On,
            ops_left: None,
            generation: 0,
            fault_rate,
            sabotage: Sabotage::default(),
            stats: Stats::default(),
            trace: std::env::var_os("PSEUDOCLAUDE_SIM_TRACE").is_some(),
        };
        SimDisk { state: Arc::new(Mutex::new(state)) }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn sabotage(&self, s: Sabotage) {
        self.state().sabotage = s;
    }

    /// Creates a directory and all its parents, durably (the world before the test starts).
    pub fn mkdir_durable(&self, path: &Path) {
        let mut st = self.state();
        let mut cur = ROOT;
        for name in names(path).expect("absolute path") {
            let next = st.dir(cur).entries.get(&name).copied();
            cur = match next {
                Some(i) => i,
                None => {
                    let i = st.nodes.len();
                    st.nodes.push(Node::Dir(DirNode::default()));
                    let d = st.dir_mut(cur);
                    d.entries.insert(name.clone(), i);
                    d.durable.insert(name, i);
                    i
                }
            };
        }
    }

    /// Crashes after `ops` more operations.
    pub fn schedule_crash(&self, ops: u64) {
        self.state().ops_left = Some(ops);
    }

    pub fn is_down(&self) -> bool {
        self.state().power == Power::Down
    }

    /// Stops the disk now, as a crash between two operations.
    pub fn crash_now(&self) {
        let mut st = self.state();
        st.power = Power::Down;
        st.ops_left = None;
    }

    /// A SIGKILL: the process is gone, the page cache (every unsynced change) stays.
    pub fn restart(&self) {
        let mut st = self.state();
        st.power = Power::On;
        st.ops_left = None;
        st.generation += 1;
        st.stats.restarts += 1;
        if st.trace {
            eprintln!("disk: restart (SIGKILL)");
        }
    }

    /// A power cut: unsynced changes are kept, lost or kept in part (see the module's doc).
    pub fn power_cycle(&self) {
        let mut st = self.state();
        let st = &mut *st;
        st.power = Power::On;
        st.ops_left = None;
        st.generation += 1;
        st.stats.power_cuts += 1;
        if st.trace {
            eprintln!("disk: power cut");
        }
        let sector = [64usize, 512, 4096][st.rng.random_range(0..3)];
        for i in 0..st.nodes.len() {
            match &mut st.nodes[i] {
                Node::Dir(d) => lose_dir_changes(d, &mut st.rng, &mut st.stats),
                Node::File(f) => lose_file_changes(f, sector, &mut st.rng, &mut st.stats),
            }
        }
    }

    pub fn stats(&self) -> Stats {
        self.state().stats.clone()
    }

    /// Copies the directory `dir` as it is on the disk now (after a power cycle: what survived) to
    /// the real directory `to`, so the real loader can read it. `false` when there is no such directory.
    pub fn materialize(&self, dir: &Path, to: &Path) -> io::Result<bool> {
        let st = self.state();
        match st.resolve(dir) {
            Some(i) if matches!(st.nodes[i], Node::Dir(_)) => st.copy_dir(i, to).map(|()| true),
            _ => Ok(false),
        }
    }

    /// Bytes of the file at `path` as a reader sees them now.
    pub fn read(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.state();
        match &st.nodes[st.resolve(path)?] {
            Node::File(f) => Some(f.data.clone()),
            Node::Dir(_) => None,
        }
    }
}

fn lose_dir_changes(d: &mut DirNode, rng: &mut StdRng, stats: &mut Stats) {
    if d.pending.is_empty() {
        return;
    }
    let n = d.pending.len();
    let keep = match rng.random_range(0..10) {
        0..4 => 0,
        4..7 => n,
        _ => rng.random_range(0..=n),
    };
    let mut entries = d.durable.clone();
    for op in &d.pending[..keep] {
        match op {
            DirOp::Link(name, ino) => {
                entries.insert(name.clone(), *ino);
            }
            DirOp::Unlink(name) => {
                entries.remove(name);
            }
            DirOp::Rename(from, to) => {
                if let Some(ino) = entries.remove(from) {
                    entries.insert(to.clone(), ino);
                }
            }
        }
    }
    stats.dir_changes_kept += keep as u64;
    stats.dir_changes_lost += (n - keep) as u64;
    d.durable = entries.clone();
    d.entries = entries;
    d.pending.clear();
}

fn lose_file_changes(f: &mut FileNode, sector: usize, rng: &mut StdRng, stats: &mut Stats) {
    let (d_len, c_len) = (f.durable.len(), f.data.len());
    let stable = f.low.min(d_len);
    if f.data == f.durable && stable == d_len {
        f.low = c_len;
        return;
    }
    let top = d_len.max(c_len);
    // What a reader would see at offset i if the unsynced change had all reached the disk.
    let new_at = |f: &FileNode, i: usize| {
        if i < c_len {
            f.data[i]
        } else if i < d_len {
            f.durable[i]
        } else {
            0
        }
    };
    let old_at = |f: &FileNode, i: usize| if i < d_len { f.durable[i] } else { 0 };
    let mut out = f.durable[..stable].to_vec();
    match rng.random_range(0..10) {
        0..3 => {
            stats.files_kept_whole += 1;
            out = f.data.clone();
        }
        3..5 => {
            stats.files_lost_whole += 1;
            out = f.durable.clone();
        }
        5..7 => {
            stats.files_cut_to_prefix += 1;
            let len = rng.random_range(stable..=top);
            out.extend((stable..len).map(|i| new_at(f, i)));
        }
        _ => {
            stats.files_sector_mix += 1;
            let len = match rng.random_range(0..3) {
                0 => c_len,
                1 => d_len,
                _ => rng.random_range(stable..=top),
            };
            let mut i = stable;
            while i < len {
                let end = ((i / sector + 1) * sector).min(len);
                match rng.random_range(0..20) {
                    0..11 => {
                        stats.sectors_new += 1;
                        out.extend((i..end).map(|j| new_at(f, j)));
                    }
                    11..14 => {
                        stats.sectors_old += 1;
                        out.extend((i..end).map(|j| old_at(f, j)));
                    }
                    14..16 => {
                        stats.sectors_zero += 1;
                        out.extend(std::iter::repeat_n(0, end - i));
                    }
                    16..18 => {
                        stats.sectors_garbage += 1;
                        out.extend((i..end).map(|_| rng.random::<u8>()));
                    }
                    _ => {
                        stats.sectors_torn += 1;
                        let cut = rng.random_range(i..=end);
                        out.extend((i..cut).map(|j| new_at(f, j)));
                        if rng.random_bool(0.5) {
                            out.extend(std::iter::repeat_n(0, end - cut));
                        } else {
                            out.extend((cut..end).map(|_| rng.random::<u8>()));
                        }
                    }
                }
                i = end;
            }
        }
    }
    f.durable = out.clone();
    f.low = out.len();
    f.data = out;
    f.cutback_failed = false;
}

/// The names of an absolute path's components; `None` for a relative one or one with `..`.
fn names(path: &Path) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut comps = path.components();
    if comps.next() != Some(Component::RootDir) {
        return None;
    }
    for c in comps {
        match c {
            Component::Normal(n) => out.push(n.to_str()?.to_string()),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

impl State {
    fn dir(&self, i: Ino) -> &DirNode {
        match &self.nodes[i] {
            Node::Dir(d) => d,
            Node::File(_) => panic!("inode {i} is not a directory"),
        }
    }

    fn dir_mut(&mut self, i: Ino) -> &mut DirNode {
        match &mut self.nodes[i] {
            Node::Dir(d) => d,
            Node::File(_) => panic!("inode {i} is not a directory"),
        }
    }

    fn file_mut(&mut self, i: Ino) -> &mut FileNode {
        match &mut self.nodes[i] {
            Node::File(f) => f,
            Node::Dir(_) => panic!("inode {i} is not a file"),
        }
    }

    fn resolve(&self, path: &Path) -> Option<Ino> {
        let mut cur = ROOT;
        for name in names(path)? {
            match &self.nodes[cur] {
                Node::Dir(d) => cur = *d.entries.get(&name)?,
                Node::File(_) => return None,
            }
        }
        Some(cur)
    }

    /// The directory holding `path`, and the last name.
    fn parent(&self, path: &Path) -> io::Result<(Ino, String)> {
        let mut n = names(path).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not absolute"))?;
        let name = n.pop().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no name"))?;
        let mut cur = ROOT;
        for c in n {
            match &self.nodes[cur] {
                Node::Dir(d) => cur = *d.entries.get(&c).ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?,
                Node::File(_) => return Err(io::Error::from(io::ErrorKind::NotADirectory)),
            }
        }
        match self.nodes[cur] {
            Node::Dir(_) => Ok((cur, name)),
            Node::File(_) => Err(io::Error::from(io::ErrorKind::NotADirectory)),
        }
    }

    /// Counts an operation towards the scheduled crash. `Err` when the disk is (now) down; `Ok(true)`
    /// when this very operation is the one the crash interrupts (it may half happen).
    fn tick(&mut self, op: impl FnOnce() -> String) -> io::Result<bool> {
        if self.trace {
            eprintln!("disk: {} (ops left {:?}, {:?})", op(), self.ops_left, self.power);
        }
        if self.power == Power::Down {
            return Err(power_err());
        }
        if let Some(n) = &mut self.ops_left {
            if *n == 0 {
                self.power = Power::Down;
                self.ops_left = None;
                return Ok(true);
            }
            *n -= 1;
        }
        Ok(false)
    }

    /// Whether an operation that can fail should, by the fault rate.
    fn faulty(&mut self) -> bool {
        self.fault_rate > 0.0 && self.rng.random_bool(self.fault_rate)
    }

    fn link(&mut self, dir: Ino, name: String, node: Node) -> Ino {
        let i = self.nodes.len();
        self.nodes.push(node);
        let d = self.dir_mut(dir);
        d.entries.insert(name.clone(), i);
        d.pending.push(DirOp::Link(name, i));
        i
    }

    fn copy_dir(&self, dir: Ino, to: &Path) -> io::Result<()> {
        std::fs::create_dir_all(to)?;
        for (name, &ino) in &self.dir(dir).entries {
            let p = to.join(name);
            match &self.nodes[ino] {
                Node::Dir(_) => self.copy_dir(ino, &p)?,
                Node::File(f) => std::fs::write(&p, &f.data)?,
            }
        }
        Ok(())
    }
}

/// The operations as a file system's calls see them; [`Disk`] below adds the path to each error.
impl SimDisk {
    fn open_io(&self, path: &Path, how: Open) -> io::Result<Box<dyn DiskFile>> {
        let mut st = self.state();
        let interrupted = st.tick(|| format!("open {} {how:?}", path.display()))?;
        let (dir, name) = st.parent(path)?;
        let existing = st.dir(dir).entries.get(&name).copied();
        let ino = match (existing, how) {
            (Some(_), Open::CreateNew { .. }) => return Err(io::Error::from(io::ErrorKind::AlreadyExists)),
            (Some(i), Open::Append) => match st.nodes[i] {
                Node::File(_) => i,
                Node::Dir(_) => return Err(io::Error::from(io::ErrorKind::IsADirectory)),
            },
            (None, _) => {
                if st.faulty() {
                    st.stats.faults_dir += 1;
                    return Err(fault("create"));
                }
                let node = FileNode { durable: Vec::new(), data: Vec::new(), low: 0, cutback_failed: false };
                let i = st.link(dir, name, Node::File(node));
                if interrupted {
                    return Err(power_err());
                }
                i
            }
        };
        if interrupted {
            return Err(power_err());
        }
        Ok(Box::new(SimFile { disk: self.clone(), ino, generation: st.generation }))
    }

    fn create_dir_io(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state();
        let interrupted = st.tick(|| format!("mkdir {}", path.display()))?;
        let (dir, name) = st.parent(path)?;
        if st.dir(dir).entries.contains_key(&name) {
            return Err(io::Error::from(io::ErrorKind::AlreadyExists));
        }
        if st.faulty() {
            st.stats.faults_dir += 1;
            return Err(fault("mkdir"));
        }
        if interrupted && st.rng.random_bool(0.5) {
            return Err(power_err());
        }
        st.link(dir, name, Node::Dir(DirNode::default()));
        if interrupted { Err(power_err()) } else { Ok(()) }
    }

    fn rename_io(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.state();
        let interrupted = st.tick(|| format!("rename {} -> {}", from.display(), to.display()))?;
        let (dir, from_name) = st.parent(from)?;
        let (to_dir, to_name) = st.parent(to)?;
        assert_eq!(dir, to_dir, "the simulated disk renames within one directory only");
        if !st.dir(dir).entries.contains_key(&from_name) {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        if st.faulty() {
            st.stats.faults_dir += 1;
            return Err(fault("rename"));
        }
        if interrupted && st.rng.random_bool(0.5) {
            return Err(power_err());
        }
        let d = st.dir_mut(dir);
        let ino = d.entries.remove(&from_name).expect("checked");
        d.entries.insert(to_name.clone(), ino);
        d.pending.push(DirOp::Rename(from_name, to_name));
        if interrupted { Err(power_err()) } else { Ok(()) }
    }

    fn remove_file_io(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state();
        let interrupted = st.tick(|| format!("unlink {}", path.display()))?;
        let (dir, name) = st.parent(path)?;
        let d = st.dir_mut(dir);
        if d.entries.remove(&name).is_none() {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        d.pending.push(DirOp::Unlink(name));
        if interrupted { Err(power_err()) } else { Ok(()) }
    }

    fn sync_dir_io(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state();
        if st.tick(|| format!("sync_dir {}", path.display()))? {
            return Err(power_err());
        }
        let ino = st.resolve(path).ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        if st.faulty() {
            st.stats.faults_dir += 1;
            return Err(fault("directory sync"));
        }
        if st.sabotage.skip_dir_sync {
            return Ok(());
        }
        let d = match &mut st.nodes[ino] {
            Node::Dir(d) => d,
            Node::File(_) => return Err(io::Error::from(io::ErrorKind::NotADirectory)),
        };
        d.durable = d.entries.clone();
        d.pending.clear();
        Ok(())
    }
}

fn at(action: &str, path: &Path) -> impl FnOnce(io::Error) -> Error {
    let action = action.to_string();
    let path = path.to_path_buf();
    move |source| Error::Io { action, path, source }
}

impl Disk for SimDisk {
    fn open(&self, path: &Path, how: Open) -> SessionResult<Box<dyn DiskFile>> {
        self.open_io(path, how).map_err(at("cannot open", path))
    }

    fn create_dir(&self, path: &Path) -> SessionResult<bool> {
        match self.create_dir_io(path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(at("cannot create directory", path)(e)),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> SessionResult<()> {
        self.rename_io(from, to).map_err(at("cannot rename into place", to))
    }

    fn remove_file(&self, path: &Path) {
        let _ = self.remove_file_io(path);
    }

    fn sync_dir(&self, path: &Path) -> SessionResult<()> {
        self.sync_dir_io(path).map_err(at("cannot sync directory", path))
    }

    fn file_len(&self, path: &Path) -> Option<u64> {
        let st = self.state();
        if st.power == Power::Down {
            return None;
        }
        match &st.nodes[st.resolve(path)?] {
            Node::File(f) => Some(f.data.len() as u64),
            Node::Dir(_) => None,
        }
    }

    fn is_dir(&self, path: &Path) -> bool {
        let st = self.state();
        st.power == Power::On && st.resolve(path).is_some_and(|i| matches!(st.nodes[i], Node::Dir(_)))
    }

    fn lock(&self, _ctx: &Context) -> SessionResult<Option<Guard>> {
        Ok(None)
    }

    fn activity(&self, _sessions_dir: &Path) -> Option<File> {
        None
    }
}

/// An open file of the simulated disk.
#[derive(Debug)]
struct SimFile {
    disk: SimDisk,
    ino: Ino,
    generation: u64,
}

impl SimFile {
    /// The disk's state, if this handle's process is still alive.
    fn live(&self) -> io::Result<MutexGuard<'_, State>> {
        let st = self.disk.state();
        if st.generation != self.generation {
            return Err(io::Error::other("simulated crash: this file's process is gone"));
        }
        Ok(st)
    }

    fn sync(&mut self) -> io::Result<()> {
        let mut st = self.live()?;
        if st.tick(|| format!("sync #{}", self.ino))? {
            return Err(power_err());
        }
        if st.faulty() {
            st.stats.faults_sync += 1;
            let f = st.file_mut(self.ino);
            if f.low < f.durable.len() {
                f.cutback_failed = true;
            }
            return Err(fault("sync"));
        }
        if st.sabotage.skip_file_sync {
            return Ok(());
        }
        let f = st.file_mut(self.ino);
        f.durable = f.data.clone();
        f.low = f.data.len();
        Ok(())
    }
}

impl DiskFile for SimFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let mut st = self.live()?;
        let interrupted = st.tick(|| format!("write #{} {} bytes", self.ino, buf.len()))?;
        // A full disk, or the crash, stops a write part way.
        let failed = !interrupted && st.faulty();
        let n = if interrupted || failed { st.rng.random_range(0..=buf.len()) } else { buf.len() };
        st.file_mut(self.ino).data.extend_from_slice(&buf[..n]);
        if failed {
            st.stats.faults_write += 1;
            return Err(io::Error::new(io::ErrorKind::StorageFull, "simulated full disk"));
        }
        if interrupted { Err(power_err()) } else { Ok(()) }
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut st = self.live()?;
        if st.tick(|| format!("read_at #{} {offset}", self.ino))? {
            return Err(power_err());
        }
        let f = st.file_mut(self.ino);
        let start = (offset as usize).min(f.data.len());
        let n = buf.len().min(f.data.len() - start);
        buf[..n].copy_from_slice(&f.data[start..start + n]);
        Ok(n)
    }

    fn size(&self) -> io::Result<u64> {
        let mut st = self.live()?;
        if st.tick(|| format!("len #{}", self.ino))? {
            return Err(power_err());
        }
        Ok(st.file_mut(self.ino).data.len() as u64)
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        let mut st = self.live()?;
        let interrupted = st.tick(|| format!("set_len #{} {len}", self.ino))?;
        if !interrupted && st.faulty() {
            st.stats.faults_set_len += 1;
            st.file_mut(self.ino).cutback_failed = true;
            return Err(fault("truncate"));
        }
        if interrupted && st.rng.random_bool(0.5) {
            return Err(power_err());
        }
        let retried = {
            let f = st.file_mut(self.ino);
            f.data.resize(len as usize, 0);
            f.low = f.low.min(len as usize);
            std::mem::take(&mut f.cutback_failed)
        };
        if retried {
            st.stats.cutback_retries += 1;
        }
        if interrupted { Err(power_err()) } else { Ok(()) }
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.sync()
    }

    fn sync_all(&mut self) -> io::Result<()> {
        self.sync()
    }
}
