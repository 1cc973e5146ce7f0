# The front door. `make test` and `make run` work on a fresh machine: they
# install what is missing (scripts/setup.sh), fetch the default models
# (scripts/fetch_models.py), build, and then test or run.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all setup models configure build test run clean fuzz

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

run: build models
	@$(BUILD)/folio inspect

clean:
	rm -rf $(BUILD)
