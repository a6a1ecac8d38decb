.DEFAULT_GOAL := help

help: ## Show this help.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

generate: ## Regenerate gen/ from proto/ with the pinned local buf plugins.
	rm -rf gen
	go tool buf generate
	go tool buf build proto -o internal/api/contextd.binpb

check-generate: generate ## Fail when gen/ is not what proto/ generates.
	git diff --exit-code -- gen internal/api/contextd.binpb
	@test -z "$$(git status --porcelain -- gen internal/api/contextd.binpb)" || (git status --porcelain -- gen internal/api/contextd.binpb; echo "generated files are stale; run make generate" >&2; exit 1)

lint: ## buf lint and go vet.
	go tool buf lint
	go vet ./...

test: ## Run every test (starts a throwaway PostgreSQL when one is needed).
	go test ./...

bench: ## Run the benchmarks.
	go test -run '^$$' -bench . -benchmem ./...

run: ## Run the server with embedded storage.
	go run ./cmd/server

.PHONY: help generate check-generate lint test bench run
