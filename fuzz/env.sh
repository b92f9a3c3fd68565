# The environment the fuzz targets run in (sourced by fuzz/run.sh and fuzz/replay.sh).
PY=.venv/bin/python
SITE=$($PY -c 'import atheris, os; print(os.path.dirname(os.path.dirname(atheris.__file__)))')
# The ASan runtime with libFuzzer, from atheris, is loaded before everything else. Leaks
# are not checked: Python leaves its own at exit. Every UBSan report is a finding.
export LD_PRELOAD="$SITE/asan_with_fuzzer.so"
export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

# For the uid memory, whose claims write into a bytes object, and the block scan and text
# views, which read them, each Python object is its own allocation, so ASan sees an
# overrun of one.
# The OTLP target runs ten times slower so (its reference decoder is Python) and keeps
# Python's allocator.
python_malloc() { [ "$1" = otlp ] && echo pymalloc || echo malloc; }
