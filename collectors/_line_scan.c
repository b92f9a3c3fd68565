/* One pass over a block of JSON lines: where its lines end and which bytes make a line
 * unfit for the column-wise read (collectors/blocks.py, `_scan`, is the reference this
 * must equal byte for byte; the fuzz target and tests/test_line_scan.py compare them).
 *
 * The reference makes seven NumPy passes over each megabyte of the block and then looks
 * at every `\u` escape again; here sixteen bytes are compared at a time and only the
 * rare bytes (control bytes, backslashes, `{` and `[`) are looked at one by one.
 *
 * scan(block) -> (newlines, mark_escapes, lone_highs, openers, control,
 *                 backslashes, quotes, colons)
 * The first five are bytes holding native int64 positions, in increasing order:
 *   newlines      every `\n`;
 *   mark_escapes  every `\u0022` or `\u003a`/`\u003A` (an escape that spells `"` or `:`);
 *   lone_highs    every `\uD800`-`\uDBFF` (any case) not followed by `\uDC00`-`\uDFFF`;
 *   openers       every `{` and `[`;
 *   control       every byte below 32 that is neither `\n` nor a `\r` just before a `\n`
 *                 or at the block's very end.
 * Escapes are looked at only where all four digits are in the block (starting before
 * len - 5), and a backslash is not told apart from an escaped one: as the reference does.
 * The rest are counts of `\`, `"` and `:`.
 */
#define PY_SSIZE_T_CLEAN
#ifndef SOURCE_DIGEST /* setup.py defines it: the first 16 hex digits of this file's sha256 */
#define SOURCE_DIGEST "unknown"
#endif
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

typedef struct {
    int64_t *at;
    Py_ssize_t count, capacity;
} Positions;

static int push(Positions *p, int64_t at) {
    if (p->count == p->capacity) {
        Py_ssize_t grown = p->capacity ? p->capacity * 2 : 1024;
        int64_t *moved = realloc(p->at, (size_t)grown * sizeof(int64_t));
        if (!moved) return -1;
        p->at = moved;
        p->capacity = grown;
    }
    p->at[p->count++] = at;
    return 0;
}

static PyObject *as_bytes(Positions *p) {
    return PyBytes_FromStringAndSize((const char *)p->at,
                                     p->count * (Py_ssize_t)sizeof(int64_t));
}

static int is_high_second(unsigned char c) { /* 8 9 a b, any case */
    c |= 0x20;
    return c == '8' || c == '9' || c == 'a' || c == 'b';
}

static int is_low_second(unsigned char c) { /* c d e f, any case */
    c |= 0x20;
    return c >= 'c' && c <= 'f';
}

typedef struct {
    Positions newlines, marks, highs, openers, control;
    Py_ssize_t backslashes, quotes, colons;
} Found;

/* One of the rare bytes at `i`; returns -1 when out of memory. */
static int rare(const unsigned char *d, Py_ssize_t n, Py_ssize_t i, Found *f) {
    unsigned char c = d[i];
    if (c == '\n') return push(&f->newlines, i);
    if (c < 32) {
        if (c == '\r' && (i + 1 == n || d[i + 1] == '\n')) return 0;
        return push(&f->control, i);
    }
    if (c == '{' || c == '[') return push(&f->openers, i);
    if (c != '\\') return 0;
    f->backslashes++;
    if (i >= n - 5 || d[i + 1] != 'u') return 0;
    const unsigned char *x = d + i + 2; /* the four digits */
    if (x[0] == '0' && x[1] == '0' &&
        ((x[2] == '2' && x[3] == '2') || (x[2] == '3' && (x[3] | 0x20) == 'a')))
        return push(&f->marks, i);
    if ((x[0] | 0x20) == 'd' && is_high_second(x[1])) {
        Py_ssize_t j = i + 6; /* where its low half would start */
        int paired = j + 3 < n && d[j] == '\\' && d[j + 1] == 'u' &&
                     (d[j + 2] | 0x20) == 'd' && is_low_second(d[j + 3]);
        if (!paired) return push(&f->highs, i);
    }
    return 0;
}

