//! The Neovim side of the Rust core: the `luaopen_pseudoclaude_core` entry point and its exports.
//!
//! # Why every export goes through [`export`]
//!
//! In nvim-oxi 0.6 a Rust `Err` handed back to Lua, a Rust panic, or even a Lua argument that
//! cannot be converted to the declared Rust type ends in `lua_error()` being raised through Rust
//! frames, which aborts the whole Neovim process, `pcall` or not (nvim-oxi issue #231). So no
//! exported function lets anything escape:
//!
//! * arguments arrive as [`Args`], whose conversion from the Lua stack never fails (a value that
//!   cannot be converted, such as `vim.NIL` or a coroutine, is recorded and reported as an error
//!   value when the function asks for that argument);
//! * the body runs inside [`std::panic::catch_unwind`];
//! * the result is always the pair `ok, value`: `true, <value>` on success, or
//!   `false, "<error message>"` on an error or a panic.
//!
//! The Lua side (`lua/pseudoclaude/core.lua`, `M.call`) turns `false, msg` into a Lua `error()`.
//!
//! Panics are also written, with their location and a backtrace, to
//! `stdpath("log")/pseudoclaude-panic.log` by a panic hook installed at load time; nothing is
//! printed to the terminal (which would garble Neovim's screen).
//!
//! # Adding an export
//!
//! One line in [`exports`], or in the `exports()` of the feature's submodule (`sessions.rs`: the
//! session log; a new area gets a file of its own whose `exports()` is chained in [`exports`]):
//! `export("name", |a| ...)`, where the closure gets the arguments as
//! `&Args` (`a.get::<T>(0)?` converts argument 1 with serde; `Option<T>` makes it optional) and
//! returns `BridgeResult<T>` for any `T: Serialize` (structs become Lua tables). Any
//! `std::error::Error` converts with `?`. Lua calls it as `require("pseudoclaude.core").call("name", ...)`.
//! A Lua function argument is taken with `a.function(i)?` (never `get`): see [`LuaFn`].
//!
//! # How values cross
//!
//! One rule, by size. A result a user's call makes (an id, a session's info, a fork) crosses as a Lua value,
//! converted by nvim-oxi's serde `Serializer`. Bulk data (a preview, a slice of the
//! history a restore draws, search hits) crosses as JSON text made by [`bulk`] and decoded on the Lua side by
//! `core.decode()`, one place each: `vim.json.decode` builds thousands of tables several times faster than
//! nvim-oxi converts them one object at a time, and the main loop pays for that conversion (issue 8's budget
//! of one frame per step). A long result of an `on_done` form comes in JSON chunks ([`bulk_chunks`]), held by the
//! core and taken and decoded one per main-loop step ([`parts`]). The session list, the largest, is packed instead ([`rows`]: fixed binary records Lua reads
//! through the FFI, several times cheaper than JSON). Arguments cross as Lua values ([`Args`]); a table argument is
//! read with serde.
//!
//! Nil is nil: a `None` (JSON `null`) field is left out of a table on both paths, so Lua reads `nil`, never
//! `vim.NIL` ([`lua_value`] drops them before nvim-oxi converts a value; `core.decode()` reads JSON with
//! `luanil`). Only a `null` inside a list stays `vim.NIL`, since a `nil` there would cut the list short.
//!
//! Code reachable from `cargo test` must not call Neovim's C API (`nvim_oxi::api`): a test binary
//! has no Neovim to link against. Only the entry point does (to ask for `stdpath("log")`).
//!
//! Architecture invariant: nothing exported to Lua lets an `Err` or a panic through (nvim-oxi 0.6 would abort
//! Neovim): every export goes through `export()`/`guarded_call()`, every callback Neovim runs through
//! `guarded_callback()`. No other module of the crate knows Neovim.

pub mod agent;
pub mod full_list;
pub mod fuzzy;
pub mod jobs;
pub mod keep;
pub mod parts;
pub mod preview;
pub mod rows;
pub mod search;
pub mod sessions;
pub mod worktree;

