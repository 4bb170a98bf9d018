//! Work that must not run on Neovim's main loop (reading a session, listing thousands of them), done
//! on the bridge's own threads and handed back to a Lua callback on the main thread.
//!
//! Two worker threads take jobs from one queue. A job may name a *lane*: queuing a job in a lane
//! drops the lane's jobs that have not started yet (their callbacks hear `false, "superseded"`), so
//! moving the picker's highlight across five 50 MiB sessions reads at most the one being read and
//! the last one asked for, not all five.
//!
//! Results come back through one libuv async handle (wake-ups merge: each wake-up delivers every
//! finished job), then a `schedule`d callback, where the value is converted to Lua (nvim-oxi's
//! `Object` is not `Send`, so the conversion runs on the main thread). Both callbacks Neovim runs are
//! behind `catch_unwind`, and so is every job.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use nvim_oxi::libuv::AsyncHandle;
use nvim_oxi::serde::Serializer;
use nvim_oxi::{Function, Object};
use serde::Serialize;

use super::{BridgeError, BridgeResult, CallbackPoint, guarded_callback, payload_text, test_panic_point};

/// Lua's `callback(ok, value_or_message)`.
pub type Callback = Function<(bool, Object), ()>;

/// A finished job's outcome, converted to Lua on the main thread.
type Outcome = Box<dyn FnOnce() -> (bool, Object) + Send>;

struct Job {
    ticket: u64,
    lane: Option<&'static str>,
    work: Box<dyn FnOnce() -> Outcome + Send>,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Job>,
    finished: Vec<(u64, Outcome)>,
    next_ticket: u64,
}

struct Pool {
    queue: Mutex<Queue>,
    ready: Condvar,
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
    static CALLBACKS: RefCell<HashMap<u64, Callback>> = RefCell::new(HashMap::new());
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
    let pool = Arc::new(Pool { queue: Mutex::new(Queue::default()), ready: Condvar::new(), wake: Mutex::new(wake) });
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
                    break job;
                }
                q = pool.ready.wait(q).unwrap_or_else(PoisonError::into_inner);
            }
        };
        let outcome = panic::catch_unwind(AssertUnwindSafe(job.work)).unwrap_or_else(|p| {
            let message = format!("internal error (panic): {}", payload_text(p.as_ref()));
            Box::new(move || (false, Object::from(message)))
        });
        lock(&pool.queue).finished.push((job.ticket, outcome));
        pool.wake();
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
    let job_work: Box<dyn FnOnce() -> Outcome + Send> = Box::new(move || {
        let result = work();
        Box::new(move || match result.and_then(|v| v.serialize(Serializer::new()).map_err(BridgeError::from)) {
            Ok(value) => (true, value),
            Err(e) => (false, Object::from(format!("pseudoclaude_core.{name}: {e}"))),
        })
    });
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
        }
        CALLBACKS.with(|c| c.borrow_mut().insert(ticket, callback));
        q.waiting.push_back(Job { ticket, lane, work: job_work });
        for t in &dropped {
            q.finished.push((*t, Box::new(|| (false, Object::from(SUPERSEDED)))));
        }
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

/// On the main thread: hands every finished job to its callback.
fn deliver() {
    let Some(pool) = POOL.get() else { return };
    let finished = std::mem::take(&mut lock(&pool.queue).finished);
    for (ticket, outcome) in finished {
        let Some(callback) = CALLBACKS.with(|c| c.borrow_mut().remove(&ticket)) else { continue };
        let _ = panic::catch_unwind(AssertUnwindSafe(|| {
            let (ok, value) = outcome();
            // The callback is Lua's (called under pcall by nvim-oxi); an error in it stays there.
            let _ = callback.call((ok, value));
        }));
    }
}
