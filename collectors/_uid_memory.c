/* A bounded memory of event_uids the collector wrote recently, checked a column at a time.
 *
 * A resent batch (an exporter retrying after a timeout) must add no rows, so each batch
 * claims its rows' event_uids as it is queued and drops those claimed already. Checking a
 * Python set per row costs more than writing the row; this claims an Arrow string column
 * in one call, each uid looked up once in each generation.
 *
 * Each uid is kept as 128 bits: the value itself when it is 32 hex digits (the
 * collector's uids are BLAKE2b/BLAKE3 digests), two independent 64-bit hashes otherwise.
 * The memory is two generations of an open-addressing table: new uids go to the current
 * one; when it holds half the capacity it becomes the previous one and the one before is
 * dropped, so the memory always holds the last capacity/2 to capacity uids.
 */
#define PY_SSIZE_T_CLEAN
#ifndef SOURCE_DIGEST /* setup.py defines it: the first 16 hex digits of this file's sha256 */
#define SOURCE_DIGEST "unknown"
#endif
#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

typedef struct {
    uint64_t hi, lo;
} Key;

typedef struct {
    Key *slots;
    size_t mask, count;
} Generation;

typedef struct {
    PyObject_HEAD
    Generation current, previous;
    size_t per_generation;
    Py_ssize_t rolls; /* generations begun after the first: the caller times them */
} UidMemoryObject;

/* Lowercase hex digit -> its value, anything else -> 16. */
static uint8_t HEX[256];

static void hex_init(void) {
    memset(HEX, 16, sizeof HEX);
    for (int i = 0; i < 10; i++) HEX['0' + i] = (uint8_t)i;
    for (int i = 0; i < 6; i++) HEX['a' + i] = (uint8_t)(10 + i);
}