use std::backtrace::Backtrace;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Once, OnceLock};

use nvim_oxi::lua::{self, Poppable, ffi};
use nvim_oxi::serde::{Deserializer, Serializer};
use nvim_oxi::{Dictionary, Function, Object, ObjectKind};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The crate version; `lua/pseudoclaude/core.lua` compares it with its own constant to detect a
/// stale library.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The SHA-256 of the sources this library was built from (`build.rs`), behind a marker so that a test can find it
/// in the file without loading it: `tests/e2e/conftest.py` refuses a library whose id is not the checkout's.
pub const BUILD_ID: &str = concat!("pseudoclaude-build-id:", env!("PSEUDOCLAUDE_BUILD_ID"));

/// The Neovim minor version whose API this library was compiled against (the crate feature `neovim-0-XX`, set by
/// `build.rs`): `:checkhealth` compares it with the running Neovim's.
pub const NVIM_API: &str = env!("PSEUDOCLAUDE_NVIM_API");

/// File name of the panic log, inside Neovim's `stdpath("log")`.
pub const PANIC_LOG_NAME: &str = "pseudoclaude-panic.log";

// ---------------------------------------------------------------------------------------------
// Entry point and export table
// ---------------------------------------------------------------------------------------------

/// The table returned by `require`/`package.loadlib(lib, "luaopen_pseudoclaude_core")()`.
///
/// Never returns `Err` (that would abort Neovim, see the module docs): if building the table
/// fails, the table holds only `version` and `_init_error` (a string) for Lua to report.
#[nvim_oxi::plugin]
fn pseudoclaude_core() -> nvim_oxi::Result<Dictionary> {
    install_panic_hook();
    ignore_sigxfsz();
    match panic::catch_unwind(exports) {
        Ok(dict) => Ok(dict),
        Err(payload) => Ok(Dictionary::from_iter([
            export("version", |_| Ok(VERSION)),
            ("_init_error", Object::from(panic_message(payload.as_ref()))),
        ])),
    }
}

/// Every function exported to Lua, one line each: `export("name", |args| ...)`.
///
/// Each returns `ok, value` to Lua (see [`export`]). Feature areas keep their exports in a
/// submodule with an `exports()` of its own (e.g. [`sessions::exports`]), chained here.
fn exports() -> Dictionary {
    let mut all = vec![
        // --- meta -----------------------------------------------------------------------------
        export("version", |_| Ok(VERSION)),
        export("build_id", |_| Ok(BUILD_ID.trim_start_matches("pseudoclaude-build-id:"))),
        export("nvim_api", |_| Ok(NVIM_API)),
        export("ping", |a| Ok(a.get::<Option<String>>(0)?.map_or_else(|| "pong".to_string(), |s| format!("pong {s}")))),
        export("panic_log_path", |_| Ok(panic_log_path().map(|p| p.display().to_string()))),
        // at `VimLeavePre` (core.lua): the writes accepted so far finish, within the time given (ms)
        // `:checkhealth`: the instruction files the system prompt is built from (workspace, user file)
        export("instructions", |a| {
            let user = a.get::<Option<String>>(1)?.filter(|u| !u.is_empty()).map(PathBuf::from);
            let found = crate::instructions::load(&crate::instructions::Sources::new(&workspace(a)?, user));
            let files: Vec<String> = found.files.iter().map(|p| p.display().to_string()).collect();
            Ok(serde_json::json!({ "files": files, "problems": found.problems }))
        }),
        export_object("bulk_take", parts::take),
        export("jobs_finish_writes", |a| Ok(jobs::finish_writes(std::time::Duration::from_millis(a.get::<u64>(0)?)))),
        // --- internal, for the end-to-end tests only (not a public API) ------------------------
        export("_test_panic", |_| -> BridgeResult<()> { panic!("_test_panic: deliberate panic") }),
        export("_test_err", |_| -> BridgeResult<()> { Err(BridgeError::msg("_test_err: deliberate error")) }),
        export("_test_echo", |a| (0..a.len()).map(|i| a.get::<serde_json::Value>(i)).collect::<BridgeResult<Vec<_>>>()),
        export("_test_panic_in_callback", |a| arm_test_callback_panic(&a.get::<String>(0)?)),
    ];
    all.extend(sessions::exports());
    all.extend(preview::exports());
    all.extend(search::exports());
    all.extend(keep::exports());
    all.extend(agent::exports());
    all.extend(fuzzy::exports());
    all.extend(worktree::exports());
    Dictionary::from_iter(all)
}

