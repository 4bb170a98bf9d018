# pseudoclaude.nvim developer entry points. Works on a fresh clone with cargo and python3 (+pip):
# Neovim itself is installed into .deps/ when no nvim >= 0.11 is on PATH (scripts/ensure-nvim).
#
#   make run    build, then open Neovim with this checkout as the plugin (workspace: WORKSPACE, default cwd)
#   make test   build, clippy (warnings are errors), cargo test, the crash simulation's 10,000 seeds (make sim),
#               then the Neovim end-to-end tests (tests/e2e)
#   make mutants      cargo-mutants over the named core files (long; not part of make test)
#   make lua-mutants  the hand-made Lua mutants, each expected to fail a named e2e test
#   make package      this machine's release asset of the library and its .sha256 (scripts/package; make e2e runs it)

CARGO ?= cargo
WORKSPACE ?= $(CURDIR)

.PHONY: all build run test debs cargo-test sim e2e package clippy fmt fmt-check mutants lua-mutants

all: build

build:
	$(CARGO) build --release

run: build
	@nvim="$$(scripts/ensure-nvim)" && cd "$(WORKSPACE)" && exec "$$nvim" --clean -u "$(CURDIR)/scripts/dev-init.lua"

test: build clippy cargo-test sim e2e

# the Debian packages the tests use (git, strace, tmux, prlimit, zsh, fish, fzf, curl, objdump): installed by the script when missing (as root), else named
debs:
	scripts/ensure-debs

# in release, like the build: the dependencies are compiled once for all three
cargo-test: debs
	$(CARGO) test --release

# The session log's crash simulation, 10,000 seeds (tests/it/session_sim.rs); `cargo test` runs 300.
sim:
	$(CARGO) test --release --test it -- --ignored --nocapture session_sim::

# builds first: the tests refuse a library built from other sources (its build id, tests/e2e/conftest.py); the
# release asset too (tests/e2e/test_install.py serves it), outside the suite's time limit
e2e: build debs package
	tests/e2e/run

# This machine's release asset and its .sha256 (scripts/package: cargo-zigbuild against glibc 2.28, into
# target/package, so target/release is left as it is); tests/e2e/test_install.py installs it from a local server.
package:
	scripts/package target/package/assets

clippy:
	$(CARGO) clippy --release --all-targets -- -D warnings

# Lua formatting with stylua from npm, installed into .deps/npm (not committed)
STYLUA = .deps/npm/node_modules/.bin/stylua
$(STYLUA):
	npm install --silent --no-save --prefix .deps/npm @johnnymorganz/stylua-bin@2.5.2

fmt: $(STYLUA)
	$(CARGO) fmt
	$(STYLUA) lua plugin scripts build.lua

fmt-check: $(STYLUA)
	$(CARGO) fmt --check
	$(STYLUA) --check lua plugin scripts build.lua

# Mutation testing (not part of `make test`: it takes long): cargo-mutants, installed into .deps/ by
# scripts/ensure-mutants, breaks the code on purpose and counts the mutants the tests catch (figures in
# doc/testing.md). In a copy of the tree, with the `mutants` profile (no debug info: each variant links in
# seconds), one job at a time building into target/mutants (so the dependencies are built once). A test run
# that outlives 120 s is a timeout (the mutant hangs). Narrow it with MUTANTS_FILES, and with `-C` (a cargo
# argument given to the build and the test run alike) to the test targets that exercise those files, e.g.
#   make mutants MUTANTS_FILES=src/tools/path.rs MUTANTS_ARGS="-C --lib -C --test=it"
MUTANTS_FILES ?= src/session/*.rs src/session/search/*.rs src/agent/runner.rs src/conversation.rs src/tools/path.rs
MUTANTS_ARGS ?=

mutants:
	@m="$$(scripts/ensure-mutants)" && CARGO_TARGET_DIR="$(CURDIR)/target/mutants" nice -n 10 "$$m" mutants -j 1 \
		--profile mutants --timeout 120 $(foreach f,$(MUTANTS_FILES),-f '$(f)') -o target/mutants $(MUTANTS_ARGS)

# The hand-made mutants of the Lua side (scripts/lua-mutants): each must fail its named e2e test.
lua-mutants: build
	scripts/lua-mutants
