//! Work that must not run on Neovim's main loop (reading a session, listing thousands of them), done
//! on the bridge's own threads and handed back to a Lua callback on the main thread.
//!
//! Two worker threads take jobs from one queue. A job may name a *lane*: queuing a job in a lane
//! drops the lane's jobs that have not started yet (their callbacks hear `false, "superseded"`), so
//! moving the picker's highlight across five 50 MiB sessions reads at most the one being read and
//! the last one asked for, not all five; it also raises the cancel flag of the lane's running jobs,
//! which a job that checks it ([`Stream::cancelled`]) obeys by stopping early.
//!
//! A *streaming* job ([`spawn_stream`], the session search) runs on a thread of its own and hands
//! back several results as it goes ([`Stream::send`]), each to its callback as `true, batch, true`,
//! then its outcome as `ok, value, false`; once it is cancelled ([`cancel`], or a newer job in its
//! lane) no batch of it reaches Lua any more and its outcome is `false, "cancelled"`.
//!
//! Results come back through one libuv async handle (wake-ups merge: each wake-up delivers every
//! finished job), then a `schedule`d callback, where the value is converted to Lua (nvim-oxi's
//! `Object` is not `Send`, so the conversion runs on the main thread). Both callbacks Neovim runs are
//! behind `catch_unwind`, and so is every job.
//!
//! A *write* ([`spawn_write`]: a name, a pin, a fork, an import, an export) is work the user was told is
//! under way: Neovim's exit waits for it ([`finish_writes`], at `VimLeavePre`), bounded, and says which it
//! gave up on; the reads are dropped then.
//!
//! Architecture invariant: a job's work never runs on the editor's main thread while the editor runs, and
//! what it hands back is delivered there through the libuv async handle, drained whole on each wake-up. At
//! exit the main thread runs the writes not started yet itself: nothing is left to wait for then.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use nvim_oxi::libuv::AsyncHandle;
use nvim_oxi::{Function, Object};
use serde::Serialize;

use super::{BridgeError, BridgeResult, CallbackPoint, LuaFn, guarded_callback, payload_text, test_panic_point};

/// Lua's `callback(ok, value_or_message)`, as an export takes it ([`super::Args::function`]): freed from Lua's
/// registry if the job cannot be queued, else after its last call.
pub type Callback = LuaFn<(bool, Object), ()>;

/// Lua's `callback(ok, value_or_message, more)` of a streaming job: `more` is true for each batch,
/// false for the outcome, which comes last.
pub type StreamCallback = LuaFn<(bool, Object, bool), ()>;

/// A finished job's outcome, converted to Lua on the main thread.
type Outcome = Box<dyn FnOnce() -> (bool, Object) + Send>;

struct Job {
    ticket: u64,
    lane: Option<&'static str>,
    cancel: Arc<AtomicBool>,
    /// A write: what it writes, for the message when the exit gives up on it.
    write: Option<String>,
    work: Box<dyn FnOnce() -> Outcome + Send>,
}

/// A job being worked on.
struct Running {
    ticket: u64,
    lane: Option<&'static str>,
    cancel: Arc<AtomicBool>,
    write: Option<String>,
}

/// What goes back to the main thread: a job's outcome (`last`), or one batch of a streaming job.
struct Delivery {
    ticket: u64,
    outcome: Outcome,
    last: bool,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Job>,
    finished: Vec<Delivery>,
    next_ticket: u64,
    /// Jobs being worked on.
    running: Vec<Running>,
}

/// A job's callback as [`queue`] is handed it: dropped (so freed) when the job cannot be queued.
enum Handed {
    Once(Callback),
    Stream(StreamCallback),
}

/// A Lua callback waiting for its job (kept: freed by [`Waiting::release`]).
enum Waiting {
    Once(Function<(bool, Object), ()>),
    Stream(Function<(bool, Object, bool), ()>, Arc<AtomicBool>),
}

struct Pool {
    queue: Mutex<Queue>,
    ready: Condvar,
    /// Notified whenever a job is over: the exit waits on it for the writes.
    over: Condvar,
    /// `uv_async_send` may be called from any thread; the mutex only makes the handle `Sync`.
    wake: Mutex<AsyncHandle>,
}

impl Pool {
    fn wake(&self) {
        let _ = self.wake.lock().unwrap_or_else(PoisonError::into_inner).send();
    }
}

static POOL: OnceLock<Arc<Pool>> = OnceLock::new();

const WORKERS: usize = 2;

thread_local! {
    // Main thread only: the Lua callbacks by ticket.
    static CALLBACKS: RefCell<HashMap<u64, Waiting>> = RefCell::new(HashMap::new());
}