/// A write past the process's file-size limit (`ulimit -f`, `prlimit --fsize`) raises SIGXFSZ, whose
/// default action kills the process, and Neovim 0.11 leaves it at the default: a full session log
/// would take the whole editor down. Ignored, the write fails with `EFBIG` instead, which the writer
/// reports and cuts back like any failed write. Only a default disposition is changed: a handler
/// someone else installed stays.
fn ignore_sigxfsz() {
    // SAFETY: sigaction with a zeroed struct only reads the current disposition; setting SIG_IGN is
    // async-signal-safe and installs no Rust code as a handler.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGXFSZ, std::ptr::null(), &mut current) == 0 && current.sa_sigaction == libc::SIG_DFL
        {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The error-as-value wrapper
// ---------------------------------------------------------------------------------------------

/// Error returned by an exported function; becomes the message in `false, msg`.
///
/// Any `std::error::Error` converts into it with `?`; use [`BridgeError::msg`] for plain text.
/// (Like `anyhow::Error`, it deliberately does not implement `std::error::Error` itself, so that
/// the blanket `From` impl is allowed.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeError(String);

/// Result type of exported functions.
pub type BridgeResult<T> = Result<T, BridgeError>;

impl BridgeError {
    /// An error with the given message.
    pub fn msg(message: impl fmt::Display) -> Self {
        Self(message.to_string())
    }

    /// The error message.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for BridgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The error's message, then each of its sources that the message does not already quote (most of our errors
/// write their source into their own sentence; a wrapped one such as `HostError::Session` does not), so the
/// sources reach Lua, and the log file `errors.lua` writes, instead of being dropped at the boundary.
impl<E: std::error::Error> From<E> for BridgeError {
    fn from(err: E) -> Self {
        let mut text = err.to_string();
        let mut source = err.source();
        while let Some(e) = source {
            let said = e.to_string();
            if !said.is_empty() && !text.contains(&said) {
                text.push_str(": ");
                text.push_str(&said);
            }
            source = e.source();
        }
        Self(text)
    }
}

/// Makes `(name, function)` for the export table: `f` runs behind `catch_unwind`, its arguments
/// arrive as [`Args`], its `Ok` value is converted to a Lua value with nvim-oxi's serde
/// `Serializer`, and Lua receives `true, value` or `false, "pseudoclaude_core.<name>: <error>"`.
pub fn export<F, T>(name: &'static str, f: F) -> (&'static str, Object)
where
    F: Fn(&Args) -> BridgeResult<T> + 'static,
    T: Serialize,
{
    let fun = Function::<Args, (bool, Object)>::from_fn(move |args: Args| guarded_call(name, &f, &args));
    (name, Object::from(fun))
}

/// Runs `f` so that neither its error nor its panic escapes; returns the `ok, value` pair.
pub fn guarded_call<F, T>(name: &str, f: &F, args: &Args) -> (bool, Object)
where
    F: Fn(&Args) -> BridgeResult<T>,
    T: Serialize,
{
    guarded_object(name, || f(args).and_then(|value| to_lua(&lua_value(&value)?)))
}

/// [`export`] for a result made as a Lua value already: bytes that are not text ([`fuzzy`]'s packed indices).
pub fn export_object<F>(name: &'static str, f: F) -> (&'static str, Object)
where
    F: Fn(&Args) -> BridgeResult<Object> + 'static,
{
    let fun = Function::<Args, (bool, Object)>::from_fn(move |args: Args| guarded_object(name, || f(&args)));
    (name, Object::from(fun))
}

/// The `ok, value` pair of `f`, whose error or panic becomes `false, message`.
fn guarded_object(name: &str, f: impl FnOnce() -> BridgeResult<Object>) -> (bool, Object) {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => (true, value),
        Ok(Err(err)) => (false, Object::from(format!("pseudoclaude_core.{name}: {err}"))),
        Err(payload) => {
            let message = panic_message(payload.as_ref());
            let log = panic_log_path().map(|p| format!(" (details in {})", p.display())).unwrap_or_default();
            (false, Object::from(format!("pseudoclaude_core.{name}: internal error (panic): {message}{log}")))
        }
    }
}

/// `value` as Lua will receive it (see "How values cross" above): its `null` fields left out, at any depth. A
/// plain value, so a worker thread makes it and the main thread only converts it ([`to_lua`]).
pub fn lua_value<T: Serialize + ?Sized>(value: &T) -> BridgeResult<serde_json::Value> {
    fn drop_nulls(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                map.retain(|_, x| !x.is_null());
                map.values_mut().for_each(drop_nulls);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(drop_nulls),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(value)?;
    drop_nulls(&mut v);
    Ok(v)
}

/// A [`lua_value`] converted to Lua (main thread only: an `Object` is not `Send`).
pub fn to_lua(value: &serde_json::Value) -> BridgeResult<Object> {
    Ok(value.serialize(Serializer::new())?)
}

/// Bulk data as the JSON text `core.decode()` reads (see "How values cross" above).
pub fn bulk<T: Serialize + ?Sized>(value: &T) -> BridgeResult<String> {
    Ok(serde_json::to_string(value)?)
}

/// What one main-loop step decodes of a long bulk result ([`bulk_chunks`]): `vim.json.decode` takes well under 1 ms
/// for it on an idle machine, a few on a loaded one.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// `items` as JSON arrays of about `max_bytes` each (at least one item each), in order, for Lua to decode one per
/// main-loop step: a long result of an `on_done` form (`messages()`).
pub fn bulk_chunks<T: Serialize>(items: &[T], max_bytes: usize) -> BridgeResult<Vec<String>> {
    let mut chunks = Vec::new();
    let mut chunk = String::from("[");
    for item in items {
        let text = serde_json::to_string(item)?;
        if chunk.len() > 1 && chunk.len() + text.len() > max_bytes {
            chunk.push(']');
            chunks.push(std::mem::replace(&mut chunk, String::from("[")));
        }
        if chunk.len() > 1 {
            chunk.push(',');
        }
        chunk.push_str(&text);
    }
    if chunk.len() > 1 {
        chunk.push(']');
        chunks.push(chunk);
    }
    Ok(chunks)
}

// ---------------------------------------------------------------------------------------------
// Callbacks Neovim runs
// ---------------------------------------------------------------------------------------------

/// Runs a callback that Neovim's loop calls (a libuv wake-up, a `vim.schedule`d closure): those are
/// reached from C frames, where an unwinding panic aborts Neovim. A panic is caught here; the panic
/// hook has already written it to the panic log, and the user is told with `vim.notify` (scheduled,
/// so it also works from a libuv callback).
pub(crate) fn guarded_callback(name: &'static str, f: impl FnOnce()) {
    let Err(payload) = panic::catch_unwind(AssertUnwindSafe(f)) else { return };
    let message = panic_message(payload.as_ref());
    let log = panic_log_path().map(|p| format!(" (details in {})", p.display())).unwrap_or_default();
    let text = format!("pseudoclaude: internal error (panic) in {name}: {message}{log}");
    // Telling the user must not panic in turn; if even scheduling fails, the log has it.
    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
        nvim_oxi::schedule(move |_| {
            let _ = panic::catch_unwind(AssertUnwindSafe(|| {
                let _ = nvim_oxi::api::notify(&text, nvim_oxi::api::types::LogLevel::Error, &Dictionary::new());
            }));
        })
    }));
}

