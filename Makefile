# Set-up and everyday commands. `make demo` and `make test` each install everything they need into .venv.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
KGR := $(BIN)/kgr
DEMO ?= demo-project
FIX := fixtures/metaqa
WIKI := fixtures/2wiki

.PHONY: install demo test bench clean

# The ray and onnx extras are installed too: CI runs the Ray engine's tests (tests/test_ray_engine.py) on a private
# local Ray and the ONNX encoder's (tests/test_embed_onnx.py).
# torch is installed first and pinned: its CPU wheel is what this project is tested with (a bare `torch`
# requirement resolves to a multi-GB CUDA build).
$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test,ray,onnx]'
	touch $@

install: $(BIN)/.installed

demo: install
	rm -rf $(DEMO)
	@echo "== MetaQA slice: ingest, reachability map, overview =="
	$(KGR) ingest $(DEMO)/metaqa $(FIX)/kb.txt --schema $(FIX)/schema.toml
	$(KGR) reach $(DEMO)/metaqa
	$(KGR) overview $(DEMO)/metaqa
	$(KGR) status $(DEMO)/metaqa
	@echo "== DotRAG, offline policy =="
	$(KGR) retrieve $(DEMO)/metaqa --query "who directed the movies written by [Gary David Goldberg]" --explain
	$(KGR) retrieve $(DEMO)/metaqa --query "what movies did [Temuera Morrison] act in"
	@echo "== DotRAG vs. BM25 vs. VSS on the slice's 60 dev questions =="
	for m in dotrag bm25 vss; do for h in 1 2 3; do \
	  $(KGR) retrieve $(DEMO)/metaqa -q --method $$m --questions $(FIX)/qa_$${h}hop.txt || exit 1; done; done
	$(KGR) eval $(DEMO)/metaqa --questions $(FIX)/qa_1hop.txt --questions $(FIX)/qa_2hop.txt \
	  --questions $(FIX)/qa_3hop.txt --run dotrag-offline --run bm25-offline --run vss-offline \
	  --out $(DEMO)/metaqa/report
	@echo "== 2WikiMultihopQA slice with passages: CS-RAG vs. DotRAG =="
	$(KGR) ingest $(DEMO)/2wiki $(WIKI)/triples.jsonl --passages $(WIKI)/corpus.json
	$(KGR) reach $(DEMO)/2wiki
	$(KGR) retrieve $(DEMO)/2wiki --method csrag --query "$$(head -1 $(WIKI)/questions.jsonl | $(BIN)/python -c 'import json,sys; print(json.load(sys.stdin)["question"])')"
	for m in csrag dotrag; do $(KGR) retrieve $(DEMO)/2wiki -q --method $$m --questions $(WIKI)/questions.jsonl || exit 1; done
	$(KGR) eval $(DEMO)/2wiki --questions $(WIKI)/questions.jsonl --run csrag-offline --run dotrag-offline \
	  --out $(DEMO)/2wiki/report

# Where `embedding.precision = "auto"` picks bfloat16 (a CPU with bfloat16 units), the embedding and retrieval tests
# run again as on a CPU without them: float32, with torch, MKL and oneDNN held to AVX2 kernels. On such a CPU the
# suite itself runs float32, and the encoder tests check bfloat16 too (emulated there: the retrieval tests took 9
# minutes, too long to run them all).
AVX2_ONLY := KGR_EMBEDDING__PRECISION=float32 ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 \
  ONEDNN_MAX_CPU_ISA=AVX2
PRECISION_TESTS := tests/test_embed.py tests/test_dotrag.py tests/test_csrag.py tests/test_graph_index.py \
  tests/test_offline_policy.py tests/test_baselines.py tests/test_runner.py tests/test_csrag_chains.py

test: install
	$(BIN)/python -m pytest -q
	if $(BIN)/python -c "from kgr.embed import resolve_precision as r; exit(r('auto') != 'bfloat16')"; then \
	  echo "== embedding and retrieval tests again as on a CPU without bfloat16 units: $(AVX2_ONLY) =="; \
	  $(AVX2_ONLY) $(BIN)/python -m pytest -q $(PRECISION_TESTS); fi

bench: install
	$(BIN)/python bench/reach_bench.py
	$(BIN)/python bench/metaqa_table.py --limit 500

clean:
	rm -rf $(DEMO) .pytest_cache
