"""`python3 tests/e2e/agent_sets.py AGENT`: the set of sessions the real AGENT made (agent_stores.py's `cached_set`:
made once per version, kept in `.deps/agents/stores/`), as JSON on stdout. The Rust tests' way to the real stores
(tests/it/import.rs), which cannot use pytest's `agent_sessions` fixture."""

import json
import sys

from agent_stores import AGENTS, cached_set

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in AGENTS:
        sys.exit(f"usage: agent_sets.py AGENT (one of {', '.join(AGENTS)})")
    print(json.dumps(cached_set(sys.argv[1])))
