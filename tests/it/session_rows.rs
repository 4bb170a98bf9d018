//! What the picker's rows show beyond the title, from the real log: the tokens and cost the providers
//! reported, summed across turns and resumes and kept through a rebuild of the list's cache, and the
//! git branch and commit of a real repository (made with `git`: without it these tests fail).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use crate::support::client::agent_turn as turn;
use pseudoclaude::agent::{Agent, AgentConfig, Event};
use pseudoclaude::message::ToolCall;
use pseudoclaude::provider::{BoxFuture, Usage};
use pseudoclaude::session::{self, Context, ListOptions, SessionInfo};
use pseudoclaude::tools::{Approval, ApprovalRequest, Approver};
use pseudoclaude::usage::{Price, Pricing};
use serde_json::{Value, json};

use crate::support::scripted::{Scripted, say};

/// Answers "ok" in order, each with the usage it reports; "ok" with no usage once the script is spent.
fn scripted(model: &str, answers: Vec<(Vec<ToolCall>, Usage)>) -> Arc<Scripted> {
    Scripted::with_model(model, answers.into_iter().map(|(c, u)| say("ok").calls(c).usage(u)).collect())
}

struct No;
impl Approver for No {
    fn ask(&self, _: ApprovalRequest) -> BoxFuture<'static, Approval> {
        Box::pin(async { Approval::No })
    }
}

fn u(input: u64, output: u64, read: u64, write: u64) -> Usage {
    Usage { input_tokens: input, output_tokens: output, cache_read_tokens: read, cache_write_tokens: write }
}

fn list(ws: &Path, pricing: &Pricing) -> Vec<SessionInfo> {
    session::list(ws, &ListOptions { pricing: pricing.clone(), ..Default::default() }).unwrap()
}