fn lock(m: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn pool() -> BridgeResult<Arc<Pool>> {
    if let Some(p) = POOL.get() {
        return Ok(p.clone());
    }
    let wake = AsyncHandle::new(|| {
        // Runs on the main thread; nothing may unwind into libuv (a panic is logged and told).
        guarded_callback("the worker threads' wake-up", || {
            test_panic_point(CallbackPoint::Wakeup);
            nvim_oxi::schedule(|_| {
                guarded_callback("the worker threads' delivery", || {
                    test_panic_point(CallbackPoint::Scheduled);
                    deliver();
                })
            })
        });
    })
    .map_err(|e| BridgeError::msg(format!("cannot create the event handle: {e}")))?;
    let pool = Arc::new(Pool {
        queue: Mutex::new(Queue::default()),
        ready: Condvar::new(),
        over: Condvar::new(),
        wake: Mutex::new(wake),
    });
    for n in 0..WORKERS {
        let p = pool.clone();
        std::thread::Builder::new()
            .name(format!("pseudoclaude-job-{n}"))
            .spawn(move || work(&p))
            .map_err(|e| BridgeError::msg(format!("cannot start a worker thread: {e}")))?;
    }
    // Exports run on the main thread only, so no other pool can have been set meanwhile.
    Ok(POOL.get_or_init(|| pool).clone())
}

fn work(pool: &Pool) {
    lower_priority();
    loop {
        let job = {
            let mut q = lock(&pool.queue);
            loop {
                if let Some(job) = q.waiting.pop_front() {
                    q.running.push(job.running());
                    break job;
                }
                q = pool.ready.wait(q).unwrap_or_else(PoisonError::into_inner);
            }
        };
        run(pool, job);
    }
}

/// Runs `job` (already in `running`) and queues its outcome.
fn run(pool: &Pool, job: Job) {
    let outcome = panic::catch_unwind(AssertUnwindSafe(job.work)).unwrap_or_else(|p| {
        let message = format!("internal error (panic): {}", payload_text(p.as_ref()));
        Box::new(move || (false, Object::from(message)))
    });
    let mut q = lock(&pool.queue);
    q.running.retain(|r| r.ticket != job.ticket);
    q.finished.push(Delivery { ticket: job.ticket, outcome, last: true });
    drop(q);
    pool.over.notify_all();
    pool.wake();
}

impl Job {
    fn running(&self) -> Running {
        Running { ticket: self.ticket, lane: self.lane, cancel: self.cancel.clone(), write: self.write.clone() }
    }
}

/// Queues `work` on the worker threads and returns its ticket at once; `callback(true, value)` or
/// `callback(false, "<message>")` runs later on the main thread. `name` prefixes error messages.
pub fn spawn<T, F>(name: &'static str, lane: Option<&'static str>, callback: Callback, work: F) -> BridgeResult<u64>
where
    T: Serialize + Send + 'static,
    F: FnOnce() -> BridgeResult<T> + Send + 'static,
{
    let pool = pool()?;
    queue(&pool, lane, Arc::new(AtomicBool::new(false)), Handed::Once(callback), None, false, |_| {
        Box::new(move || to_lua(name, work()))
    })
}

/// [`spawn`] for a write (`what`: what it writes, e.g. "the name of session 20260101-…"): Neovim's exit
/// waits for it ([`finish_writes`]). In no lane: a write is never superseded.
pub fn spawn_write<T, F>(name: &'static str, what: String, callback: Callback, work: F) -> BridgeResult<u64>
where
    T: Serialize + Send + 'static,
    F: FnOnce() -> BridgeResult<T> + Send + 'static,
{
    let pool = pool()?;
    queue(&pool, None, Arc::new(AtomicBool::new(false)), Handed::Once(callback), Some(what), false, |_| {
        Box::new(move || to_lua(name, work()))
    })
}

/// At Neovim's exit (`VimLeavePre`): completes every write accepted so far, within `timeout`, and returns what
/// it gave up on (empty when all are done). The reads are dropped (not started) or told to stop (running):
/// nobody will see them. A write not started yet runs here, on the main thread, so busy workers cannot
/// hold it up; one running on a worker is waited for. Given up: a write not started never starts (nothing of
/// it is written), one still running is named; each write is whole or absent on disk (one log line and its
/// `fdatasync`; an export renamed into place), so the process ending under it leaves nothing half written.
pub fn finish_writes(timeout: Duration) -> Vec<String> {
    let Some(pool) = POOL.get() else { return Vec::new() };
    let deadline = Instant::now() + timeout;
    let mut q = lock(&pool.queue);
    q.waiting.retain(|j| j.write.is_some());
    for r in q.running.iter().filter(|r| r.write.is_none()) {
        r.cancel.store(true, Ordering::Relaxed);
    }
    loop {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        if let Some(job) = q.waiting.pop_front() {
            q.running.push(job.running());
            drop(q);
            run(pool, job);
            q = lock(&pool.queue);
            continue;
        }
        if !q.running.iter().any(|r| r.write.is_some()) {
            return Vec::new();
        }
        q = pool.over.wait_timeout(q, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
    }
    let mut given_up: Vec<String> =
        q.waiting.drain(..).filter_map(|j| j.write).map(|w| format!("{w} (not started: nothing written)")).collect();
    given_up.extend(q.running.iter().filter_map(|r| r.write.clone()).map(|w| format!("{w} (still running)")));
    given_up
}

/// Starts a streaming job: `work` may [`Stream::send`] batches as it goes (each reaches
/// `callback(true, batch, true)` on the main thread, in order), then its result is the outcome,
/// `callback(ok, value, false)`. Returns its ticket at once. It runs on a thread of its own, not in
/// the workers' queue: a search typed while the full list of a large workspace is being read (or a
/// preview of a 100 MiB session) must not wait for it; the lane still cancels the one before.
pub fn spawn_stream<T, F>(
    name: &'static str,
    lane: Option<&'static str>,
    callback: StreamCallback,
    work: F,
) -> BridgeResult<u64>
where
    T: Serialize + Send + 'static,
    F: FnOnce(&Stream) -> BridgeResult<T> + Send + 'static,
{
    let pool = pool()?;
    let cancel = Arc::new(AtomicBool::new(false));
    let stream = Stream { pool: pool.clone(), ticket: 0, cancel: cancel.clone() };
    queue(&pool, lane, cancel, Handed::Stream(callback), None, true, move |ticket| {
        let stream = Stream { ticket, ..stream };
        Box::new(move || {
            let result = work(&stream);
            if stream.cancelled() {
                return Box::new(|| (false, Object::from(CANCELLED)));
            }
            to_lua(name, result)
        })
    })
}

/// A job's result, converted to Lua when it is delivered.
fn to_lua<T: Serialize + Send + 'static>(name: &'static str, result: BridgeResult<T>) -> Outcome {
    // Made plain here, on the worker's thread; the main thread only converts it.
    let result = result.and_then(|v| super::lua_value(&v));
    Box::new(move || match result.and_then(|v| super::to_lua(&v)) {
        Ok(value) => (true, value),
        Err(e) => (false, Object::from(format!("pseudoclaude_core.{name}: {e}"))),
    })
}

fn queue(
    pool: &Arc<Pool>,
    lane: Option<&'static str>,
    cancel: Arc<AtomicBool>,
    callback: Handed,
    write: Option<String>,
    own_thread: bool,
    work: impl FnOnce(u64) -> Box<dyn FnOnce() -> Outcome + Send>,
) -> BridgeResult<u64> {
    let superseded = {
        let mut q = lock(&pool.queue);
        q.next_ticket += 1;
        let ticket = q.next_ticket;
        let mut dropped = Vec::new();
        if lane.is_some() {
            q.waiting.retain(|j| {
                let same = j.lane == lane;
                if same {
                    dropped.push(j.ticket);
                }
                !same
            });
            for r in &q.running {
                if r.lane == lane {
                    r.cancel.store(true, Ordering::Relaxed);
                }
            }
        }
        for t in &dropped {
            q.finished.push(Delivery {
                ticket: *t,
                outcome: Box::new(|| (false, Object::from(SUPERSEDED))),
                last: true,
            });
        }
        let waiting = match callback {
            Handed::Once(c) => Waiting::Once(c.keep()),
            Handed::Stream(c) => Waiting::Stream(c.keep(), cancel.clone()),
        };
        let job = Job { ticket, lane, cancel, write, work: work(ticket) };
        if own_thread {
            q.running.push(job.running());
            let p = pool.clone();
            let started = std::thread::Builder::new().name("pseudoclaude-stream".into()).spawn(move || {
                lower_priority(); // threads it starts inherit it
                run(&p, job)
            });
            if let Err(e) = started {
                q.running.retain(|r| r.ticket != ticket);
                drop(q);
                waiting.release();
                if !dropped.is_empty() {
                    pool.wake(); // the jobs it superseded are told now, not at the next job's end
                }
                return Err(BridgeError::msg(format!("cannot start a thread: {e}")));
            }
        } else {
            q.waiting.push_back(job);
        }
        CALLBACKS.with(|c| c.borrow_mut().insert(ticket, waiting));
        (ticket, !dropped.is_empty())
    };
    pool.ready.notify_one();
    if superseded.1 {
        pool.wake();
    }
    Ok(superseded.0)
}

/// Worker threads yield the CPU to the editor's main thread: on two cores, two workers reading 50 MiB
/// logs (a preview the highlight has already left keeps running) otherwise took turns with it and
/// stretched its steps to three times the idle worst gap. Only under contention does it change
/// anything. Linux applies `setpriority` to the calling thread alone; elsewhere nothing is done.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain syscalls on the calling thread; a failure leaves the priority as it was.
    unsafe {
        let tid = libc::gettid();
        let _ = libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, WORKER_NICE);
    }
}

