//! The Rust integration tests, linked into one binary: one module per concern (what each proves is in
//! doc/testing.md), the fake servers and the simulated disk they share in `support/`.
//!
//! One binary, so the test build links once. `tests/session_big.rs` stays apart: its counting allocator is
//! the binary's global allocator and measures a process-wide peak, which other tests' threads would disturb.
//!
//! Run one module or one test with a name filter: `cargo test --release --test it session_log::`.

mod support;

mod acp;
mod acp_rig;
mod agent_checkpoint;
mod agent_providers;
mod agent_runner;
mod cli;
mod handover;
mod import;
mod import_keep;
mod mcp;
mod provider;
mod rewind;
mod session_crash;
mod session_damage;
mod session_log;
mod session_rows;
mod session_search;
mod session_sim;
mod tools;
mod worktree;
