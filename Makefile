# Set-up and everyday commands. `make demo` and `make test` each install everything they need into .venv.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
KGR := $(BIN)/kgr
DEMO ?= demo-project
FIX := fixtures/metaqa

.PHONY: install demo test bench clean

# torch is installed first and pinned: its CPU wheel is what this project is tested with (a bare `torch`
# requirement resolves to a multi-GB CUDA build).
$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test]'
	touch $@

install: $(BIN)/.installed

demo: install
	rm -rf $(DEMO)
	$(KGR) ingest $(DEMO) $(FIX)/kb.txt --schema $(FIX)/schema.toml
	$(KGR) reach $(DEMO)
	$(KGR) overview $(DEMO)
	$(KGR) status $(DEMO)
	$(KGR) retrieve $(DEMO) --query "who directed the movies written by [Gary David Goldberg]" --explain
	$(KGR) retrieve $(DEMO) --query "what movies did [Temuera Morrison] act in"
	for m in dotrag bm25 vss csrag; do for h in 1 2 3; do \
	  $(KGR) retrieve $(DEMO) -q --method $$m --questions $(FIX)/qa_$${h}hop.txt || exit 1; done; done
	$(KGR) eval $(DEMO) --questions $(FIX)/qa_1hop.txt --questions $(FIX)/qa_2hop.txt \
	  --questions $(FIX)/qa_3hop.txt --run dotrag-offline --run csrag-offline --run bm25-offline \
	  --run vss-offline --out $(DEMO)/report

test: install
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python bench/reach_bench.py
	$(BIN)/python bench/metaqa_table.py --limit 500

clean:
	rm -rf $(DEMO) .pytest_cache