fn log_entries(ctx: &Context) -> Vec<Value> {
    fs::read_to_string(&ctx.jsonl_path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn of_type<'a>(entries: &'a [Value], kind: &str) -> Vec<&'a Value> {
    entries.iter().filter(|e| e["type"] == kind).collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[tokio::test]
async fn usage_and_cost_add_up_across_turns_and_resumes_and_survive_a_cache_rebuild() {
    let ws = tempfile::tempdir().unwrap();
    let call = ToolCall::new("c1", "list_files", json!({}));
    // Turn 1: a tool call and the answer after it (two requests); turn 2: one request.
    let first = scripted(
        "model-a",
        vec![(vec![call], u(1000, 50, 0, 4000)), (vec![], u(20, 30, 4000, 0)), (vec![], u(10, 5, 4050, 25))],
    );
    let mut config = AgentConfig::new(ws.path());
    let price = Price { input: 3.0, output: 15.0, cache_read: Some(0.3), cache_write: Some(3.75) };
    config.pricing = Pricing(BTreeMap::from([("model-a".to_string(), price)]));
    let agent = Agent::new(config.clone(), first, Arc::new(No));
    let events = turn(&agent, "list the files").await;
    let totals: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Usage { usage, cost } => Some((*usage, *cost)),
            _ => None,
        })
        .collect();
    assert_eq!(totals.len(), 2, "one report per request: {events:?}");
    assert_eq!(totals[1].0, u(1020, 80, 4000, 4000));
    turn(&agent, "again").await;
    let want = u(1030, 85, 8050, 4025);
    assert_eq!(agent.usage().total(), want);
    let ctx = agent.current().unwrap();
    let entries = log_entries(&ctx);
    let usage_lines = of_type(&entries, "usage");
    assert_eq!(usage_lines.len(), 3);
    assert_eq!(usage_lines[0]["model"], "model-a");
    assert_eq!(usage_lines[0]["usage"]["cache_write_tokens"], 4000);
    // The cost: each count at its own price.
    let want_cost = (1030.0 * 3.0 + 85.0 * 15.0 + 8050.0 * 0.3 + 4025.0 * 3.75) / 1e6;
    let pricing = config.pricing.clone();
    let got = list(ws.path(), &pricing);
    assert_eq!(got[0].usage, want);
    assert!(close(got[0].cost.unwrap(), want_cost), "{:?} vs {want_cost}", got[0].cost);
    assert_eq!(got[0].messages, 6, "usage entries are not messages");
    assert_eq!(list(ws.path(), &Pricing::default())[0].cost, None, "no price, no cost");
    drop(agent);

    // A resume starts from the log's totals; its answers (another model, unpriced) add to them.
    let second = scripted("model-b", vec![(vec![], u(7, 3, 0, 0))]);
    let (resumed, _) = Agent::resume(config.clone(), second, Arc::new(No), &ctx.id).unwrap();
    assert_eq!(resumed.usage().total(), want);
    let events = turn(&resumed, "and once more").await;
    let last = events.iter().rev().find_map(|e| match e {
        Event::Usage { usage, cost } => Some((*usage, *cost)),
        _ => None,
    });
    assert_eq!(last, Some((u(1037, 88, 8050, 4025), None)), "a model without a price leaves the cost unknown");
    drop(resumed);
    let got = list(ws.path(), &pricing);
    assert_eq!((got[0].usage, got[0].cost), (u(1037, 88, 8050, 4025), None));
    let mut both = pricing.clone();
    both.0.insert("model-b".into(), Price { input: 1.0, output: 2.0, cache_read: None, cache_write: None });
    let with_b = list(ws.path(), &both)[0].cost.unwrap();
    assert!(close(with_b, want_cost + (7.0 + 6.0) / 1e6), "{with_b}");

    // The cache holds the totals; deleting it (and the workspace's index, which the list reads first) rebuilds the same.
    let index = ws.path().join(".PseudoClaude").join(session::index::INDEX_FILE_NAME);
    assert!(index.exists());
    let summary = ctx.summary_path();
    let cached: Value = serde_json::from_slice(&fs::read(&summary).unwrap()).unwrap();
    assert_eq!(cached["state"]["usage"]["model-b"]["input_tokens"], 7);
    fs::remove_file(&summary).unwrap();
    fs::remove_file(&index).unwrap();
    assert_eq!(list(ws.path(), &both)[0].usage, u(1037, 88, 8050, 4025));
    assert!(summary.exists(), "rebuilt");

    // A cache written by the version before usage entries existed, up to the end of this log, must not
    // be trusted: its fold skipped them.
    let mut old = cached.clone();
    old["version"] = json!(3);
    old["state"].as_object_mut().unwrap().remove("usage");
    fs::write(&summary, serde_json::to_vec(&old).unwrap()).unwrap();
    fs::remove_file(&index).unwrap();
    assert_eq!(list(ws.path(), &both)[0].usage, u(1037, 88, 8050, 4025));
    let rebuilt: Value = serde_json::from_slice(&fs::read(&summary).unwrap()).unwrap();
    assert_eq!(rebuilt["version"], 6, "the current summary version (src/session/list.rs)");
}

// --- git ---------------------------------------------------------------------------------------------

/// Runs git in `dir` with no user or system configuration (no signing, no hooks from home), failing the
/// test when git is missing or refuses.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .unwrap_or_else(|e| panic!("these tests need git on the PATH: {e}"));
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn commit(dir: &Path, file: &str) -> String {
    fs::write(dir.join(file), file).unwrap();
    git(dir, &["add", file]);
    git(dir, &["commit", "-q", "-m", file]);
    git(dir, &["rev-parse", "--short=7", "HEAD"])
}

fn metas(ctx: &Context) -> Vec<(Option<String>, Option<String>)> {
    let s = |v: &Value| v.as_str().map(str::to_owned);
    of_type(&log_entries(ctx), "meta").iter().map(|e| (s(&e["git"]["branch"]), s(&e["git"]["commit"]))).collect()
}

fn agent_in(ws: &Path) -> Agent {
    Agent::new(AgentConfig::new(ws), scripted("m", vec![]), Arc::new(No))
}