static uint64_t fnv(const uint8_t *p, size_t n, uint64_t h) {
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* 16 lowercase hex digits as their value, eight bytes at a time where a digit at a time
 * was a third of a claim's instructions; 0 in *ok for any other byte. A byte below 0x80
 * plus at most 0x50 carries into no other, so each range test holds lane by lane. */
static uint64_t unhex16(const uint8_t *p, int *ok) {
    uint64_t value = 0;
    for (int half = 0; half < 2; half++) {
        uint64_t w;
        memcpy(&w, p + 8 * half, 8);
        uint64_t digit = (w + ONES * 0x50) & ~(w + ONES * 0x46); /* 0x30 <= c <= 0x39 */
        uint64_t letter = (w + ONES * 0x1F) & ~(w + ONES * 0x19); /* 0x61 <= c <= 0x66 */
        *ok &= !(w & HIGHS) && ((digit | letter) & HIGHS) == HIGHS;
        uint64_t v = (w & (ONES * 0x0F)) + ((w >> 6) & ONES) * 9; /* a nibble a byte */
        v = ((v << 4) | (v >> 8)) & 0x00FF00FF00FF00FFULL;      /* two digits a byte */
        v = (v | (v >> 8)) & 0x0000FFFF0000FFFFULL;
        v = (v | (v >> 16)) & 0xFFFFFFFFULL;                     /* in memory order */
        value = (value << 32) | __builtin_bswap32((uint32_t)v);
    }
    return value;
}
#else
static uint64_t unhex16(const uint8_t *p, int *ok) {
    uint64_t value = 0;
    uint8_t bad = 0;
    for (size_t i = 0; i < 16; i++) {
        bad |= HEX[p[i]];
        value = (value << 4) | (HEX[p[i]] & 15);
    }
    *ok &= !(bad & 16);
    return value;
}
#endif

static Key key_of(const uint8_t *p, size_t n) {
    Key k = {0, 0};
    int hex = n == 32;
    if (hex) {
        k.hi = unhex16(p, &hex);
        k.lo = unhex16(p + 16, &hex);
    }
    /* (0, 0) marks an empty slot and all ones a forgotten one: the two digests that
     * spell them are hashed like any other text, so no two uids share a key. */
    if (hex && !(k.hi == 0 && k.lo == 0) && !(k.hi == UINT64_MAX && k.lo == UINT64_MAX))
        return k;
    k.hi = mix(fnv(p, n, 1469598103934665603ULL)) | 1; /* odd: never the empty key */
    k.lo = mix(fnv(p, n, 0x9e3779b97f4a7c15ULL) ^ n);
    if (k.hi == UINT64_MAX && k.lo == UINT64_MAX) k.lo--; /* nor the forgotten one */
    return k;
}

static size_t home_of(const Generation *g, Key k) { return (size_t)(mix(k.hi ^ k.lo)) & g->mask; }

static size_t slot_of(const Generation *g, Key k) {
    size_t i = home_of(g, k);
    while (g->slots[i].hi || g->slots[i].lo) {
        if (g->slots[i].hi == k.hi && g->slots[i].lo == k.lo) return i;
        i = (i + 1) & g->mask;
    }
    return i;
}

static const Key FORGOTTEN = {UINT64_MAX, UINT64_MAX};

/* A forgotten uid leaves a marker, so the keys probed past it stay reachable. */
static void forget(Generation *g, Key k) {
    if (!g->slots) return;
    size_t i = slot_of(g, k);
    if (g->slots[i].hi || g->slots[i].lo) g->slots[i] = FORGOTTEN;
}

static int contains(const Generation *g, Key k) {
    if (!g->slots) return 0;
    size_t i = slot_of(g, k);
    return g->slots[i].hi || g->slots[i].lo;
}

#define HUGE_PAGE (2u << 20)

/* A table of many MB: probes land anywhere in it, and with 4 KB pages nearly each one
 * missed the address cache too. Asked for in huge pages where the system lends them. */
static void *table_alloc(size_t bytes) {
#ifdef MADV_HUGEPAGE
    if (bytes >= HUGE_PAGE) {
        void *p = NULL;
        if (posix_memalign(&p, HUGE_PAGE, bytes)) return NULL;
        madvise(p, bytes, MADV_HUGEPAGE);
        return p;
    }
#endif
    return malloc(bytes);
}

static int generation_init(Generation *g, size_t capacity) {
    size_t size = 16;
    while (size < capacity * 2) size *= 2;
    /* Touched now, in one sweep: left to fault in page by page, the first inserts into a
     * new generation would each pay a page fault. */
    g->slots = table_alloc(size * sizeof(Key));
    if (g->slots) memset(g->slots, 0, size * sizeof(Key));
    g->mask = size - 1;
    g->count = 0;
    return g->slots ? 0 : -1;
}

/* Adds k; returns 1 if it was new. */
static int insert(Generation *g, Key k) {
    size_t i = slot_of(g, k);
    if (g->slots[i].hi || g->slots[i].lo) return 0;
    g->slots[i] = k;
    g->count++;
    return 1;
}

/* The current generation becomes the previous one, and the one before is dropped: its
 * table, emptied, is the new current one. Its pages are in memory already, where a new
 * table's would each be faulted in and cleared by the system first. */
static int roll(UidMemoryObject *self) {
    Generation next = self->previous;
    if (next.slots) {
        memset(next.slots, 0, (next.mask + 1) * sizeof(Key));
        next.count = 0;
    } else if (generation_init(&next, self->per_generation)) {
        return -1;
    }
    self->previous = self->current;
    self->current = next;
    self->rolls++;
    return 0;
}

/* The tables are far larger than the caches: a block of keys is hashed first and their
 * slots fetched ahead, so the probes that follow mostly hit the cache. */
#define BLOCK 32

static void prefetch(const Generation *g, Key k) {
    if (g->slots) __builtin_prefetch(&g->slots[home_of(g, k)]);
}

typedef struct {
    Py_buffer offsets, data;
    Py_ssize_t offset, count;
} Column;

static void column_close(Column *c) {
    PyBuffer_Release(&c->offsets);
    PyBuffer_Release(&c->data);
}

/* The column's buffers, its offsets checked all at once before any uid is read: a
 * column refused for them changes nothing in the memory. */
static int column_open(PyObject *args, Column *c) {
    if (!PyArg_ParseTuple(args, "y*y*nn", &c->offsets, &c->data, &c->offset, &c->count))
        return -1;
    if (c->offset < 0 || c->count < 0 ||
        (size_t)c->offsets.len / 4 < (size_t)c->offset + (size_t)c->count + 1) {
        column_close(c);
        PyErr_SetString(PyExc_ValueError, "offsets buffer too short for the rows");
        return -1;
    }
    const uint8_t *off = (const uint8_t *)c->offsets.buf + 4 * c->offset;
    int32_t last = 0;
    for (Py_ssize_t i = 0; i <= c->count; i++) {
        int32_t at;
        memcpy(&at, off + 4 * i, 4); /* a buffer from Python need not be aligned */
        if (at < 0 || at > c->data.len || (i && at < last)) {
            column_close(c);
            PyErr_SetString(PyExc_ValueError, "offsets outside the data buffer");
            return -1;
        }
        last = at;
    }
    return 0;
}

/* The i-th string of the column (its offsets checked by column_open). */
static void column_get(const Column *c, Py_ssize_t i, const uint8_t **p, size_t *n) {
    const uint8_t *off = (const uint8_t *)c->offsets.buf + 4 * (c->offset + i);
    int32_t a, b;
    memcpy(&a, off, 4);
    memcpy(&b, off + 4, 4);
    *p = (const uint8_t *)c->data.buf + a;
    *n = (size_t)(b - a);
}

/* The keys of uids start..end of the column, their slots fetched ahead. */
static void block_keys(const UidMemoryObject *self, const Column *c, Key *keys,
                       Py_ssize_t start, Py_ssize_t end) {
    for (Py_ssize_t i = start; i < end; i++) {
        const uint8_t *p;
        size_t n;
        column_get(c, i, &p, &n);
        keys[i] = key_of(p, n);
        prefetch(&self->current, keys[i]);
        prefetch(&self->previous, keys[i]);
    }
}

/* Claims each uid of the column: 1 where it was neither remembered nor earlier in the
 * column (it is remembered now), 0 for a repeat. Every uid is looked up before any is
 * added, so a column longer than the memory is still checked against all it held. Runs
 * without the interpreter's lock: the caller serialises claims. */
static PyObject *uid_claim(UidMemoryObject *self, PyObject *args) {
    Column c;
    if (column_open(args, &c)) return NULL;
    PyObject *mask = PyBytes_FromStringAndSize(NULL, c.count);
    Key *keys = malloc(((size_t)c.count + 1) * sizeof(Key));
    if (!mask || !keys) {
        column_close(&c);
        free(keys);
        Py_XDECREF(mask);
        return mask ? PyErr_NoMemory() : NULL;
    }
    char *out = PyBytes_AS_STRING(mask);
    int nomem = 0;
    Py_BEGIN_ALLOW_THREADS
    /* A column the current generation has room for: nothing is dropped while it is
     * claimed, so each uid is added right after its lookups, while its slot is cached. */
    int fits = self->current.slots && self->current.count + (size_t)c.count <= self->per_generation;
    for (Py_ssize_t start = 0; fits && start < c.count; start += BLOCK) {
        Py_ssize_t end = start + BLOCK < c.count ? start + BLOCK : c.count;
        block_keys(self, &c, keys, start, end);
        for (Py_ssize_t i = start; i < end; i++)
            out[i] = !contains(&self->previous, keys[i]) && insert(&self->current, keys[i]);
    }
    for (Py_ssize_t start = 0; !fits && start < c.count; start += BLOCK) {
        Py_ssize_t end = start + BLOCK < c.count ? start + BLOCK : c.count;
        block_keys(self, &c, keys, start, end);
        for (Py_ssize_t i = start; i < end; i++)
            out[i] = !(contains(&self->current, keys[i]) || contains(&self->previous, keys[i]));
    }
    /* Then the fresh ones go in, each once. A table of the column's own uids tells a
     * repeat within it: the memory cannot, where the generation that took the first one
     * was rolled, or dropped, before the repeat came. */
    Generation seen = {NULL, 0, 0};
    if (!fits && generation_init(&seen, (size_t)c.count)) nomem = 1;
    for (Py_ssize_t i = 0; !fits && !nomem && i < c.count; i++) {
        if (!out[i]) continue;
        if (!insert(&seen, keys[i])) { out[i] = 0; continue; }
        if (self->current.count >= self->per_generation && roll(self)) { nomem = 1; break; }
        out[i] = (char)insert(&self->current, keys[i]);
    }
    free(seen.slots);
    for (Py_ssize_t i = 0; nomem && i < c.count; i++) /* nothing claimed after all */
        if (out[i]) {
            forget(&self->current, keys[i]);
            forget(&self->previous, keys[i]);
        }
    Py_END_ALLOW_THREADS
    free(keys);
    column_close(&c);
    if (nomem) {
        Py_DECREF(mask);
        return PyErr_NoMemory();
    }
    return mask;
}

static PyObject *uid_forget(UidMemoryObject *self, PyObject *args) {
    Column c;
    if (column_open(args, &c)) return NULL;
    for (Py_ssize_t i = 0; i < c.count; i++) {
        const uint8_t *p;
        size_t n;
        column_get(&c, i, &p, &n);
        Key k = key_of(p, n);
        forget(&self->current, k);
        forget(&self->previous, k);
    }
    column_close(&c);
    Py_RETURN_NONE;
}

static int uid_init(UidMemoryObject *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"capacity", NULL};
    Py_ssize_t capacity;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "n", names, &capacity)) return -1;
    if (capacity < 2) {
        PyErr_SetString(PyExc_ValueError, "capacity must be at least 2");
        return -1;
    }
    free(self->current.slots);
    free(self->previous.slots);
    memset(&self->previous, 0, sizeof self->previous);
    self->per_generation = (size_t)capacity / 2;
    self->rolls = 0;
    /* Both tables now, the previous one empty: made at the first roll instead, its pages
     * were faulted in and cleared while every claim waited (~20 ms for 16 MB). */
    if (generation_init(&self->current, self->per_generation) ||
        generation_init(&self->previous, self->per_generation)) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void uid_dealloc(UidMemoryObject *self) {
    free(self->current.slots);
    free(self->previous.slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef uid_methods[] = {
    {"claim", (PyCFunction)uid_claim, METH_VARARGS,
     "claim(offsets, data, offset, count) -> bytes: 1 for each uid neither remembered nor "
     "earlier in the same column, which is remembered from now on; 0 for a repeat."},
    {"forget", (PyCFunction)uid_forget, METH_VARARGS,
     "forget(offsets, data, offset, count): these uids were not written after all."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef uid_members[] = {
    {"rolls", T_PYSSIZET, offsetof(UidMemoryObject, rolls), READONLY,
     "How many times the current generation became the previous one."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject UidMemoryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "collectors._uid_memory.UidMemory",
    .tp_basicsize = sizeof(UidMemoryObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The event_uids written recently, capacity/2 to capacity of them.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)uid_init,
    .tp_dealloc = (destructor)uid_dealloc,
    .tp_methods = uid_methods,
    .tp_members = uid_members,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_uid_memory",
    "A bounded memory of recently written event_uids.", -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__uid_memory(void) {
    hex_init();
    if (PyType_Ready(&UidMemoryType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "UidMemory", (PyObject *)&UidMemoryType) < 0 ||
        PyModule_AddStringConstant(m, "SOURCE_DIGEST", SOURCE_DIGEST) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