/// The workers' nice value (the editor's main thread keeps its own, usually 0).
const WORKER_NICE: libc::c_int = 10;

/// What the callback of a job dropped from its lane receives.
pub const SUPERSEDED: &str = "superseded";
/// What the callback of a cancelled streaming job receives last.
pub const CANCELLED: &str = "cancelled";

/// A streaming job's way back to the main thread, and its cancel flag.
pub struct Stream {
    pool: Arc<Pool>,
    ticket: u64,
    cancel: Arc<AtomicBool>,
}

impl Stream {
    /// Whether the job was cancelled: it should stop soon (its outcome is dropped anyway).
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// The cancel flag itself, for work that polls an `AtomicBool`.
    pub fn flag(&self) -> &AtomicBool {
        &self.cancel
    }

    /// Hands `batch` to the callback (as `true, batch, true`); false once cancelled (nothing sent).
    pub fn send<T: Serialize + Send + 'static>(&self, batch: T) -> bool {
        if self.cancelled() {
            return false;
        }
        let batch = super::lua_value(&batch);
        let outcome: Outcome = Box::new(move || match batch.and_then(|v| super::to_lua(&v)) {
            Ok(value) => (true, value),
            Err(e) => (false, Object::from(e.to_string())),
        });
        lock(&self.pool.queue).finished.push(Delivery { ticket: self.ticket, outcome, last: false });
        self.pool.wake();
        true
    }
}

