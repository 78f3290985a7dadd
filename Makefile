# Everyday commands; .ci/run runs the same checks.
PG ?= postgres://postgres@127.0.0.1:5432/test
REDIS ?= redis://127.0.0.1:6379

.PHONY: fmt lint layout test test-pg test-partitioned openapi-check generated serve ci
fmt:
	cargo fmt --all
lint: layout
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
layout:
	python3 .ci/layout
test:
	cargo test --workspace
test-pg:
	TEST_DATABASE_URL=$(PG) TEST_REDIS_URL=$(REDIS) cargo test --workspace
test-partitioned:
	TEST_DATABASE_URL=$(PG) TEST_REDIS_URL=$(REDIS) TEST_PARTITIONS=8 cargo test --workspace
openapi-check:
	cargo test --test it contract
generated:
	cargo run -q --example generated
serve:
	cargo run --release -- serve --demo
ci:
	bash .ci/run