/// Where `_test_panic_in_callback` makes the next callback panic: 0 nowhere, else a [`CallbackPoint`].
static TEST_CALLBACK_PANIC: AtomicU8 = AtomicU8::new(0);

/// The two kinds of callbacks Neovim runs for us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum CallbackPoint {
    /// The libuv async handle's callback.
    Wakeup = 1,
    /// The closure it schedules.
    Scheduled = 2,
}

/// End-to-end tests only: the next callback of this kind panics, once (`"wakeup"` or `"scheduled"`).
fn arm_test_callback_panic(point: &str) -> BridgeResult<()> {
    let p = match point {
        "wakeup" => CallbackPoint::Wakeup,
        "scheduled" => CallbackPoint::Scheduled,
        other => {
            return Err(BridgeError::msg(format!("unknown callback point {other:?}: \"wakeup\" or \"scheduled\"")));
        }
    };
    TEST_CALLBACK_PANIC.store(p as u8, Ordering::SeqCst);
    Ok(())
}

/// Panics when a test armed this point (see `_test_panic_in_callback`); otherwise one atomic load.
pub(crate) fn test_panic_point(point: CallbackPoint) {
    if TEST_CALLBACK_PANIC.load(Ordering::Relaxed) == point as u8
        && TEST_CALLBACK_PANIC.compare_exchange(point as u8, 0, Ordering::SeqCst, Ordering::SeqCst).is_ok()
    {
        panic!("_test_panic_in_callback: deliberate panic in the {point:?} callback");
    }
}

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

