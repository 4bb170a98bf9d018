# pseudoclaude.nvim developer entry points. Works on a fresh clone with cargo and python3 (+pip):
# Neovim itself is installed into .deps/ when no nvim >= 0.11 is on PATH (scripts/ensure-nvim).
#
#   make run    build, then open Neovim with this checkout as the plugin (workspace: WORKSPACE, default cwd)
#   make test   build, clippy (warnings are errors), cargo test, the crash simulation's 10,000 seeds (make sim),
#               then the Neovim end-to-end tests (tests/e2e)

CARGO ?= cargo
WORKSPACE ?= $(CURDIR)

.PHONY: all build run test cargo-test sim e2e clippy fmt fmt-check

all: build

build:
	$(CARGO) build --release

run: build
	@nvim="$$(scripts/ensure-nvim)" && cd "$(WORKSPACE)" && exec "$$nvim" --clean -u "$(CURDIR)/scripts/dev-init.lua"

test: build clippy cargo-test sim e2e

# in release, like the build: the dependencies are compiled once for all three
cargo-test:
	$(CARGO) test --release

# The session log's crash simulation, 10,000 seeds (tests/session_sim.rs); `cargo test` runs 300.
sim:
	$(CARGO) test --release --test session_sim -- --ignored --nocapture

# builds first: the tests refuse a library older than the sources (tests/e2e/conftest.py)
e2e: build
	tests/e2e/run

clippy:
	$(CARGO) clippy --release --all-targets -- -D warnings

# Lua formatting with stylua from npm, installed into .deps/npm (not committed)
STYLUA = .deps/npm/node_modules/.bin/stylua
$(STYLUA):
	npm install --silent --no-save --prefix .deps/npm @johnnymorganz/stylua-bin@2.5.2

fmt: $(STYLUA)
	$(CARGO) fmt
	$(STYLUA) lua plugin scripts

fmt-check: $(STYLUA)
	$(CARGO) fmt --check
	$(STYLUA) --check lua plugin scripts