/// Cancels job `ticket`: one not started is dropped (its callback hears `false, "cancelled"`), a
/// running one has its cancel flag raised. False when there is no such job (it is over).
pub fn cancel(ticket: u64) -> bool {
    let Some(pool) = POOL.get() else { return false };
    let mut q = lock(&pool.queue);
    if let Some(r) = q.running.iter().find(|r| r.ticket == ticket) {
        r.cancel.store(true, Ordering::Relaxed);
        return true;
    }
    let Some(i) = q.waiting.iter().position(|j| j.ticket == ticket) else { return false };
    if let Some(job) = q.waiting.remove(i) {
        job.cancel.store(true, Ordering::Relaxed);
    }
    q.finished.push(Delivery { ticket, outcome: Box::new(|| (false, Object::from(CANCELLED))), last: true });
    drop(q);
    pool.wake();
    true
}

/// On the main thread: hands every finished job (and every batch) to its callback.
fn deliver() {
    let Some(pool) = POOL.get() else { return };
    let finished = std::mem::take(&mut lock(&pool.queue).finished);
    for Delivery { ticket, outcome, last } in finished {
        // Out of the map while it runs: the callback may queue or cancel jobs.
        let Some(waiting) = CALLBACKS.with(|c| c.borrow_mut().remove(&ticket)) else { continue };
        if let Waiting::Stream(_, flag) = &waiting
            && !last
            && flag.load(Ordering::Relaxed)
        {
            // A batch of a cancelled search: never shown.
            CALLBACKS.with(|c| c.borrow_mut().insert(ticket, waiting));
            continue;
        }
        let keep = panic::catch_unwind(AssertUnwindSafe(|| {
            let (ok, value) = outcome();
            // The callback is Lua's (called under pcall by nvim-oxi); an error in it stays there.
            match &waiting {
                Waiting::Once(callback) => {
                    let _ = callback.call((ok, value));
                }
                Waiting::Stream(callback, _) => {
                    let _ = callback.call((ok, value, !last));
                }
            }
        }));
        if !last && keep.is_ok() {
            CALLBACKS.with(|c| c.borrow_mut().insert(ticket, waiting));
        } else {
            waiting.release();
        }
    }
}

impl Waiting {
    /// Drops the callback's reference in Lua's registry: an nvim-oxi `Function` dropped keeps it (and with it the
    /// closure and all it holds: a picker's whole state, its list and its matcher, for each `:PseudoResume`).
    fn release(self) {
        match self {
            Waiting::Once(callback) => callback.remove_from_lua_registry(),
            Waiting::Stream(callback, _) => callback.remove_from_lua_registry(),
        }
    }
}