/// The Lua arguments of an exported call. Taking them from the Lua stack never fails.
///
/// A Lua function among them (a callback, or one inside a table) is put in Lua's registry as it is taken from the
/// stack, and nvim-oxi never takes it out: what [`Args::function`] did not hand out is freed when the call is over
/// (`Drop`), whether the export succeeded or not.
#[derive(Debug, Default)]
pub struct Args {
    /// Number of arguments given, even when converting one of them failed.
    count: usize,
    values: Vec<Object>,
    /// Set when an argument could not be converted; reported by the accessors.
    error: Option<String>,
    /// The arguments [`Args::function`] handed out (bit `i`: argument `i + 1`), whose registry entries are theirs.
    taken: Cell<u64>,
}

/// A Lua function argument, from [`Args::function`]. nvim-oxi keeps every Lua function it is handed in Lua's
/// registry, and a dropped `Function` leaves it there with its closure and all it holds (a closed picker's whole
/// state, for each callback of its reads): this frees it when dropped (an export that fails after taking its
/// callback), unless [`LuaFn::keep`] hands it over to the code that calls it later, which frees it when done
/// (`jobs.rs` after its last call, `agent.rs` when its handler is replaced).
pub struct LuaFn<A, R>(Option<Function<A, R>>);

impl<A, R> LuaFn<A, R> {
    /// The function, now the caller's to free with `remove_from_lua_registry()`.
    pub fn keep(mut self) -> Function<A, R> {
        self.0.take().expect("a LuaFn is kept once")
    }
}

impl<A, R> Drop for LuaFn<A, R> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            unref(f.lua_ref());
        }
    }
}

impl Drop for Args {
    fn drop(&mut self) {
        let taken = self.taken.get();
        for (i, value) in self.values.iter().enumerate() {
            if i >= 64 || taken & (1 << i) == 0 {
                free_functions(value);
            }
        }
    }
}

/// Frees entry `r` of Lua's registry. Not in `cargo test`: a test binary has no Lua to link against (an executable,
/// unlike the library, must resolve every symbol it reaches), and no Lua function reaches the tests.
fn unref(r: std::ffi::c_int) {
    #[cfg(not(test))]
    lua::function::remove(r);
    #[cfg(test)]
    let _ = r;
}

/// Frees the registry entries of the Lua functions in `value`, at any depth (see [`Args`]).
fn free_functions(value: &Object) {
    // SAFETY: each accessor is called on an object of its kind, checked just before.
    unsafe {
        match value.kind() {
            ObjectKind::LuaRef => unref(value.as_luaref_unchecked()),
            ObjectKind::Array => value.as_array_unchecked().iter().for_each(free_functions),
            ObjectKind::Dictionary => value.as_dictionary_unchecked().iter().for_each(|(_, v)| free_functions(v)),
            _ => {}
        }
    }
}

