//! pseudoclaude: the Rust core of a Neovim coding-agent plugin whose conversations are never lost.
//!
//! The core (`session`, `message`) is plain Rust and knows nothing of Neovim; `bridge` is the only
//! module that talks to Neovim, through nvim-oxi.

pub mod acp;
pub mod agent;
pub mod atomic;
pub mod attachment;
pub mod bridge;
pub mod compact;
pub mod conversation;
pub mod display;
pub mod fuzzy;
pub mod git;
pub mod import;
pub mod instructions;
pub mod mcp;
pub mod message;
pub mod pairing;
pub mod provider;
pub mod rewind;
pub mod sandbox;
pub mod session;
pub mod stderr_log;
pub mod tools;
pub mod usage;
pub mod workspaces;
pub mod worktree;