static int is_rare(unsigned char c) {
    return c < 32 || c == '\\' || c == '{' || c == '[';
}

#ifdef __SSE2__
/* The sum of a vector's 16 byte counters (each at most 255). */
static Py_ssize_t byte_sum(__m128i counters) {
    __m128i halves = _mm_sad_epu8(counters, _mm_setzero_si128());
    return (Py_ssize_t)(_mm_cvtsi128_si64(halves) +
                        _mm_cvtsi128_si64(_mm_unpackhi_epi64(halves, halves)));
}
#endif

static int scan_bytes(const unsigned char *d, Py_ssize_t n, Found *f) {
    Py_ssize_t i = 0;
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), colon = _mm_set1_epi8(':');
    const __m128i slash = _mm_set1_epi8('\\'), brace = _mm_set1_epi8('{');
    const __m128i lower = _mm_set1_epi8(0x20), below = _mm_set1_epi8(31);
    while (i + 16 <= n) {
        /* `"` and `:` are counted in byte counters (a match is -1: subtracted), summed
         * before any can pass 255. */
        __m128i quotes = _mm_setzero_si128(), colons = _mm_setzero_si128();
        for (int round = 0; round < 255 && i + 16 <= n; round++, i += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(d + i));
            quotes = _mm_sub_epi8(quotes, _mm_cmpeq_epi8(v, quote));
            colons = _mm_sub_epi8(colons, _mm_cmpeq_epi8(v, colon));
            /* below 32: max(v, 31) == 31 unsigned; `{` and `[` differ only in bit 0x20 */
            __m128i low = _mm_cmpeq_epi8(_mm_max_epu8(v, below), below);
            __m128i open = _mm_cmpeq_epi8(_mm_or_si128(v, lower), brace);
            __m128i back = _mm_cmpeq_epi8(v, slash);
            unsigned mask =
                (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(low, open), back));
            while (mask) {
                if (rare(d, n, i + __builtin_ctz(mask), f) < 0) return -1;
                mask &= mask - 1;
            }
        }
        f->quotes += byte_sum(quotes);
        f->colons += byte_sum(colons);
    }
#endif
    for (; i < n; i++) {
        unsigned char c = d[i];
        f->quotes += c == '"';
        f->colons += c == ':';
        if (is_rare(c) && rare(d, n, i, f) < 0) return -1;
    }
    return 0;
}

static void release(Found *f) {
    free(f->newlines.at);
    free(f->marks.at);
    free(f->highs.at);
    free(f->openers.at);
    free(f->control.at);
}

static PyObject *line_scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    Found f;
    memset(&f, 0, sizeof f);
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = scan_bytes((const unsigned char *)view.buf, view.len, &f);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (failed) {
        release(&f);
        return PyErr_NoMemory();
    }
    PyObject *lists[5] = {as_bytes(&f.newlines), as_bytes(&f.marks), as_bytes(&f.highs),
                          as_bytes(&f.openers), as_bytes(&f.control)};
    release(&f);
    PyObject *result = NULL;
    if (lists[0] && lists[1] && lists[2] && lists[3] && lists[4])
        result = Py_BuildValue("(OOOOOnnn)", lists[0], lists[1], lists[2], lists[3],
                               lists[4], f.backslashes, f.quotes, f.colons);
    for (int k = 0; k < 5; k++) Py_XDECREF(lists[k]);
    return result;
}

static PyMethodDef scan_methods[] = {
    {"scan", line_scan, METH_VARARGS,
     "scan(block) -> (newlines, mark_escapes, lone_highs, openers, control, backslashes, "
     "quotes, colons): positions as native int64 bytes, then counts."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_line_scan",
    "One pass over a block of JSON lines: line ends and the bytes that need a closer look.",
    -1, scan_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__line_scan(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_DIGEST", SOURCE_DIGEST) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