impl Args {
    /// Arguments built from Rust values (for unit tests and internal calls).
    pub fn new(values: Vec<Object>) -> Self {
        Self { count: values.len(), values, error: None, taken: Cell::new(0) }
    }

    /// Number of arguments given (trailing `nil`s included).
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no argument was given.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The argument at 0-based `index` (Lua's argument `index + 1`) converted with serde; a
    /// missing argument is `nil`, so `Option<T>` makes an argument optional.
    pub fn get<T: DeserializeOwned>(&self, index: usize) -> BridgeResult<T> {
        self.check()?;
        let obj = self.values.get(index).cloned().unwrap_or_default();
        if obj.kind() == ObjectKind::LuaRef {
            // one taken here would be freed with the arguments (`Drop`): functions come through `function()`
            return Err(BridgeError::msg(format!("bad argument #{}: a function is not expected here", index + 1)));
        }
        T::deserialize(Deserializer::new(obj))
            .map_err(|err| BridgeError::msg(format!("bad argument #{}: {err}", index + 1)))
    }

    /// The function argument at 0-based `index`, freed from Lua's registry when the [`LuaFn`] is dropped unless
    /// it is kept ([`LuaFn::keep`]).
    pub fn function<A, R>(&self, index: usize) -> BridgeResult<LuaFn<A, R>> {
        self.check()?;
        let bad = || BridgeError::msg(format!("bad argument #{}: expected a function", index + 1));
        let bit = 1u64.checked_shl(index as u32).filter(|_| index < 64).ok_or_else(bad)?;
        let obj = self.values.get(index).filter(|o| o.kind() == ObjectKind::LuaRef).ok_or_else(bad)?;
        if self.taken.get() & bit != 0 {
            return Err(BridgeError::msg(format!("argument #{} taken twice", index + 1)));
        }
        let f = Function::<A, R>::deserialize(Deserializer::new(obj.clone())).map_err(|_| bad())?;
        self.taken.set(self.taken.get() | bit);
        Ok(LuaFn(Some(f)))
    }

    /// All arguments, as given.
    pub fn objects(&self) -> BridgeResult<&[Object]> {
        self.check()?;
        Ok(&self.values)
    }

    /// The string argument at 0-based `index`, its bytes as they are (not necessarily UTF-8).
    pub fn bytes(&self, index: usize) -> BridgeResult<Vec<u8>> {
        self.check()?;
        match self.values.get(index).cloned().map(nvim_oxi::String::try_from) {
            Some(Ok(s)) => Ok(s.as_bytes().to_vec()),
            _ => Err(BridgeError::msg(format!("bad argument #{}: expected a string", index + 1))),
        }
    }

    fn check(&self) -> BridgeResult<()> {
        match &self.error {
            Some(err) => Err(BridgeError::msg(err)),
            None => Ok(()),
        }
    }
}

/// Argument 1 of every session and search call, the workspace directory: a non-empty string.
pub(crate) fn workspace(a: &Args) -> BridgeResult<PathBuf> {
    let ws = a.get::<String>(0)?;
    if ws.is_empty() {
        return Err(BridgeError::msg("bad argument #1: the workspace directory is empty"));
    }
    Ok(PathBuf::from(ws))
}

/// An optional table argument; `nil` and `{}` (which Lua cannot tell from an empty list) give the defaults.
pub(crate) fn table_arg<T: DeserializeOwned + Default>(a: &Args, index: usize) -> BridgeResult<T> {
    match a.get::<Option<serde_json::Value>>(index)? {
        None | Some(serde_json::Value::Null) => Ok(T::default()),
        Some(serde_json::Value::Array(v)) if v.is_empty() => Ok(T::default()),
        Some(v) => serde_json::from_value(v).map_err(|e| BridgeError::msg(format!("bad argument #{}: {e}", index + 1))),
    }
}

impl Poppable for Args {
    /// Pops every argument; never returns `Err` (see the module docs).
    unsafe fn pop(lstate: *mut ffi::State) -> Result<Self, lua::Error> {
        // SAFETY: called by nvim-oxi inside a Lua C function, whose stack holds exactly the
        // call's arguments at indices 1..=top; we pop them all and leave the stack empty.
        unsafe {
            let count = ffi::lua_gettop(lstate);
            let mut values = Vec::with_capacity(count.max(0) as usize);
            let mut error = None;
            for index in (1..=count).rev() {
                match Object::pop(lstate) {
                    Ok(obj) => values.push(obj),
                    Err(err) => {
                        error = Some(format!("bad argument #{index}: {err}"));
                        break;
                    }
                }
            }
            ffi::lua_settop(lstate, 0);
            values.reverse();
            Ok(Self { count: count.max(0) as usize, values, error, taken: Cell::new(0) })
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Panic hook and log
// ---------------------------------------------------------------------------------------------

static PANIC_LOG: OnceLock<Option<PathBuf>> = OnceLock::new();
static HOOK: Once = Once::new();

thread_local! {
    /// Location of the last panic on this thread, for the message returned to Lua.
    static LAST_PANIC_LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Where panics are logged: `stdpath("log")/pseudoclaude-panic.log`, falling back to
/// `$XDG_STATE_HOME/nvim` or `~/.local/state/nvim` when Neovim cannot be asked. `None` before the
/// library is loaded into Neovim (and in `cargo test`).
///
/// (Only the entry point may call into Neovim's C API: a test binary has no Neovim to link to.)
pub fn panic_log_path() -> Option<PathBuf> {
    PANIC_LOG.get().cloned().flatten()
}

fn log_dir() -> Option<PathBuf> {
    let from_nvim = panic::catch_unwind(|| nvim_oxi::api::call_function::<_, String>("stdpath", ("log",)).ok())
        .ok()
        .flatten()
        .filter(|dir| !dir.is_empty());
    from_nvim.map(PathBuf::from).or_else(fallback_log_dir)
}

/// `$XDG_STATE_HOME/nvim`, else `$HOME/.local/state/nvim` (Neovim's default `stdpath("log")`).
pub fn fallback_log_dir() -> Option<PathBuf> {
    let appname = std::env::var("NVIM_APPNAME").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "nvim".into());
    if let Some(state) = std::env::var_os("XDG_STATE_HOME").filter(|s| !s.is_empty()) {
        return Some(PathBuf::from(state).join(appname));
    }
    std::env::var_os("HOME")
        .filter(|s| !s.is_empty())
        .map(|home| PathBuf::from(home).join(".local/state").join(appname))
}

/// Installs (once per process) a panic hook that appends the panic to the log file and prints
/// nothing.
fn install_panic_hook() {
    HOOK.call_once(|| {
        // Resolve the path now, on Neovim's main thread, where the API may be called.
        let _ = PANIC_LOG.set(log_dir().map(|dir| dir.join(PANIC_LOG_NAME)));
        panic::set_hook(Box::new(|info| {
            let location = info.location().map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
            let message = payload_text(info.payload());
            LAST_PANIC_LOCATION.with(|cell| *cell.borrow_mut() = location.clone());
            if let Some(Some(path)) = PANIC_LOG.get() {
                let thread = std::thread::current();
                let entry = format!(
                    "[{}] pseudoclaude {VERSION}: panic in thread '{}' at {}: {message}\n{}\n",
                    chrono::Local::now().to_rfc3339(),
                    thread.name().unwrap_or("<unnamed>"),
                    location.as_deref().unwrap_or("<unknown>"),
                    Backtrace::force_capture(),
                );
                let _ = append(path, &entry);
            }
        }));
    });
}

fn append(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    OpenOptions::new().create(true).append(true).open(path)?.write_all(text.as_bytes())
}

/// The text of a panic payload.
fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_string()
    }
}

/// The text of a panic payload, with the panic's location when the hook recorded it.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload_text(payload);
    match LAST_PANIC_LOCATION.with(|cell| cell.borrow_mut().take()) {
        Some(location) => format!("{text} at {location}"),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_crosses_with_the_sources_its_message_does_not_quote() {
        #[derive(Debug, thiserror::Error)]
        #[error("cannot resume: {0}")]
        struct Quotes(#[source] std::io::Error);
        #[derive(Debug, thiserror::Error)]
        #[error("cannot resume")]
        struct Wraps(#[source] std::io::Error);
        let disk = || std::io::Error::other("disk full");
        assert_eq!(BridgeError::from(Quotes(disk())).message(), "cannot resume: disk full");
        assert_eq!(BridgeError::from(Wraps(disk())).message(), "cannot resume: disk full");
    }

    #[test]
    fn bridge_error_from_std_error_and_msg() {
        let io = std::io::Error::other("disk on fire");
        assert_eq!(BridgeError::from(io).message(), "disk on fire");
        assert_eq!(BridgeError::msg("plain").to_string(), "plain");
    }

    #[test]
    fn fallback_log_dir_ends_in_the_app_name() {
        // Only reads the environment; does not modify it (tests run in parallel).
        if let Some(dir) = fallback_log_dir() {
            let app = std::env::var("NVIM_APPNAME").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "nvim".into());
            assert!(dir.ends_with(app));
        }
    }

    #[test]
    fn guarded_call_returns_ok_values() {
        let (ok, value) = guarded_call("t", &|_: &Args| Ok(vec![1, 2]), &Args::default());
        assert!(ok);
        assert_eq!(value, Object::from(nvim_oxi::Array::from_iter([1, 2])));
    }

    #[test]
    fn guarded_call_turns_errors_into_values() {
        let (ok, value) =
            guarded_call("t", &|_: &Args| -> BridgeResult<()> { Err(BridgeError::msg("nope")) }, &Args::default());
        assert!(!ok);
        assert_eq!(value, Object::from("pseudoclaude_core.t: nope"));
    }

    #[test]
    fn guarded_call_turns_panics_into_values() {
        let (ok, value) = guarded_call("t", &|_: &Args| -> BridgeResult<()> { panic!("boom") }, &Args::default());
        assert!(!ok);
        let text = nvim_oxi::String::try_from(value).expect("a string").to_string();
        assert!(text.starts_with("pseudoclaude_core.t: internal error (panic): boom"), "{text}");
    }

    #[test]
    fn bulk_chunks_cut_between_items_and_keep_them_all_in_order() {
        let items: Vec<String> = (0..50).map(|i| "x".repeat(i)).collect();
        let chunks = bulk_chunks(&items, 100).expect("chunks");
        assert!(chunks.len() > 5);
        let back: Vec<String> =
            chunks.iter().flat_map(|c| serde_json::from_str::<Vec<String>>(c).expect("an array")).collect();
        assert_eq!(back, items);
        // an item longer than a chunk is a chunk of its own
        assert!(chunks.iter().all(|c| c.len() <= 100 || serde_json::from_str::<Vec<String>>(c).expect("").len() == 1));
        assert!(bulk_chunks::<String>(&[], 100).expect("none").is_empty());
    }

    #[test]
    fn args_convert_with_serde_and_report_bad_ones() {
        let args = Args::new(vec![Object::from("x"), Object::from(3)]);
        assert_eq!(args.len(), 2);
        assert_eq!(args.get::<String>(0), Ok("x".to_string()));
        assert_eq!(args.get::<i64>(1), Ok(3));
        assert_eq!(args.get::<Option<String>>(2), Ok(None));
        assert!(args.get::<String>(1).unwrap_err().message().starts_with("bad argument #2:"));
        let mut broken = Args::new(Vec::new());
        (broken.count, broken.error) = (1, Some("bad argument #1: userdata".into()));
        assert_eq!(broken.get::<Option<String>>(0), Err(BridgeError::msg("bad argument #1: userdata")));
    }
}
