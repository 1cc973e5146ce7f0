# The front door. `make serve`, `make test` and `make run` work on a fresh
# machine: they install what is missing (scripts/setup.sh), fetch the default
# models (scripts/fetch_models.py), build, and then serve, test or run.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all setup models configure build test run serve clean fuzz

all: build

setup:
	@scripts/setup.sh

models: setup
	@$(BUILD)/venv/bin/python scripts/fetch_models.py

configure: setup
	@cmake -S . -B $(BUILD) -G Ninja -DFOLIO_WERROR=ON $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build models fuzz
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

fuzz: setup
	@scripts/run_fuzz.sh

PROMPT ?= What are three good habits for writing clear code? Answer briefly.
run: build models
	@$(BUILD)/folio run --chat -p "$(PROMPT)" -n 200

HOST ?= 127.0.0.1
PORT ?= 8080
serve: build models
	@$(BUILD)/folio serve --host $(HOST) --port $(PORT)

clean:
	rm -rf $(BUILD)
