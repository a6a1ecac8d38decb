.DEFAULT_GOAL := help

help: ## Show this help.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

# Generated code: Go (gen/), TypeScript (protoc-gen-es from clients/typescript's
# lockfile) and Python (Debian's protoc 3.21.12 and grpc_python_plugin 1.51:
# apt-get install protobuf-compiler protobuf-compiler-grpc).
GENERATED := gen internal/api/contextd.binpb clients/typescript/src/gen clients/python/src/contextd clients/python/src/buf internal/ui/static/app.js
PROTOC_VERSION := libprotoc 3.21.12

generate: ## Regenerate gen/ and the clients' code from proto/ with the pinned local plugins.
	@test "$$(protoc --version 2>/dev/null)" = "$(PROTOC_VERSION)" || { echo "make generate needs protoc = $(PROTOC_VERSION) (found: $$(protoc --version 2>&1)); apt-get install protobuf-compiler protobuf-compiler-grpc" >&2; exit 1; }
	@command -v grpc_python_plugin >/dev/null || { echo "make generate needs grpc_python_plugin: apt-get install protobuf-compiler-grpc" >&2; exit 1; }
	test -x clients/typescript/node_modules/.bin/protoc-gen-es || npm ci --prefix clients/typescript --ignore-scripts --no-audit --no-fund
	rm -rf $(GENERATED)
	go tool buf generate
	go tool buf build proto -o internal/api/contextd.binpb
	# The dashboard bundle embeds the generated TypeScript: rebuild it too.
	test -d internal/ui/web/node_modules/esbuild || npm ci --prefix internal/ui/web --no-audit --no-fund --loglevel=error
	cd internal/ui/web && npm run --silent build

check-generate: generate ## Fail when generated code is not what proto/ generates.
	git diff --exit-code -- $(GENERATED)
	@test -z "$$(git status --porcelain -- $(GENERATED))" || (git status --porcelain -- $(GENERATED); echo "generated files are stale; run make generate" >&2; exit 1)

lint: ## buf lint and go vet.
	go tool buf lint
	go vet ./...

test: ## Run every test (starts a throwaway PostgreSQL when one is needed).
	go test ./...

bench: ## Run the benchmarks.
	go test -run '^$$' -bench . -benchmem ./...

build: ## Build bin/contextd (the server, from cmd/server) and bin/contextctl: static and stripped (-s -w).
	CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o bin/contextd ./cmd/server
	CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o bin/contextctl ./cmd/contextctl

ui: ## Rebuild the dashboard bundle (internal/ui/static/app.js) from internal/ui/web and the generated TypeScript.
	cd internal/ui/web && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build

screenshots: ## Refresh the dashboard screenshots in docs/ in headless Chromium.
	CONTEXTD_SCREENSHOT_DIR=$(CURDIR)/docs CONTEXTD_REQUIRE_CHROMIUM=1 go test -count=1 -run TestDashboardInChromium ./test/ui/

bench-cost: ## Replay the corpus and compare compaction strategies by prompt-cache cost.
	go run ./cmd/costbench

bench-background: ## Replay the corpus with a 2 s fake LLM summarizer: background compaction on and off.
	go run ./cmd/costbench -summaries -windows 16384

bench-gateway: ## Direct vs through the gateway (SQLite and PostgreSQL, 1 and 16 conversations, 100 and 1,000 messages, 1 MB, 30 tools): p50, p99, requests/s, CPU.
	go run ./cmd/gatewaybench

test-clients: ## Drive the real agent CLIs (Claude Code, Codex CLI, Qwen Code, opencode, an npm openai loop; pinned in test/clients/node) through the gateway to a scripted provider.
	npm ci --prefix test/clients/node --no-audit --no-fund --loglevel=error
	CONTEXTD_TEST_CLIENTS=1 go test -count=1 -v -timeout 20m ./test/clients/

soak: ## 30 minutes of chaos: 3 replicas on a throwaway PostgreSQL, 24 agents, faults; checks nothing was lost (docs/operations.md).
	go run ./cmd/soak -duration 30m

soak-short: ## The soak for 3 minutes (CI).
	go run ./cmd/soak -duration 3m

bench-recall: ## Replay the corpus and score what the agent can still answer after each compaction, per strategy (JUDGE=1: also ask the configured LLM summarizer's model; JUDGE=fake: the fake LLM).
	$(if $(filter-out 1 fake,$(JUDGE)),$(error JUDGE=$(JUDGE): 1 (the configured LLM, billed) or fake))
	go run ./cmd/costbench -recall $(if $(JUDGE),-judge) $(if $(filter fake,$(JUDGE)),-judge-fake)

run: ## Run the server with embedded storage.
	go run ./cmd/server

.PHONY: help generate check-generate lint test test-clients bench bench-cost bench-background bench-gateway bench-recall build ui screenshots soak soak-short run