#[tokio::test]
async fn the_branch_and_commit_are_recorded_at_the_start_and_when_a_turn_finds_them_changed() {
    let ws = tempfile::tempdir().unwrap();
    let repo = ws.path();
    git(repo, &["-c", "init.defaultBranch=main", "init", "-q"]);
    let c1 = commit(repo, "one.txt");
    git(repo, &["checkout", "-q", "-b", "feature/rows"]);
    let sub = repo.join("src");
    fs::create_dir(&sub).unwrap();

    // The workspace is a folder inside the work tree.
    let agent = agent_in(&sub);
    turn(&agent, "first").await;
    let ctx = agent.current().unwrap();
    assert_eq!(metas(&ctx), [(Some("feature/rows".into()), Some(c1.clone()))]);
    let first_line = &log_entries(&ctx)[0];
    assert_eq!((first_line["role"].as_str(), first_line["model"].as_str()), (Some("user"), Some("m")));
    turn(&agent, "nothing changed").await;
    assert_eq!(metas(&ctx).len(), 1, "recorded again only when it changed");

    // A commit and a branch switch between turns: the next turn records them.
    let c2 = commit(repo, "two.txt");
    git(repo, &["checkout", "-q", "-b", "second"]);
    turn(&agent, "after a commit").await;
    assert_eq!(metas(&ctx).last().unwrap(), &(Some("second".into()), Some(c2.clone())));
    let listed = session::list(&sub, &ListOptions::default()).unwrap();
    assert_eq!((listed[0].branch.as_deref(), listed[0].commit.as_deref()), (Some("second"), Some(c2.as_str())));
    let loaded = session::load(&ctx).unwrap();
    assert_eq!(loaded.git_start.unwrap().branch, "feature/rows");
    assert_eq!(loaded.git.unwrap().commit, c2);
    assert_eq!(loaded.messages.len(), 6, "meta entries are not messages");

    // Detached HEAD: a commit, no branch.
    git(repo, &["checkout", "-q", "--detach", &c1]);
    turn(&agent, "detached").await;
    assert_eq!(metas(&ctx).last().unwrap(), &(None, Some(c1.clone())));
    drop(agent);
    let listed = session::list(&sub, &ListOptions::default()).unwrap();
    assert_eq!((listed[0].branch.as_deref(), listed[0].commit.as_deref()), (None, Some(c1.as_str())));

    // A resumed session knows what it last recorded: same state, no new entry; another branch, one.
    git(repo, &["checkout", "-q", "second"]);
    let (resumed, _) = Agent::resume(AgentConfig::new(&sub), scripted("m", vec![]), Arc::new(No), &ctx.id).unwrap();
    turn(&resumed, "back on second").await;
    assert_eq!(metas(&ctx).len(), 4);
    turn(&resumed, "still on second").await;
    assert_eq!(metas(&ctx).len(), 4);
}

#[tokio::test]
async fn a_linked_worktree_records_its_own_branch() {
    let root = tempfile::tempdir().unwrap();
    let main = root.path().join("main");
    fs::create_dir(&main).unwrap();
    git(&main, &["-c", "init.defaultBranch=main", "init", "-q"]);
    let c1 = commit(&main, "one.txt");
    let wt = root.path().join("wt");
    git(&main, &["worktree", "add", "-q", "-b", "in-worktree", wt.to_str().unwrap()]);
    assert!(wt.join(".git").is_file(), "a linked worktree's .git is a file");
    git(&main, &["pack-refs", "--all"]); // refs only in packed-refs now
    let agent = agent_in(&wt);
    turn(&agent, "hello").await;
    let listed = session::list(&wt, &ListOptions::default()).unwrap();
    assert_eq!((listed[0].branch.as_deref(), listed[0].commit.as_deref()), (Some("in-worktree"), Some(c1.as_str())));
}

#[tokio::test]
async fn outside_a_repository_nothing_is_recorded() {
    let ws = tempfile::tempdir().unwrap();
    // (`git rev-parse` agrees there is no repository around the folder.)
    let out = Command::new("git").arg("-C").arg(ws.path()).args(["rev-parse", "--git-dir"]).output().expect("git");
    assert!(!out.status.success(), "the temporary folder is inside a repository: the test cannot run here");
    let agent = agent_in(ws.path());
    turn(&agent, "hello").await;
    let ctx = agent.current().unwrap();
    assert!(metas(&ctx).is_empty());
    let listed = session::list(ws.path(), &ListOptions::default()).unwrap();
    assert_eq!((listed[0].branch.as_deref(), listed[0].commit.as_deref()), (None, None));
    let info = serde_json::to_value(&listed[0]).unwrap();
    assert_eq!((&info["branch"], &info["commit"]), (&Value::Null, &Value::Null));
}
