/* OTLP trace export requests -> canonical event columns, in one pass over the wire bytes.
 *
 * The collector's hot path. Reading protobuf fields one at a time from Python costs far
 * more than parsing them, so this module walks the protobuf wire format of an
 * ExportTraceServiceRequest itself and writes the canonical columns (Arrow buffers)
 * directly. It implements the common case of collectors/otlp.py (the reference) exactly:
 * every span whose attributes are scalars it can render as orjson would, with no user
 * spelling of `ts` or `event`, and that the contract accepts. Any other span is named in
 * the result and decoded by the reference code; an odd encoding (a repeated singular
 * message, a wire type that does not match the schema) hands the whole request back.
 *
 * The contract's tables (the fields and their types, aliases, event kinds, operation
 * names) come from Python at start-up, so they are defined once, in store/contract.py:
 * no field's slot is fixed here.
 */
#define PY_SSIZE_T_CLEAN
#ifndef SOURCE_DIGEST /* setup.py defines it: the first 16 hex digits of this file's sha256 */
#define SOURCE_DIGEST "unknown"
#endif
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ growable buffers */

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static int buf_grow(Buf *b, size_t extra);

/* Room for `extra` more bytes. The buffers are sized ahead from the last request, so
 * growing is rare: kept out of line, the check inlines into every push. */
static inline int buf_reserve(Buf *b, size_t extra) {
    if (__builtin_expect(b->len + extra <= b->cap, 1)) return 0;
    return buf_grow(b, extra);
}

static __attribute__((noinline)) int buf_grow(Buf *b, size_t extra) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    char *data = realloc(b->data, cap);
    if (!data) return -1;
    b->data = data;
    b->cap = cap;
    return 0;
}

static inline int buf_put(Buf *b, const void *src, size_t n) {
    if (!n) return 0; /* an empty buffer has no memory yet: NULL + 0 is undefined in C */
    if (buf_reserve(b, n)) return -1;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

static void buf_free(Buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

#define VEC_PUSH(vec, count, cap, type, out)                                   \
    do {                                                                       \
        if ((count) == (cap)) {                                                \
            size_t ncap = (cap) ? (cap) * 2 : 256;                             \
            type *grown = realloc((vec), ncap * sizeof(type));                 \
            if (!grown) { (out) = NULL; break; }                               \
            (vec) = grown;                                                     \
            (cap) = ncap;                                                      \
        }                                                                      \
        (out) = &(vec)[(count)++];                                             \
        memset((out), 0, sizeof(type));                                        \
    } while (0)

/* ------------------------------------------------------------------ string tables */

typedef struct {
    const uint8_t *p;
    size_t n;
} Str;

/* Keys are short (10-40 bytes): eight bytes a step, then a final mix. */
static uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t tail = 0;
    memcpy(&tail, p, n);
    h = (h ^ tail) * 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 32;
    return h;
}

typedef struct {
    char *key;
    size_t len;
    uint64_t hash;
    long value;
} Slot;

typedef struct {
    Slot *slots;
    size_t mask;
} Table;

static int table_init(Table *t, size_t expected) {
    size_t size = 16;
    while (size < expected * 4) size *= 2;
    t->slots = calloc(size, sizeof(Slot));
    t->mask = size - 1;
    return t->slots ? 0 : -1;
}

static Slot *table_slot(const Table *t, const uint8_t *p, size_t n, uint64_t h) {
    size_t i = h & t->mask;
    while (t->slots[i].key) {
        Slot *s = &t->slots[i];
        if (s->hash == h && s->len == n && memcmp(s->key, p, n) == 0) return s;
        i = (i + 1) & t->mask;
    }
    return &t->slots[i];
}

/* value | existing value (flags are or-ed); returns -1 on memory error */
static int table_or(Table *t, const char *key, size_t n, long value) {
    uint64_t h = hash_bytes((const uint8_t *)key, n);
    Slot *s = table_slot(t, (const uint8_t *)key, n, h);
    if (!s->key) {
        s->key = malloc(n + 1);
        if (!s->key) return -1;
        memcpy(s->key, key, n);
        s->key[n] = 0;
        s->len = n;
        s->hash = h;
    }
    s->value |= value;
    return 0;
}

static long table_get(const Table *t, const uint8_t *p, size_t n, uint64_t h, long missing) {
    Slot *s = table_slot(t, p, n, h);
    return s->key ? s->value : missing;
}

static void table_free(Table *t) {
    if (!t->slots) return;
    for (size_t i = 0; i <= t->mask; i++) free(t->slots[i].key);
    free(t->slots);
    t->slots = NULL;
}

/* Key roles (flags in the `keys` table). */
enum {
    K_JOB_EVENT = 1 << 0,      /* job.event */
    K_EVENT = 1 << 1,          /* event */
    K_HOST = 1 << 2,           /* host.name */
    K_PID = 1 << 3,            /* process.pid */
    K_RETRIES = 1 << 5,        /* celery.retries */
    K_TS = 1 << 6,             /* ts */
    K_TRACE = 1 << 7,          /* trace_id */
    K_SPAN = 1 << 8,           /* span_id */
    K_EXECUTION = 1 << 9,      /* execution_id */
    K_JOB_ID_KEY = 1 << 10,    /* names a job (looks like an execution) */
    K_ATTEMPT_KEY = 1 << 11,   /* names a delivery attempt */
    K_OP0 = 1 << 12,           /* messaging.operation.type */
    K_OP1 = 1 << 13,           /* messaging.operation */
    K_CELERY = 1 << 14,        /* celery.action, celery.delivery_info */
};

/* Event-name roles (flags in the `kinds` table, above the kind's index). */
enum { N_KIND = 1 << 8, N_STEP = 1 << 9, N_NO_JOB_ID = 1 << 10, N_PRODUCER = 1 << 11 };

/* The canonical fields are the contract's (store/contract.py), handed over by the Decoder's
 * `fields` and `types` at start-up: which field is which, and each one's column, are read
 * from there. These bound how many there may be (the columns are arrays in Out). */
#define MAX_FIELDS 64
#define MAX_STRING_FIELDS 48
#define MAX_INT_FIELDS 14
enum { T_TS, T_EVENT, T_STR, T_INT32, T_INT64 }; /* a field's type */
#define SPAN_KIND_PRODUCER 4 /* Span.SpanKind.SPAN_KIND_PRODUCER */
#define NO_ALIAS (-1L)

/* ------------------------------------------------------------------ parsed request */

enum { V_NONE = 0, V_STR, V_BOOL, V_INT, V_DOUBLE, V_BYTES, V_COMPLEX };

typedef struct {
    Str key;
    uint64_t hash;
    long alias; /* field * 256 + rank, or NO_ALIAS */
    long flags; /* K_* */
    int type;
    Str s;
    int64_t i;
    size_t frag, frag_n; /* its `"key":value` JSON in the request's arena; 0: none */
} Attr;

typedef struct {
    uint64_t time;
    Str name;
    long kind; /* kind_of(name), looked up once */
    size_t a0, a1; /* in event_attrs */
} Event;

typedef struct {
    int r, s, p;
    Str trace, span, parent, name;
    uint64_t start, end;
    uint64_t kind; /* SpanKind */
    size_t a0, a1; /* in span_attrs */
    size_t e0, e1; /* in events */
} Span;

typedef struct {
    size_t a0, a1; /* in resource_attrs */
    size_t s0, s1; /* in spans */
} Resource;

typedef struct {
    Attr *res_attrs, *span_attrs, *event_attrs;
    size_t n_res_attrs, n_span_attrs, n_event_attrs;
    size_t c_res_attrs, c_span_attrs, c_event_attrs;
    Event *events;
    size_t n_events, c_events;
    Span *spans;
    size_t n_spans, c_spans;
    Resource *resources;
    size_t n_resources, c_resources;
    Buf arena; /* JSON fragments of the attributes */
} Parsed;

static void parsed_free(Parsed *q) {
    free(q->res_attrs);
    free(q->span_attrs);
    free(q->event_attrs);
    free(q->events);
    free(q->spans);
    free(q->resources);
    buf_free(&q->arena);
}

/* ------------------------------------------------------------------ wire format */

#define ODD (-2) /* well-formed perhaps, but not the common shape: the reference decides */
#define NOMEM (-3)

static const uint8_t *varint(const uint8_t *p, const uint8_t *end, uint64_t *out) {
    if (p < end && !(*p & 0x80)) { /* tags and most lengths: one byte */
        *out = *p;
        return p + 1;
    }
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return p;
        }
    }
    return NULL;
}

/* A tag or a length: protobuf's parser reads these as 32-bit varints, of at most five
 * bytes however many zero bits pad them, and refuses a body with a longer one. */
static const uint8_t *varint32(const uint8_t *p, const uint8_t *end, uint64_t *out) {
    const uint8_t *start = p;
    p = varint(p, end, out);
    return p && p - start <= 5 && *out <= UINT32_MAX ? p : NULL;
}

/* One field: its number, wire type, and payload (a slice for LEN, a value otherwise). */
typedef struct {
    uint32_t number;
    int wire;
    uint64_t value;
    Str slice;
} Field;

static const uint8_t *next_field(const uint8_t *p, const uint8_t *end, Field *f) {
    uint64_t tag;
    p = varint32(p, end, &tag);
    if (!p) return NULL;
    f->number = (uint32_t)(tag >> 3);
    f->wire = (int)(tag & 7);
    if (f->number == 0) return NULL;
    switch (f->wire) {
    case 0:
        return varint(p, end, &f->value);
    case 1:
        if (end - p < 8) return NULL;
        memcpy(&f->value, p, 8);
        return p + 8;
    case 2: {
        uint64_t n;
        p = varint32(p, end, &n);
        if (!p || n > (uint64_t)(end - p)) return NULL;
        f->slice.p = p;
        f->slice.n = (size_t)n;
        return p + n;
    }
    case 5:
        if (end - p < 4) return NULL;
        f->value = 0;
        memcpy(&f->value, p, 4);
        return p + 4;
    default:
        return NULL; /* groups and reserved wire types: not in OTLP */
    }
}

#define ALIAS_SHIFT 20 /* roles: (alias + 1) << ALIAS_SHIFT | K_* flags */

typedef struct {
    Table roles;   /* key -> its alias (field * 256 + rank) and K_* flags, in one lookup */
    Table kinds;   /* event name -> index | N_* flags */
    Table ops;     /* operation name -> kind index */
    char *kind_text[256];  /* kind index -> its name */
    size_t kind_len[256];
    int n_kinds;
    char *worker_key;      /* where host:pid is kept (mapping.RESOURCE_WORKER_ID) */
    size_t worker_key_len;
    long deliver;          /* the kinds entries of `deliver` and `enqueue` */
    long enqueue;
    /* The field layout: each field's type and its column among the string or integer
     * columns, and where the fields with rules of their own are. */
    int n_fields, n_strings, n_ints;
    int type[MAX_FIELDS], col[MAX_FIELDS];
    int str_field[MAX_STRING_FIELDS], int_field[MAX_INT_FIELDS]; /* column -> field */
    int int_width[MAX_INT_FIELDS];
    int f_ts, f_event, f_job_id, f_worker_id, f_attempt;
    /* Keys a span row sets itself, classified once. */
    Attr t_trace, t_span, t_execution, t_name, t_end, t_ts, t_event, t_worker;
} Config;

static void classify(const Config *c, Attr *a) {
    a->hash = hash_bytes(a->key.p, a->key.n);
    long roles = table_get(&c->roles, a->key.p, a->key.n, a->hash, 0);
    a->alias = (roles >> ALIAS_SHIFT) - 1; /* NO_ALIAS when the key spells no field */
    a->flags = roles & ((1L << ALIAS_SHIFT) - 1);
}

/* Protobuf strings must be UTF-8; a body with one that is not is the reference's to refuse. */
static int utf8_valid(Str t) {
    const uint8_t *s = t.p;
    size_t n = t.n, i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ULL)) {
                i += 8;
                continue;
            }
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
        else return 0;
        if (i + len > n) return 0;
        for (size_t k = 1; k < len; k++) {
            uint8_t d = s[i + k];
            if ((d & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (d & 0x3F);
        }
        if (len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
        if (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
        i += len;
    }
    return 1;
}

/* A string field: length-delimited and UTF-8, or not for this module to judge. */
static int check_text(const Field *f) {
    if (f->wire != 2) return ODD;
    return utf8_valid(f->slice) ? 0 : -1;
}

/* Values nested deeper than this are the reference's to judge (its parser has a depth
 * limit of its own); the C stack is never at risk from a body. */
#define MAX_DEPTH 32

static int check_key_value_at(Str m, int depth);
static int check_any_value(Str m, int depth);

/* An ArrayValue (`pairs` 0: values are AnyValues) or a KeyValueList (`pairs` 1: values
 * are KeyValues), checked as protobuf's parser checks it. */
static int check_values(Str m, int pairs, int depth) {
    if (depth > MAX_DEPTH) return ODD;
    const uint8_t *p = m.p, *end = m.p + m.n;
    Field f;
    while (p < end) {
        p = next_field(p, end, &f);
        if (!p) return -1;
        if (f.number != 1) continue;
        if (f.wire != 2) return ODD;
        int rc = pairs ? check_key_value_at(f.slice, depth + 1) : check_any_value(f.slice, depth + 1);
        if (rc) return rc;
    }
    return 0;
}

/* An AnyValue this module does not read: its strings, nested ones too, must be UTF-8. */
static int check_any_value(Str m, int depth) {
    if (depth > MAX_DEPTH) return ODD;
    const uint8_t *p = m.p, *end = m.p + m.n;
    Field f;
    while (p < end) {
        p = next_field(p, end, &f);
        if (!p) return -1;
        int rc = 0;
        if (f.number == 1) rc = check_text(&f);
        else if (f.number == 5 || f.number == 6)
            rc = f.wire == 2 ? check_values(f.slice, f.number == 6, depth + 1) : ODD;
        else if (f.number == 8) rc = ODD; /* string_value_strindex: the reference decides */
        if (rc) return rc;
    }
    return 0;
}

static int check_key_value_at(Str m, int depth) {
    const uint8_t *p = m.p, *end = m.p + m.n;
    Field f;
    while (p < end) {
        p = next_field(p, end, &f);
        if (!p) return -1;
        int rc = 0;
        if (f.number == 1) rc = check_text(&f);
        else if (f.number == 2) rc = f.wire == 2 ? check_any_value(f.slice, depth + 1) : ODD;
        if (rc) return rc;
    }
    return 0;
}

/* The fields this module reads past (scope, links, status, trace state, schema URLs,
 * entity refs, nested values) are still checked the way the reference's parser checks
 * them: strings must be UTF-8. */
static int check_key_value(Str m) { return check_key_value_at(m, 0); }

/* A message whose fields `texts` are strings and `pairs` KeyValues; others skipped. */
static int check_message(Str m, uint32_t texts_mask, uint32_t pairs_mask) {
    const uint8_t *p = m.p, *end = m.p + m.n;
    Field f;
    while (p < end) {
        p = next_field(p, end, &f);
        if (!p) return -1;
        if (f.number >= 32) continue;
        int rc = 0;
        if (texts_mask & (1u << f.number)) rc = check_text(&f);
        else if (pairs_mask & (1u << f.number)) rc = f.wire == 2 ? check_key_value(f.slice) : ODD;
        if (rc) return rc;
    }
    return 0;
}

#define BIT(n) (1u << (n))

static int parse_any_value(Str m, Attr *a) {
    const uint8_t *p = m.p, *end = m.p + m.n;
    Field f;
    a->type = V_NONE;
    while (p < end) {
        p = next_field(p, end, &f);
        if (!p) return -1;
        switch (f.number) {
        case 1:
            if (f.wire != 2) return ODD;
            if (!utf8_valid(f.slice)) return -1;
            a->type = V_STR;
            a->s = f.slice;
            break;
        case 2:
            if (f.wire != 0) return ODD;
            a->type = V_BOOL;
            a->i = f.value != 0;
            break;
        case 3:
            if (f.wire != 0) return ODD;
            a->type = V_INT;
            a->i = (int64_t)f.value;
            break;
        case 4:
            if (f.wire != 1) return ODD;
            a->type = V_DOUBLE;
            break;
        case 5:
        case 6: { /* never rendered here, but checked: a span may be read past */
            int rc = f.wire == 2 ? check_values(f.slice, f.number == 6, 1) : ODD;
            if (rc) return rc;
            a->type = V_COMPLEX;
            break;
        }
        case 8: /* string_value_strindex, which the reference renders: it decides */
            return ODD;
        case 7:
            a->type = V_BYTES;
            break;
        default:
            break;
        }
    }
    return 0;
}

static int render(Buf *arena, Attr *a);

static int parse_key_value(const Config *c, Parsed *q, Str m, Attr *a) {
    const uint8_t *p = m.p, *end = m.p + m.n;
    Field f;
    int seen_value = 0;
    a->key.p = (const uint8_t *)"";
    a->key.n = 0;
    a->type = V_NONE;
    while (p < end) {
        p = next_field(p, end, &f);
        if (!p) return -1;
        if (f.number == 1) {
            if (f.wire != 2) return ODD;
            if (!utf8_valid(f.slice)) return -1;
            a->key = f.slice;
        } else if (f.number == 2) {
            if (f.wire != 2 || seen_value++) return ODD; /* a repeated message merges */
            int rc = parse_any_value(f.slice, a);
            if (rc) return rc;
        }
    }
    classify(c, a);
    return render(&q->arena, a);
}

#define PUSH_ATTR(q, which, out)                                                  \
    VEC_PUSH((q)->which, (q)->n_##which, (q)->c_##which, Attr, out)

static long kind_of(const Config *c, Str name) {
    return table_get(&c->kinds, name.p, name.n, hash_bytes(name.p, name.n), 0);
}

static int parse_event(const Config *c, Parsed *q, Str m, Event *e) {
    const uint8_t *p = m.p, *end = m.p + m.n;
    Field f;
    e->a0 = e->a1 = q->n_event_attrs;
    e->name.p = (const uint8_t *)"";
    while (p < end) {
        p = next_field(p, end, &f);
        if (!p) return -1;
        if (f.number == 1) {
            if (f.wire != 1) return ODD;
            e->time = f.value;
        } else if (f.number == 2) {
            int rc = check_text(&f);
            if (rc) return rc;
            e->name = f.slice;
        } else if (f.number == 3) {
            Attr *a;
            if (f.wire != 2) return ODD;
            PUSH_ATTR(q, event_attrs, a);
            if (!a) return NOMEM;
            int rc = parse_key_value(c, q, f.slice, a);
            if (rc) return rc;
        }
    }
    e->a1 = q->n_event_attrs;
    e->kind = kind_of(c, e->name);
    return 0;
}

static int parse_span(const Config *c, Parsed *q, Str m, Span *sp) {
    const uint8_t *p = m.p, *end = m.p + m.n;
    Field f;
    /* Event attributes and span attributes are kept apart so each stays contiguous. */
    sp->a0 = sp->a1 = q->n_span_attrs;
    sp->e0 = sp->e1 = q->n_events;
    sp->trace.p = sp->span.p = sp->parent.p = sp->name.p = (const uint8_t *)"";
    sp->kind = 0;
    while (p < end) {
        p = next_field(p, end, &f);
        if (!p) return -1;
        switch (f.number) {
        case 1: case 2: case 4: case 5: {
            if (f.wire != 2) return ODD;
            if (f.number == 5 && !utf8_valid(f.slice)) return -1;
            Str *target = f.number == 1 ? &sp->trace : f.number == 2 ? &sp->span
                        : f.number == 4 ? &sp->parent : &sp->name;
            *target = f.slice;
            break;
        }
        case 6:
            if (f.wire != 0) return ODD;
            sp->kind = (uint32_t)f.value; /* an enum is 32 bits: the parser keeps the low ones */
            break;
        case 7:
        case 8:
            if (f.wire != 1) return ODD;
            if (f.number == 7) sp->start = f.value; else sp->end = f.value;
            break;
        case 9: {
            Attr *a;
            if (f.wire != 2) return ODD;
            PUSH_ATTR(q, span_attrs, a);
            if (!a) return NOMEM;
            int rc = parse_key_value(c, q, f.slice, a);
            if (rc) return rc;
            break;
        }
        case 11: {
            Event *e;
            if (f.wire != 2) return ODD;
            VEC_PUSH(q->events, q->n_events, q->c_events, Event, e);
            if (!e) return NOMEM;
            int rc = parse_event(c, q, f.slice, e);
            if (rc) return rc;
            break;
        }
        case 3: { /* trace_state */
            int rc = check_text(&f);
            if (rc) return rc;
            break;
        }
        case 13: { /* a link: trace_state, attributes */
            int rc = f.wire == 2 ? check_message(f.slice, BIT(3), BIT(4)) : ODD;
            if (rc) return rc;
            break;
        }
        case 15: { /* status: message */
            int rc = f.wire == 2 ? check_message(f.slice, BIT(2), 0) : ODD;
            if (rc) return rc;
            break;
        }
        default:
            break;
        }
    }
    sp->a1 = q->n_span_attrs;
    sp->e1 = q->n_events;
    return 0;
}

static int parse_request(const Config *c, Parsed *q, Str body) {
    const uint8_t *p = body.p, *end = body.p + body.n;
    Field f, g, h;
    int r = 0;
    while (p < end) {
        p = next_field(p, end, &f);
        if (!p) return -1;
        if (f.number != 1) continue;
        if (f.wire != 2) return ODD;
        Resource *res;
        VEC_PUSH(q->resources, q->n_resources, q->c_resources, Resource, res);
        if (!res) return NOMEM;
        res->a0 = res->a1 = q->n_res_attrs;
        res->s0 = res->s1 = q->n_spans;
        const uint8_t *rp = f.slice.p, *rend = f.slice.p + f.slice.n;
        int seen_resource = 0, s = 0;
        while (rp < rend) {
            rp = next_field(rp, rend, &g);
            if (!rp) return -1;
            if (g.number == 1) { /* Resource */
                if (g.wire != 2 || seen_resource++) return ODD;
                const uint8_t *ap = g.slice.p, *aend = g.slice.p + g.slice.n;
                while (ap < aend) {
                    ap = next_field(ap, aend, &h);
                    if (!ap) return -1;
                    if (h.number == 3) { /* an entity ref: its strings */
                        int rc = h.wire == 2
                                     ? check_message(h.slice, BIT(1) | BIT(2) | BIT(3) | BIT(4), 0)
                                     : ODD;
                        if (rc) return rc;
                        continue;
                    }
                    if (h.number != 1) continue;
                    if (h.wire != 2) return ODD;
                    Attr *a;
                    PUSH_ATTR(q, res_attrs, a);
                    if (!a) return NOMEM;
                    int rc = parse_key_value(c, q, h.slice, a);
                    if (rc) return rc;
                }
                res->a1 = q->n_res_attrs;
            } else if (g.number == 3) { /* schema_url */
                int rc = check_text(&g);
                if (rc) return rc;
            } else if (g.number == 2) { /* ScopeSpans */
                if (g.wire != 2) return ODD;
                const uint8_t *sp = g.slice.p, *send = g.slice.p + g.slice.n;
                int n = 0;
                while (sp < send) {
                    sp = next_field(sp, send, &h);
                    if (!sp) return -1;
                    if (h.number == 1 || h.number == 3) { /* scope: name, version, attrs */
                        int rc = h.number == 3 ? check_text(&h)
                               : h.wire == 2 ? check_message(h.slice, BIT(1) | BIT(2), BIT(3))
                               : ODD;
                        if (rc) return rc;
                        continue;
                    }
                    if (h.number != 2) continue;
                    if (h.wire != 2) return ODD;
                    Span *span;
                    VEC_PUSH(q->spans, q->n_spans, q->c_spans, Span, span);
                    if (!span) return NOMEM;
                    span->r = r;
                    span->s = s;
                    span->p = n++;
                    int rc = parse_span(c, q, h.slice, span);
                    if (rc) return rc;
                }
                s++;
            }
        }
        res->s1 = q->n_spans;
        r++;
    }
    return 0;
}

/* ------------------------------------------------------------------ BLAKE2b (RFC 7693) */

static const uint64_t B2_IV[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL,
    0xa54ff53a5f1d36f1ULL, 0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL,
    0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

static const uint8_t B2_SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

#define ROTR64(x, n) (((x) >> (n)) | ((x) << (64 - (n))))
#define B2_G(a, b, c, d, x, y)                                                    \
    do {                                                                          \
        v[a] = v[a] + v[b] + (x); v[d] = ROTR64(v[d] ^ v[a], 32);                 \
        v[c] = v[c] + v[d];       v[b] = ROTR64(v[b] ^ v[c], 24);                 \
        v[a] = v[a] + v[b] + (y); v[d] = ROTR64(v[d] ^ v[a], 16);                 \
        v[c] = v[c] + v[d];       v[b] = ROTR64(v[b] ^ v[c], 63);                 \
    } while (0)

/* BLAKE2b's twelve rounds over v[16] and the message words m[16], with the G of one word
 * width (a word, or a vector of them). Unrolled, the message words each round takes are
 * fixed and stay in registers. */
#define B2_ROUNDS(G)                                                              \
    _Pragma("GCC unroll 12")                                                      \
    for (int r = 0; r < 12; r++) {                                                \
        const uint8_t *s = B2_SIGMA[r];                                           \
        G(0, 4, 8, 12, m[s[0]], m[s[1]]);                                         \
        G(1, 5, 9, 13, m[s[2]], m[s[3]]);                                         \
        G(2, 6, 10, 14, m[s[4]], m[s[5]]);                                        \
        G(3, 7, 11, 15, m[s[6]], m[s[7]]);                                        \
        G(0, 5, 10, 15, m[s[8]], m[s[9]]);                                        \
        G(1, 6, 11, 12, m[s[10]], m[s[11]]);                                      \
        G(2, 7, 8, 13, m[s[12]], m[s[13]]);                                       \
        G(3, 4, 9, 14, m[s[14]], m[s[15]]);                                       \
    }

static void b2_compress(uint64_t h[8], const uint8_t block[128], uint64_t t, int last) {
    uint64_t v[16], m[16];
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(m, block, sizeof m); /* the words are little-endian, as this machine's are */
#else
    for (int i = 0; i < 16; i++) {
        uint64_t w = 0;
        for (int j = 7; j >= 0; j--) w = (w << 8) | block[i * 8 + j];
        m[i] = w;
    }
#endif
    for (int i = 0; i < 8; i++) {
        v[i] = h[i];
        v[i + 8] = B2_IV[i];
    }
    v[12] ^= t;
    if (last) v[14] = ~v[14];
    B2_ROUNDS(B2_G);
    for (int i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
}

/* The four bytes of v, one to every other byte of the result (0xaabbccdd ->
 * 0x00aa00bb00cc00dd). */
static uint64_t spread4(uint64_t v) {
    v = (v | (v << 16)) & 0x0000FFFF0000FFFFULL;
    return (v | (v << 8)) & 0x00FF00FF00FF00FFULL;
}

/* Sixteen nibbles, one a byte, as lowercase hex digits: '0' + n, and 39 more from 10. */
static uint64_t hex_digits(uint64_t nibbles) {
    uint64_t tens = ((nibbles + 0x0606060606060606ULL) >> 4) & 0x0101010101010101ULL;
    return nibbles + 0x3030303030303030ULL + tens * 39;
}

/* The 8 bytes of x, in memory order, as 16 hex digits: a word at a time, where a digit at
 * a time was ~8 instructions each and, with the ids, ~1k instructions a span. */
static void hex8(uint64_t x, char out[16]) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t high = (x >> 4) & 0x0F0F0F0F0F0F0F0FULL, low = x & 0x0F0F0F0F0F0F0F0FULL;
    uint64_t first = hex_digits(spread4(high & 0xFFFFFFFF) | (spread4(low & 0xFFFFFFFF) << 8));
    uint64_t second = hex_digits(spread4(high >> 32) | (spread4(low >> 32) << 8));
    memcpy(out, &first, 8);
    memcpy(out + 8, &second, 8);
#else
    static const char hexd[] = "0123456789abcdef";
    for (int i = 0; i < 8; i++) {
        uint8_t byte = (uint8_t)(x >> (8 * i));
        out[2 * i] = hexd[byte >> 4];
        out[2 * i + 1] = hexd[byte & 15];
    }
#endif
}

/* A digest's first 16 bytes (h0, h1 little-endian) as 32 hex digits. */
static void hex16(const uint64_t h0, const uint64_t h1, char out[32]) {
    hex8(h0, out);
    hex8(h1, out + 16);
}

/* The 16-byte BLAKE2b digest of `n` bytes, as 32 hex digits (content_uid in normalise.py). */
static void blake2b16_hex(const uint8_t *in, size_t n, char out[32]) {
    uint64_t h[8];
    uint8_t block[128];
    memcpy(h, B2_IV, sizeof h);
    h[0] ^= 0x01010000ULL ^ 16; /* digest length 16, no key */
    uint64_t t = 0;
    while (n > 128) {
        t += 128;
        b2_compress(h, in, t, 0);
        in += 128;
        n -= 128;
    }
    memset(block, 0, sizeof block);
    memcpy(block, in, n);
    t += n;
    b2_compress(h, block, t, 1);
    hex16(h[0], h[1], out);
}

/* Four digests at once, one message a lane: a span's rows have four or so uids of one
 * block each, and the lanes of a vector unit hash them in the time of little more than
 * one (GCC's vector extensions; with target clones, AVX2 or AVX-512 where the machine
 * has them). Each message is one block, zero-padded, of n[lane] bytes. */
typedef uint64_t u64x4 __attribute__((vector_size(32)));

#if defined(__GNUC__) && __GNUC__ >= 11 && !defined(__clang__) && defined(__x86_64__) && \
    defined(__linux__)
#define B2_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define B2_CLONES
#endif

B2_CLONES
static void blake2b16_hex_x4(const uint64_t words[4][16], const size_t n[4],
                             char out[4][32]) {
    u64x4 m[16], v[16], h[8];
    for (int w = 0; w < 16; w++) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        m[w] = (u64x4){words[0][w], words[1][w], words[2][w], words[3][w]};
#else
        uint64_t lanes[4];
        for (int lane = 0; lane < 4; lane++) {
            const uint8_t *b = (const uint8_t *)&words[lane][w];
            uint64_t x = 0;
            for (int j = 7; j >= 0; j--) x = (x << 8) | b[j];
            lanes[lane] = x;
        }
        m[w] = (u64x4){lanes[0], lanes[1], lanes[2], lanes[3]};
#endif
    }
    for (int i = 0; i < 8; i++) {
        uint64_t first = B2_IV[i] ^ (i == 0 ? 0x01010000ULL ^ 16 : 0);
        h[i] = (u64x4){first, first, first, first};
        v[i] = h[i];
        v[i + 8] = (u64x4){B2_IV[i], B2_IV[i], B2_IV[i], B2_IV[i]};
    }
    v[12] ^= (u64x4){n[0], n[1], n[2], n[3]};
    v[14] = ~v[14]; /* every lane's only block is its last */
    B2_ROUNDS(B2_G); /* the scalar G: its operators work lane by lane on vectors */
    u64x4 h0 = h[0] ^ v[0] ^ v[8], h1 = h[1] ^ v[1] ^ v[9];
    for (int lane = 0; lane < 4; lane++) hex16(h0[lane], h1[lane], out[lane]);
}

/* ------------------------------------------------------------------ output columns */

/* A column's values. Run-end encoded, `runs` holds the row after each value's run (int32)
 * and `rows` counts values; a row equal to the one before it extends the last run. */
typedef struct {
    Buf data, offsets, valid, runs;
    size_t rows;
    int64_t nulls;
    /* Where the last value came from (an attribute) and in which span: the same source
     * in the same span is the same value, known without comparing bytes. */
    const void *last_from;
    size_t last_span;
} StrCol;

typedef struct {
    Buf data, valid, runs;
    size_t rows;
    int64_t nulls;
    int width; /* 4 or 8 */
} IntCol;

static inline int bit_push(Buf *valid, size_t row, int set) {
    if (row % 8 == 0) {
        uint8_t zero = 0;
        if (buf_put(valid, &zero, 1)) return -1;
    }
    if (set) valid->data[row / 8] |= (char)(1 << (row % 8));
    return 0;
}

static inline int str_push(StrCol *c, const char *p, size_t n, int valid) {
    if (c->rows == 0) {
        int32_t zero = 0;
        if (buf_put(&c->offsets, &zero, 4)) return -1;
    }
    if (valid && buf_put(&c->data, p, n)) return -1;
    if (c->data.len > INT32_MAX) return -1;
    int32_t off = (int32_t)c->data.len;
    if (buf_put(&c->offsets, &off, 4) || bit_push(&c->valid, c->rows, valid)) return -1;
    if (!valid) c->nulls++;
    c->rows++;
    return 0;
}

static inline int int_push(IntCol *c, int64_t v, int valid) {
    if (!valid) v = 0;
    int rc;
    if (c->width == 4) {
        int32_t w = (int32_t)v;
        rc = buf_put(&c->data, &w, 4);
    } else {
        rc = buf_put(&c->data, &v, 8);
    }
    if (rc || bit_push(&c->valid, c->rows, valid)) return -1;
    if (!valid) c->nulls++;
    c->rows++;
    return 0;
}

static int bit_at(const Buf *valid, size_t row) {
    return (valid->data[row / 8] >> (row % 8)) & 1;
}

/* The value that row `row` has: the row itself, or with runs the run holding it. */
static size_t value_of(const Buf *runs, size_t values, size_t row, int in_runs) {
    if (!in_runs) return row;
    const int32_t *end = (const int32_t *)runs->data;
    if (values == 1 || (values > 1 && (size_t)end[values - 2] <= row))
        return values - 1; /* the last run: a span's rows are asked for while it is written */
    size_t lo = 0, hi = values;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((size_t)end[mid] > row) hi = mid; else lo = mid + 1;
    }
    return lo;
}

/* Opens a run for the value just pushed, which row `row` has. */
static inline int run_open(Buf *runs, size_t row) {
    int32_t end = (int32_t)(row + 1);
    return buf_put(runs, &end, 4);
}

static inline void run_extend(Buf *runs, size_t values, size_t row) {
    ((int32_t *)runs->data)[values - 1] = (int32_t)(row + 1);
}

static inline int str_is_last(const StrCol *c, const char *p, size_t n, int valid) {
    size_t i = c->rows - 1;
    if (bit_at(&c->valid, i) != valid) return 0;
    const int32_t *off = (const int32_t *)c->offsets.data;
    return !valid || ((size_t)(off[i + 1] - off[i]) == n &&
                      (!n || memcmp(c->data.data + off[i], p, n) == 0));
}

/* Row `row` of the column: a value of its own, or with runs (`in_runs`) one more row of
 * the last run where the value is the same. */
static inline int str_put(StrCol *c, const char *p, size_t n, int valid, size_t row,
                          int in_runs) {
    if (!in_runs) return str_push(c, p, n, valid);
    c->last_from = NULL;
    if (c->rows && str_is_last(c, p, n, valid)) {
        run_extend(&c->runs, c->rows, row);
        return 0;
    }
    return str_push(c, p, n, valid) || run_open(&c->runs, row) ? -1 : 0;
}

/* str_put of a value taken from `from` (an attribute, unchanged while span `span` is
 * decoded). */
static inline int str_put_from(StrCol *c, const void *from, size_t span, const char *p,
                               size_t n, int valid, size_t row, int in_runs) {
    if (in_runs && c->rows && from == c->last_from && span == c->last_span) {
        run_extend(&c->runs, c->rows, row);
        return 0;
    }
    if (str_put(c, p, n, valid, row, in_runs)) return -1;
    c->last_from = from;
    c->last_span = span;
    return 0;
}

static inline int int_put(IntCol *c, int64_t v, int valid, size_t row, int in_runs) {
    if (!in_runs) return int_push(c, v, valid);
    if (c->rows) {
        size_t i = c->rows - 1;
        int64_t last = c->width == 4 ? ((const int32_t *)c->data.data)[i]
                                     : ((const int64_t *)c->data.data)[i];
        if (bit_at(&c->valid, i) == valid && (!valid || last == v)) {
            run_extend(&c->runs, c->rows, row);
            return 0;
        }
    }
    return int_push(c, v, valid) || run_open(&c->runs, row) ? -1 : 0;
}

/* Row `row` of the column takes the value row `from` has. */
static int str_again(StrCol *c, size_t from, size_t row, int in_runs) {
    size_t v = value_of(&c->runs, c->rows, from, in_runs);
    if (in_runs && v == c->rows - 1) {
        run_extend(&c->runs, c->rows, row);
        return 0;
    }
    const int32_t *off = (const int32_t *)c->offsets.data;
    int32_t a = off[v], b = off[v + 1];
    int valid = bit_at(&c->valid, v);
    /* Reserved first: the copy reads from the buffer it appends to. */
    if (valid && buf_reserve(&c->data, (size_t)(b - a))) return -1;
    return str_put(c, b > a ? c->data.data + a : "", (size_t)(b - a), valid, row, in_runs);
}

static int int_again(IntCol *c, size_t from, size_t row, int in_runs) {
    size_t v = value_of(&c->runs, c->rows, from, in_runs);
    int valid = bit_at(&c->valid, v);
    int64_t value = c->width == 4 ? ((const int32_t *)c->data.data)[v]
                                  : ((const int64_t *)c->data.data)[v];
    return int_put(c, value, valid, row, in_runs);
}

/* The output: event_uid, ts, event, the string fields, the int fields, execution_id, attrs. */
enum { C_UID, C_EVENT, C_EXECUTION, C_ATTRS, N_STRCOLS_FIXED };

typedef struct {
    StrCol fixed[N_STRCOLS_FIXED];
    StrCol strings[MAX_STRING_FIELDS];
    IntCol ints[MAX_INT_FIELDS];
    IntCol ts;
    int n_strings, n_ints; /* of the Config's layout */
    size_t rows;
    /* Run-end encode the columns a span's rows share (all but uid, ts and event): set for
     * a request whose spans carry their steps as span events. */
    int in_runs;
    size_t span; /* counts the spans decoded, from 1 */
} Out;

static void str_col_free(StrCol *c) {
    buf_free(&c->data);
    buf_free(&c->offsets);
    buf_free(&c->valid);
    buf_free(&c->runs);
}

static void out_free(Out *o) {
    for (int i = 0; i < N_STRCOLS_FIXED; i++) str_col_free(&o->fixed[i]);
    for (int i = 0; i < o->n_strings; i++) str_col_free(&o->strings[i]);
    for (int i = 0; i < o->n_ints; i++) {
        buf_free(&o->ints[i].data); buf_free(&o->ints[i].valid); buf_free(&o->ints[i].runs);
    }
    buf_free(&o->ts.data);
    buf_free(&o->ts.valid);
}

/* ------------------------------------------------------------------ one span's rows */

#define MAX_ENTRIES 256

/* A record is a list of attributes, by reference: they live in the parsed request or,
 * for the ones a span row adds, in decode_span for as long as the span is decoded. */
typedef struct Record {
    const Attr *e[MAX_ENTRIES];
    int n;
    /* At least the entries' key-hash bits (one of 256, from the hash's top byte) and
     * flags: a key or a flag missing here is missing from the record, found without a
     * scan. A span's record holds some twenty keys: in 64 bits, a new key's bit was
     * taken a quarter of the time, and each such key scanned the whole record. */
    uint64_t hashes[4];
    long flags;
} Record;

static void record_clear(Record *r) {
    r->n = 0;
    memset(r->hashes, 0, sizeof r->hashes);
    r->flags = 0;
}

/* {**record, key: value}: a key already there keeps its place and takes the new value. */
static int record_set(Record *r, const Attr *a) {
    unsigned top = (unsigned)(a->hash >> 56);
    uint64_t *word = &r->hashes[top >> 6], bit = 1ULL << (top & 63);
    if (*word & bit) {
        for (int i = 0; i < r->n; i++) {
            if (r->e[i]->hash == a->hash && r->e[i]->key.n == a->key.n &&
                memcmp(r->e[i]->key.p, a->key.p, a->key.n) == 0) {
                r->e[i] = a;
                r->flags |= a->flags;
                return 0;
            }
        }
    }
    if (r->n == MAX_ENTRIES) return ODD;
    r->e[r->n++] = a;
    *word |= bit;
    r->flags |= a->flags;
    return 0;
}

/* Copies only the entries in use: a whole Record is MAX_ENTRIES wide. */
static void record_copy(Record *to, const Record *from) {
    memcpy(to->e, from->e, (size_t)from->n * sizeof(const Attr *));
    to->n = from->n;
    memcpy(to->hashes, from->hashes, sizeof to->hashes);
    to->flags = from->flags;
}

static int record_find(const Record *r, long flag) {
    if (!(r->flags & flag)) return -1;
    for (int i = 0; i < r->n; i++)
        if (r->e[i]->flags & flag) return i;
    return -1;
}

static void record_remove(Record *r, int i) {
    memmove(&r->e[i], &r->e[i + 1], (size_t)(r->n - i - 1) * sizeof(const Attr *));
    r->n--;
}

/* Looks an attribute value up the way `attrs.get(key)` would. */
static const Attr *record_get(const Record *r, long flag) {
    int i = record_find(r, flag);
    return i >= 0 ? r->e[i] : NULL;
}

static const char *kind_name(const Config *c, long kind, size_t *len) {
    *len = c->kind_len[kind & 255];
    return c->kind_text[kind & 255];
}

/* ------------------------------------------------------------------ JSON as orjson writes it */

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* Whether any of the 8 bytes of w is below 0x20, a quote or a backslash: one that JSON
 * escapes. Exact for "any" (a borrow only ever marks bytes above a true one). */
static int needs_escape(uint64_t w) {
    uint64_t quote = w ^ (ONES * '"'), slash = w ^ (ONES * '\\');
    uint64_t hits = ((w - ONES * 0x20) & ~w) | ((quote - ONES) & ~quote) |
                    ((slash - ONES) & ~slash);
    return (hits & HIGHS) != 0;
}

static int json_string(Buf *b, Str s) {
    static const char hexd[] = "0123456789abcdef";
    if (buf_reserve(b, s.n * 6 + 2)) return NOMEM;
    char *o = b->data + b->len;
    *o++ = '"';
    size_t i = 0;
    while (i < s.n) {
        /* Eight bytes at a time while none needs escaping, then one at a time. */
        while (i + 8 <= s.n) {
            uint64_t w;
            memcpy(&w, s.p + i, 8);
            if (needs_escape(w)) break;
            memcpy(o, &w, 8);
            o += 8;
            i += 8;
        }
        if (i == s.n) break;
        uint8_t ch = s.p[i++];
        if (ch >= 0x20 && ch != '"' && ch != '\\') {
            *o++ = (char)ch;
            continue;
        }
        *o++ = '\\';
        switch (ch) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\b': *o++ = 'b'; break;
        case '\t': *o++ = 't'; break;
        case '\n': *o++ = 'n'; break;
        case '\f': *o++ = 'f'; break;
        case '\r': *o++ = 'r'; break;
        default:
            *o++ = 'u'; *o++ = '0'; *o++ = '0';
            *o++ = hexd[ch >> 4]; *o++ = hexd[ch & 15];
        }
    }
    *o++ = '"';
    b->len = (size_t)(o - b->data);
    return 0;
}

/* Decimal digits of v into out (at least 21 bytes); returns the length. */
static size_t itoa64(int64_t v, char *out) {
    char tmp[24];
    size_t n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    size_t len = 0;
    if (v < 0) out[len++] = '-';
    while (n) out[len++] = tmp[--n];
    return len;
}

/* `"key":value` once per attribute, kept in the arena; a value orjson would render in a
 * way this module does not (floats, bytes, arrays) leaves no fragment. */
static int render(Buf *arena, Attr *a) {
    a->frag_n = 0;
    if (a->alias != NO_ALIAS) return 0; /* a canonical field's spelling: never in attrs */
    if (a->type > V_INT) return 0;
    size_t start = arena->len;
    if (json_string(arena, a->key) || buf_put(arena, ":", 1)) return NOMEM;
    char digits[24];
    size_t n;
    int rc = 0;
    switch (a->type) {
    case V_NONE: rc = buf_put(arena, "null", 4); break;
    case V_STR: rc = json_string(arena, a->s); break;
    case V_BOOL: rc = buf_put(arena, a->i ? "true" : "false", a->i ? 4 : 5); break;
    default:
        n = itoa64(a->i, digits);
        rc = buf_put(arena, digits, n);
    }
    if (rc) return NOMEM;
    a->frag = start;
    a->frag_n = arena->len - start;
    return 0;
}

static void hex(const Str s, char *out) {
    static const char hexd[] = "0123456789abcdef";
    size_t i = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; i + 8 <= s.n; i += 8) { /* a loaded word's low byte is the first in memory */
        uint64_t w;
        memcpy(&w, s.p + i, 8);
        hex8(w, out + 2 * i);
    }
#endif
    for (; i < s.n; i++) {
        out[2 * i] = hexd[s.p[i] >> 4];
        out[2 * i + 1] = hexd[s.p[i] & 15];
    }
}

/* ------------------------------------------------------------------ output marks */

#define MAX_STRCOLS (N_STRCOLS_FIXED + MAX_STRING_FIELDS)
#define MAX_INTCOLS (MAX_INT_FIELDS + 1)

static int n_strcols(const Out *o) { return N_STRCOLS_FIXED + o->n_strings; }
static int n_intcols(const Out *o) { return o->n_ints + 1; }

typedef struct {
    size_t rows, values[MAX_STRCOLS], ivalues[MAX_INTCOLS];
    size_t lens[MAX_STRCOLS][2], ilens[MAX_INTCOLS], runs[MAX_STRCOLS], iruns[MAX_INTCOLS];
    int64_t nulls[MAX_STRCOLS], inulls[MAX_INTCOLS];
    int32_t last_end[MAX_STRCOLS], ilast_end[MAX_INTCOLS]; /* a run a later row may extend */
} Mark;

static StrCol *str_col(Out *o, int i) {
    return i < N_STRCOLS_FIXED ? &o->fixed[i] : &o->strings[i - N_STRCOLS_FIXED];
}

static IntCol *int_col(Out *o, int i) { return i < o->n_ints ? &o->ints[i] : &o->ts; }

/* ------------------------------------------------------------------ size hints */

/* How large each buffer grew for the last request, and that request's body length: the
 * next request reserves as much, scaled to its own body, instead of doubling its way
 * there (each doubling a copy, and fresh pages to fault in). Threads share the hints
 * without a lock; a hint read while another thread stores one is only a worse guess. */
#define MAX_OUT_BUFS (4 * MAX_STRCOLS + 3 * MAX_INTCOLS)
enum { H_RES_ATTRS, H_SPAN_ATTRS, H_EVENT_ATTRS, H_EVENTS, H_SPANS, H_ARENA, N_PARSED_HINTS };

typedef struct {
    size_t body;
    size_t out[MAX_OUT_BUFS];
    size_t parsed[N_PARSED_HINTS];
} Hints;

static int n_out_bufs(const Out *o) { return 4 * n_strcols(o) + 3 * n_intcols(o); }

static Buf *out_buf(Out *o, int k) {
    int strs = 4 * n_strcols(o);
    if (k < strs) {
        StrCol *c = str_col(o, k / 4);
        Buf *bufs[4] = {&c->data, &c->offsets, &c->valid, &c->runs};
        return bufs[k % 4];
    }
    IntCol *c = int_col(o, (k - strs) / 3);
    Buf *bufs[3] = {&c->data, &c->valid, &c->runs};
    return bufs[(k - strs) % 3];
}

static size_t hint_get(const size_t *slot) { return __atomic_load_n(slot, __ATOMIC_RELAXED); }

static void hint_set(size_t *slot, size_t value) {
    __atomic_store_n(slot, value, __ATOMIC_RELAXED);
}

/* A hint for a body of `body` bytes: the last size, scaled, with a little to spare. */
static size_t hint_for(const Hints *h, const size_t *slot, size_t body) {
    size_t last = hint_get(slot), last_body = hint_get(&h->body);
    if (!last || !last_body) return 0;
    return (size_t)((double)last * (double)body / (double)last_body * 1.125) + 64;
}

static int out_presize(Out *o, const Hints *h, size_t body) {
    for (int k = 0; k < n_out_bufs(o); k++) {
        size_t want = hint_for(h, &h->out[k], body);
        if (want && buf_reserve(out_buf(o, k), want)) return NOMEM;
    }
    return 0;
}

static void out_remember(Out *o, Hints *h) {
    for (int k = 0; k < n_out_bufs(o); k++) hint_set(&h->out[k], out_buf(o, k)->len);
}

static void truncate_bits(Buf *valid, size_t rows) {
    valid->len = (rows + 7) / 8;
    if (rows % 8) valid->data[rows / 8] &= (char)((1 << (rows % 8)) - 1);
}

static int32_t last_end(const Buf *runs) {
    return runs->len ? ((const int32_t *)runs->data)[runs->len / 4 - 1] : 0;
}

static void mark(Out *o, Mark *m) {
    m->rows = o->rows;
    for (int i = 0; i < n_strcols(o); i++) {
        StrCol *c = str_col(o, i);
        m->values[i] = c->rows;
        m->lens[i][0] = c->data.len;
        m->lens[i][1] = c->offsets.len;
        m->runs[i] = c->runs.len;
        m->last_end[i] = last_end(&c->runs);
        m->nulls[i] = c->nulls;
    }
    for (int i = 0; i < n_intcols(o); i++) {
        IntCol *c = int_col(o, i);
        m->ivalues[i] = c->rows;
        m->ilens[i] = c->data.len;
        m->iruns[i] = c->runs.len;
        m->ilast_end[i] = last_end(&c->runs);
        m->inulls[i] = c->nulls;
    }
}

static void runs_rollback(Buf *runs, size_t len, int32_t end) {
    runs->len = len;
    if (len) ((int32_t *)runs->data)[len / 4 - 1] = end;
}

/* Undo every row written since `m`: a span is stored whole or left to the reference. */
static void rollback(Out *o, const Mark *m) {
    o->rows = m->rows;
    for (int i = 0; i < n_strcols(o); i++) {
        StrCol *c = str_col(o, i);
        c->data.len = m->lens[i][0];
        c->offsets.len = m->lens[i][1];
        c->nulls = m->nulls[i];
        c->rows = m->values[i];
        truncate_bits(&c->valid, m->values[i]);
        runs_rollback(&c->runs, m->runs[i], m->last_end[i]);
    }
    for (int i = 0; i < n_intcols(o); i++) {
        IntCol *c = int_col(o, i);
        c->data.len = m->ilens[i];
        c->nulls = m->inulls[i];
        c->rows = m->ivalues[i];
        truncate_bits(&c->valid, m->ivalues[i]);
        runs_rollback(&c->runs, m->iruns[i], m->ilast_end[i]);
    }
}

typedef struct {
    const Config *c;
    Out *out;
    Buf *arena; /* JSON fragments of this request */
    Buf scratch, json, uid_in, uids;
    struct Record *span_rec, *rec;
    Attr worker; /* host:pid of the current resource */
} Ctx;

/* The uid, time and event a row starts with. */
static int push_head(Out *o, const char *uid, uint64_t time_ns, const char *event,
                     size_t event_len) {
    if (str_push(&o->fixed[C_UID], uid, 32, 1) ||
        int_push(&o->ts, (int64_t)(time_ns / 1000), 1) ||
        str_push(&o->fixed[C_EVENT], event, event_len, 1))
        return NOMEM;
    return 0;
}

/* Writes the row normalise() would build for one record; ODD when the record needs the
 * reference (a rejection, a type to coerce, a value to render differently). */
static int emit(Ctx *x, Record *r, long kind, uint64_t time_ns, const char *uid) {
    const Config *c = x->c;
    int best[MAX_FIELDS];
    long best_rank[MAX_FIELDS];
    char taken[MAX_ENTRIES];
    for (int f = 0; f < c->n_fields; f++) { best[f] = -1; best_rank[f] = 1L << 30; }
    int execution = -1, mapped_execution = 0;
    for (int i = 0; i < r->n; i++) {
        long alias = r->e[i]->alias;
        taken[i] = alias != NO_ALIAS;
        if (r->e[i]->flags & K_RETRIES) return ODD;
        if (r->e[i]->flags & K_EXECUTION) {
            if (taken[i]) mapped_execution = 1; else execution = i;
        }
        if (alias == NO_ALIAS) continue;
        int f = (int)(alias >> 8);
        long rank = alias & 255;
        if (rank < best_rank[f]) { best_rank[f] = rank; best[f] = i; }
    }
    /* ts and event are the ones set here; any other spelling of them is the reference's. */
    if (best[c->f_ts] < 0 || !(r->e[best[c->f_ts]]->flags & K_TS)) return ODD;
    if (best[c->f_event] < 0 || !(r->e[best[c->f_event]]->flags & K_EVENT)) return ODD;
    if (mapped_execution) return ODD;
    if (execution >= 0 && r->e[execution]->type != V_STR && r->e[execution]->type != V_NONE)
        return ODD;
    for (int i = 0; i < c->n_strings; i++) {
        int f = c->str_field[i];
        if (best[f] < 0) continue;
        int t = r->e[best[f]]->type;
        if (t != V_NONE && t != V_STR && t != V_INT) return ODD;
    }
    for (int i = 0; i < c->n_ints; i++) {
        int f = c->int_field[i];
        if (best[f] < 0) continue;
        const Attr *a = r->e[best[f]];
        if (a->type == V_NONE) continue;
        if (a->type != V_INT) return ODD;
        if (c->int_width[i] == 4 && (a->i < INT32_MIN || a->i > INT32_MAX)) return ODD;
        if (f == c->f_attempt && a->i < 1) return ODD;
    }
    if (!(kind & N_KIND)) return ODD;
    size_t event_len;
    const char *event = kind_name(c, kind, &event_len);
    if (!(kind & N_NO_JOB_ID)) {
        const Attr *job = best[c->f_job_id] >= 0 ? r->e[best[c->f_job_id]] : NULL;
        if (!job || job->type == V_NONE || (job->type == V_STR && job->s.n == 0)) return ODD;
    }

    Buf *json = &x->json;
    json->len = 0;
    int any = 0;
    for (int i = 0; i < r->n; i++) {
        if (taken[i]) continue;
        const Attr *a = r->e[i];
        if (!a->frag_n) return ODD;
        if (buf_put(json, any ? "," : "{", 1) ||
            buf_put(json, x->arena->data + a->frag, a->frag_n))
            return NOMEM;
        any = 1;
    }
    if (any && buf_put(json, "}", 1)) return NOMEM;

    Out *o = x->out;
    size_t row = o->rows;
    int in_runs = o->in_runs;
    if (push_head(o, uid, time_ns, event, event_len)) return NOMEM;
    for (int i = 0; i < c->n_strings; i++) {
        int f = c->str_field[i];
        StrCol *col = &o->strings[i];
        const Attr *a = best[f] >= 0 ? r->e[best[f]] : NULL;
        int rc;
        if (!a || a->type == V_NONE) {
            rc = str_put(col, NULL, 0, 0, row, in_runs);
        } else if (a->type == V_STR) {
            rc = str_put_from(col, a, o->span, (const char *)a->s.p, a->s.n, 1, row, in_runs);
        } else {
            char digits[24];
            rc = str_put_from(col, a, o->span, digits, itoa64(a->i, digits), 1, row, in_runs);
        }
        if (rc) return NOMEM;
    }
    for (int i = 0; i < c->n_ints; i++) {
        int f = c->int_field[i];
        const Attr *a = best[f] >= 0 ? r->e[best[f]] : NULL;
        int valid = a && a->type == V_INT;
        if (int_put(&o->ints[i], valid ? a->i : 0, valid, row, in_runs))
            return NOMEM;
    }
    const Attr *e = execution >= 0 ? r->e[execution] : NULL;
    int valid = e && e->type == V_STR;
    if (valid ? str_put_from(&o->fixed[C_EXECUTION], e, o->span, (const char *)e->s.p,
                             e->s.n, 1, row, in_runs)
              : str_put(&o->fixed[C_EXECUTION], NULL, 0, 0, row, in_runs))
        return NOMEM;
    if (str_put(&o->fixed[C_ATTRS], json->data, json->len, any, row, in_runs)) return NOMEM;
    o->rows++;
    return 0;
}

/* The row emit() wrote at `row`, again with another event, time and uid: what a span
 * event without attributes gives, since its record differs from the previous such
 * event's only in the event's name. ODD where emit() would have refused it. */
static int emit_again(Ctx *x, size_t row, long kind, uint64_t time_ns, const char *uid) {
    const Config *c = x->c;
    Out *o = x->out;
    if (!(kind & N_KIND)) return ODD;
    size_t event_len;
    const char *event = kind_name(c, kind, &event_len);
    int in_runs = o->in_runs;
    if (!(kind & N_NO_JOB_ID)) {
        const StrCol *job = &o->strings[c->col[c->f_job_id]];
        size_t v = value_of(&job->runs, job->rows, row, in_runs);
        const int32_t *off = (const int32_t *)job->offsets.data;
        if (!bit_at(&job->valid, v) || off[v + 1] == off[v]) return ODD;
    }
    size_t now = o->rows;
    if (push_head(o, uid, time_ns, event, event_len)) return NOMEM;
    for (int i = 0; i < o->n_strings; i++)
        if (str_again(&o->strings[i], row, now, in_runs)) return NOMEM;
    for (int i = 0; i < o->n_ints; i++)
        if (int_again(&o->ints[i], row, now, in_runs)) return NOMEM;
    if (str_again(&o->fixed[C_EXECUTION], row, now, in_runs) ||
        str_again(&o->fixed[C_ATTRS], row, now, in_runs))
        return NOMEM;
    o->rows++;
    return 0;
}

typedef struct {
    Str *ids;
    size_t n, cap;
} IdSet;

static int ids_has(const IdSet *s, Str id) {
    for (size_t i = 0; i < s->n; i++)
        if (s->ids[i].n == id.n && memcmp(s->ids[i].p, id.p, id.n) == 0) return 1;
    return 0;
}

/* otlp.step_parents: spans whose lifecycle steps arrive as child spans are executions. */
static int step_parents(const Config *c, const Parsed *q, IdSet *out) {
    for (size_t k = 0; k < q->n_spans; k++) {
        const Span *sp = &q->spans[k];
        if (!sp->parent.n) continue;
        int is_step = (kind_of(c, sp->name) & N_STEP) != 0;
        for (size_t i = sp->a0; !is_step && i < sp->a1; i++) {
            const Attr *a = &q->span_attrs[i];
            if ((a->flags & (K_JOB_EVENT | K_EVENT)) && a->type == V_STR &&
                (kind_of(c, a->s) & N_STEP))
                is_step = 1;
        }
        if (!is_step) continue;
        Str *slot;
        VEC_PUSH(out->ids, out->n, out->cap, Str, slot);
        if (!slot) return NOMEM;
        *slot = sp->parent;
    }
    return 0;
}

/* A `deliver` that a publish span names is its enqueue. */
static long published(const Config *c, long found, int publish) {
    return publish && (found & 255) == (c->deliver & 255) ? c->enqueue : found;
}

/* otlp.span_event: the step a span records itself; 0 none, 1 found, ODD for the reference.
 * `publish`: a PRODUCER span that names a job, always an enqueue. */
static int span_event(const Config *c, const Record *r, Str name, int publish, long *kind) {
    static const long keys[2] = {K_JOB_EVENT, K_EVENT};
    for (int k = 0; k < 2; k++) {
        const Attr *a = record_get(r, keys[k]);
        if (a && a->type == V_STR) {
            long found = kind_of(c, a->s);
            if (found & N_KIND) { *kind = published(c, found, publish); return 1; }
        }
    }
    long found = kind_of(c, name);
    if (found & N_KIND) { *kind = published(c, found, publish); return 1; }
    if (publish) { *kind = c->enqueue; return 1; }
    static const long ops[2] = {K_OP0, K_OP1};
    for (int k = 0; k < 2; k++) {
        const Attr *a = record_get(r, ops[k]);
        if (!a || a->type == V_NONE) continue;
        if (a->type != V_STR) return ODD;
        /* A poll's `receive` span names no message: no delivery (otlp.span_event). */
        if (a->s.n == 7 && memcmp(a->s.p, "receive", 7) == 0 &&
            record_find(r, K_JOB_ID_KEY) < 0)
            return 0;
        long op = table_get(&c->ops, a->s.p, a->s.n, hash_bytes(a->s.p, a->s.n), -1);
        if (op < 0) return 0;
        size_t len;
        const char *text = kind_name(c, op, &len);
        *kind = kind_of(c, (Str){(const uint8_t *)text, len});
        return 1;
    }
    return 0;
}

/* A template attribute (key classified once) with this value, rendered into the arena. */
static int with_value(Ctx *x, const Attr *template, int type, Str s, int64_t i, Attr *out) {
    *out = *template;
    out->type = type;
    out->s = s;
    out->i = i;
    return render(x->arena, out);
}

/* What the uids of a span's rows start with: its trace and span ids in hex; returns the
 * length, which span_uid() keeps. content_uid in normalise.py. */
static int uid_prefix(Ctx *x, Str trace_hex, Str span_hex, size_t *length) {
    Buf *in = &x->uid_in;
    in->len = 0;
    if (buf_put(in, trace_hex.p, trace_hex.n) || buf_put(in, "\x1f", 1) ||
        buf_put(in, span_hex.p, span_hex.n) || buf_put(in, "\x1f", 1))
        return NOMEM;
    *length = in->len;
    return 0;
}

/* Up to four one-block messages (the uid prefix, then each lane's tail) hashed at once. */
typedef struct {
    char tail[4][24];
    size_t tail_n[4];
    char *out[4];
    int n;
} UidLanes;

static void uid_lanes_hash(UidLanes *l, const char *prefix, size_t prefix_n) {
    if (!l->n) return;
    if (l->n == 1) { /* a span without steps: one uid, hashed alone */
        uint8_t block[128];
        memcpy(block, prefix, prefix_n);
        memcpy(block + prefix_n, l->tail[0], l->tail_n[0]);
        blake2b16_hex(block, prefix_n + l->tail_n[0], l->out[0]);
        l->n = 0;
        return;
    }
    uint64_t blocks[4][16];
    size_t lengths[4];
    char digests[4][32];
    memset(blocks, 0, sizeof blocks);
    for (int lane = 0; lane < 4; lane++) {
        int from = lane < l->n ? lane : 0; /* spare lanes hash a copy of the first */
        memcpy(blocks[lane], prefix, prefix_n);
        memcpy((uint8_t *)blocks[lane] + prefix_n, l->tail[from], l->tail_n[from]);
        lengths[lane] = prefix_n + l->tail_n[from];
    }
    blake2b16_hex_x4((const uint64_t (*)[16])blocks, lengths, digests);
    for (int lane = 0; lane < l->n; lane++) memcpy(l->out[lane], digests[lane], 32);
    l->n = 0;
}

/* The uids of the span's rows, into x->uids: slot index + 1 for the row of event `index`
 * (-1: the span's own row), for the events that are steps. After uid_prefix(). */
static int span_uids(Ctx *x, size_t prefix, const Parsed *q, const Span *sp) {
    size_t slots = sp->e1 - sp->e0 + 1;
    Buf *in = &x->uid_in, *uids = &x->uids;
    uids->len = 0;
    if (buf_reserve(uids, 32 * slots)) return NOMEM;
    uids->len = 32 * slots;
    UidLanes lanes = {.n = 0};
    for (long index = -1; index < (long)(slots - 1); index++) {
        if (index >= 0 && !(q->events[sp->e0 + (size_t)index].kind & N_KIND)) continue;
        char *uid = uids->data + 32 * (size_t)(index + 1);
        char *tail = lanes.tail[lanes.n];
        size_t n = itoa64(index, tail);
        tail[n++] = '\x1f';
        if (prefix + n > 128) { /* more than a block: one at a time */
            in->len = prefix;
            if (buf_put(in, tail, n)) return NOMEM;
            blake2b16_hex((const uint8_t *)in->data, in->len, uid);
            continue;
        }
        lanes.tail_n[lanes.n] = n;
        lanes.out[lanes.n++] = uid;
        if (lanes.n == 4) uid_lanes_hash(&lanes, in->data, prefix);
    }
    uid_lanes_hash(&lanes, in->data, prefix);
    return 0;
}

/* otlp.producer_attrs: a producer event takes no worker_id from the resource, so the
 * entries that spell worker_id and still point at the resource's attributes (or at the
 * host:pid built from them) go. */
static void without_resource_worker(const Ctx *x, const Parsed *q, Record *rec) {
    const Attr *first = q->res_attrs; /* NULL while no resource had attributes */
    size_t n = q->n_res_attrs;
    for (int i = rec->n - 1; i >= 0; i--) {
        const Attr *a = rec->e[i];
        if (a->alias == NO_ALIAS || (a->alias >> 8) != x->c->f_worker_id) continue;
        if (a == &x->worker || (n && a >= first && a < first + n)) record_remove(rec, i);
    }
}

/* Every row of one span, or ODD to leave the whole span to the reference. */
static int decode_span(Ctx *x, const Parsed *q, const Span *sp, const Record *base,
                       const IdSet *executions, int *ignored) {
    const Config *c = x->c;
    Record *span_rec = x->span_rec, *rec = x->rec;
    record_copy(span_rec, base);
    for (size_t i = sp->a0; i < sp->a1; i++) {
        int rc = record_set(span_rec, &q->span_attrs[i]);
        if (rc) return rc;
    }
    for (int i = 0; i < span_rec->n; i++)
        if (span_rec->e[i]->type > V_INT) return ODD;
    /* Celery-instrumented spans are few beside the executions and steps of ordinary
     * ones, and what they mean (an attempt from retries and a repr'd `redelivered`, a
     * settle from celery.state, an enqueue however the span is spelled) is written once,
     * in Python (otlp.span_event, celery_spans): the reference decides. PRODUCER spans
     * stay here: every messaging instrumentation writes one per publish. */
    static const char celery_publish[] = "apply_async/";
    if ((span_rec->flags & K_CELERY) ||
        (sp->name.n >= sizeof celery_publish - 1 &&
         memcmp(sp->name.p, celery_publish, sizeof celery_publish - 1) == 0))
        return ODD;
    int publish = sp->kind == SPAN_KIND_PRODUCER && record_find(span_rec, K_JOB_ID_KEY) >= 0;
    long own = 0;
    int found = span_event(c, span_rec, sp->name, publish, &own);
    if (found < 0) return found;
    int has_steps = 0, has_deliver = 0;
    for (size_t e = sp->e0; e < sp->e1; e++) {
        long kind = q->events[e].kind;
        if (kind & N_KIND) has_steps = 1;
        if ((kind & N_KIND) && (kind & 255) == (c->deliver & 255)) has_deliver = 1;
    }
    if (!found) {
        int looks = record_find(span_rec, K_JOB_ID_KEY) >= 0 &&
                    record_find(span_rec, K_ATTEMPT_KEY) >= 0;
        if (!(has_steps || ids_has(executions, sp->span) || looks)) {
            (*ignored)++;
            return 0;
        }
        own = c->deliver;
    }
    int own_is_deliver = (own & 255) == (c->deliver & 255);
    /* An execution span with its own `deliver` span event (rare): the reference moves the
     * span's row onto that event. */
    if (own_is_deliver && has_deliver) return ODD;

    if (buf_reserve(&x->scratch, 2 * (sp->trace.n + sp->span.n + sp->parent.n) + 8))
        return NOMEM;
    char *trace_hex = x->scratch.data;
    char *span_hex = trace_hex + 2 * sp->trace.n;
    char *parent_hex = span_hex + 2 * sp->span.n;
    hex(sp->trace, trace_hex);
    hex(sp->span, span_hex);
    hex(sp->parent, parent_hex);
    Str trace_s = {(const uint8_t *)trace_hex, 2 * sp->trace.n};
    Str span_s = {(const uint8_t *)span_hex, 2 * sp->span.n};
    Str execution = {NULL, 0};
    if ((own & N_STEP) && sp->parent.n)
        execution = (Str){(const uint8_t *)parent_hex, 2 * sp->parent.n};
    else if (has_steps || own_is_deliver)
        execution = span_s;

    /* What every record of the span adds the same way, rendered once. */
    Attr trace_a, span_a, execution_a, name_a, end_a, ts_a;
    int rc = 0;
    if (with_value(x, &c->t_trace, V_STR, trace_s, 0, &trace_a) ||
        with_value(x, &c->t_span, V_STR, span_s, 0, &span_a) ||
        with_value(x, &c->t_ts, V_INT, (Str){0}, 0, &ts_a) ||
        with_value(x, &c->t_name, V_STR, sp->name, 0, &name_a))
        return NOMEM;
    if (execution.p && with_value(x, &c->t_execution, V_STR, execution, 0, &execution_a))
        return NOMEM;
    if (own_is_deliver) {
        if (sp->end / 1000 > (uint64_t)INT64_MAX) return ODD;
        if (with_value(x, &c->t_end, V_INT, (Str){0}, (int64_t)(sp->end / 1000), &end_a))
            return NOMEM;
    }

    size_t prefix;
    if (uid_prefix(x, trace_s, span_s, &prefix)) return NOMEM;
    Mark before;
    mark(x->out, &before);
    x->out->span++; /* what a column took from this span's attributes is known by source */
    if (span_uids(x, prefix, q, sp)) return NOMEM;
    long bare_row = -1; /* the row of this span's last event without attributes */
    for (long index = -1; !rc && index < (long)(sp->e1 - sp->e0); index++) {
        const Event *ev = index >= 0 ? &q->events[sp->e0 + (size_t)index] : NULL;
        long kind = own;
        uint64_t time_ns = sp->start;
        if (ev) {
            kind = ev->kind;
            if (!(kind & N_KIND)) continue;
            time_ns = ev->time;
        }
        const char *uid = x->uids.data + 32 * (size_t)(index + 1);
        int bare = ev && ev->a0 == ev->a1;
        if (bare && bare_row >= 0) {
            rc = emit_again(x, (size_t)bare_row, kind, time_ns, uid);
            continue;
        }
        record_copy(rec, span_rec);
        if (!ev && (own & N_PRODUCER)) without_resource_worker(x, q, rec);
        if (!ev) {
            rc = record_set(rec, &name_a);
            if (!rc && own_is_deliver) rc = record_set(rec, &end_a);
        } else {
            for (size_t i = ev->a0; !rc && i < ev->a1; i++) {
                const Attr *ea = &q->event_attrs[i];
                rc = ea->type > V_INT ? ODD : record_set(rec, ea);
            }
        }
        size_t elen;
        const char *ename = kind_name(c, kind, &elen);
        Attr event_a;
        if (!rc) {
            rc = with_value(x, &c->t_event, V_STR, (Str){(const uint8_t *)ename, elen}, 0,
                            &event_a);
            if (!rc) rc = record_set(rec, &event_a);
        }
        if (!rc) {
            int j = record_find(rec, K_JOB_EVENT);
            if (j >= 0) record_remove(rec, j);
            rc = record_set(rec, &ts_a);
        }
        if (!rc && record_find(rec, K_TRACE) < 0) rc = record_set(rec, &trace_a);
        if (!rc && record_find(rec, K_SPAN) < 0) rc = record_set(rec, &span_a);
        if (!rc && execution.p && record_find(rec, K_EXECUTION) < 0)
            rc = record_set(rec, &execution_a);
        if (!rc) rc = emit(x, rec, kind, time_ns, uid);
        if (!rc && bare) bare_row = (long)x->out->rows - 1;
    }
    if (rc) rollback(x->out, &before);
    return rc;
}

/* The resource's attributes plus host:pid, as otlp.worker_identity adds it. */
static int resource_base(Ctx *x, const Parsed *q, const Resource *res, Record *base,
                         Buf *identity) {
    const Config *c = x->c;
    record_clear(base);
    for (size_t i = res->a0; i < res->a1; i++) {
        const Attr *a = &q->res_attrs[i];
        if (a->type > V_INT) return ODD;
        int rc = record_set(base, a);
        if (rc) return rc;
    }
    const Attr *host = record_get(base, K_HOST), *pid = record_get(base, K_PID);
    if (!host || !pid || host->type == V_NONE || pid->type == V_NONE) return 0;
    if (host->type != V_STR || pid->type != V_INT) return ODD;
    char digits[24];
    identity->len = 0;
    if (buf_put(identity, host->s.p, host->s.n) || buf_put(identity, ":", 1) ||
        buf_put(identity, digits, itoa64(pid->i, digits)))
        return NOMEM;
    if (with_value(x, &c->t_worker, V_STR,
                   (Str){(const uint8_t *)identity->data, identity->len}, 0, &x->worker))
        return NOMEM;
    return record_set(base, &x->worker);
}

/* ------------------------------------------------------------------ one request */

typedef struct {
    int *fallback; /* r, s, p triples */
    size_t n_fallback, c_fallback;
    int ignored;
} Result;

static int push_fallback(Result *res, const Span *sp) {
    if (res->n_fallback + 3 > res->c_fallback) {
        size_t cap = res->c_fallback ? res->c_fallback * 2 : 96;
        int *grown = realloc(res->fallback, cap * sizeof(int));
        if (!grown) return NOMEM;
        res->fallback = grown;
        res->c_fallback = cap;
    }
    res->fallback[res->n_fallback++] = sp->r;
    res->fallback[res->n_fallback++] = sp->s;
    res->fallback[res->n_fallback++] = sp->p;
    return 0;
}

/* Runs without the GIL. 0, or -1 (malformed), ODD (the reference decides), NOMEM. */
static int vec_reserve(void **vec, size_t *cap, size_t want, size_t size) {
    if (want <= *cap) return 0;
    void *grown = realloc(*vec, want * size);
    if (!grown) return -1;
    *vec = grown;
    *cap = want;
    return 0;
}

/* The parsed request's arrays, sized up front from the hints. */
static int parsed_presize(Parsed *q, const Hints *h, size_t body) {
    const size_t *p = h->parsed;
    return vec_reserve((void **)&q->res_attrs, &q->c_res_attrs,
                       hint_for(h, &p[H_RES_ATTRS], body), sizeof(Attr)) ||
           vec_reserve((void **)&q->span_attrs, &q->c_span_attrs,
                       hint_for(h, &p[H_SPAN_ATTRS], body), sizeof(Attr)) ||
           vec_reserve((void **)&q->event_attrs, &q->c_event_attrs,
                       hint_for(h, &p[H_EVENT_ATTRS], body), sizeof(Attr)) ||
           vec_reserve((void **)&q->events, &q->c_events, hint_for(h, &p[H_EVENTS], body),
                       sizeof(Event)) ||
           vec_reserve((void **)&q->spans, &q->c_spans, hint_for(h, &p[H_SPANS], body),
                       sizeof(Span)) ||
           buf_reserve(&q->arena, hint_for(h, &p[H_ARENA], body));
}

static void parsed_remember(const Parsed *q, Hints *h) {
    hint_set(&h->parsed[H_RES_ATTRS], q->n_res_attrs);
    hint_set(&h->parsed[H_SPAN_ATTRS], q->n_span_attrs);
    hint_set(&h->parsed[H_EVENT_ATTRS], q->n_event_attrs);
    hint_set(&h->parsed[H_EVENTS], q->n_events);
    hint_set(&h->parsed[H_SPANS], q->n_spans);
    hint_set(&h->parsed[H_ARENA], q->arena.len);
}

/* Whether steps as span events make half the rows or more: a request worth run-end
 * encoding, since each such row repeats most of its span's row. */
static int mostly_steps(const Parsed *q) {
    size_t steps = 0;
    for (size_t i = 0; i < q->n_events; i++)
        if (q->events[i].kind & N_KIND) steps++;
    return steps && steps >= q->n_spans;
}

static int decode_request(const Config *c, Str body, Out *out, Result *res, Hints *h) {
    Parsed q;
    memset(&q, 0, sizeof q);
    if (parsed_presize(&q, h, body.n) || out_presize(out, h, body.n)) {
        parsed_free(&q);
        return NOMEM;
    }
    Ctx x;
    memset(&x, 0, sizeof x);
    x.c = c;
    x.out = out;
    x.span_rec = malloc(sizeof(Record));
    x.rec = malloc(sizeof(Record));
    Record *base = malloc(sizeof(Record));
    IdSet executions = {0};
    Buf identity = {0};
    x.arena = &q.arena;
    int rc = (!x.span_rec || !x.rec || !base) ? NOMEM : parse_request(c, &q, body);
    if (!rc) parsed_remember(&q, h);
    if (!rc) out->in_runs = mostly_steps(&q);
    if (!rc) rc = step_parents(c, &q, &executions);
    for (size_t r = 0; !rc && r < q.n_resources; r++) {
        const Resource *resource = &q.resources[r];
        int base_rc = resource_base(&x, &q, resource, base, &identity);
        if (base_rc == NOMEM) { rc = NOMEM; break; }
        for (size_t k = resource->s0; !rc && k < resource->s1; k++) {
            const Span *sp = &q.spans[k];
            int span_rc = base_rc ? base_rc : decode_span(&x, &q, sp, base, &executions,
                                                          &res->ignored);
            if (span_rc == ODD) rc = push_fallback(res, sp);
            else rc = span_rc;
        }
    }
    free(executions.ids);
    buf_free(&identity);
    buf_free(&x.scratch);
    buf_free(&x.json);
    buf_free(&x.uid_in);
    buf_free(&x.uids);
    free(x.span_rec);
    free(x.rec);
    free(base);
    parsed_free(&q);
    return rc;
}

/* ------------------------------------------------------------------ Python type */

typedef struct {
    PyObject_HEAD
    Config config;
    Hints hints;
    int ready;
} DecoderObject;

/* Adds a dict of str -> int to `table`, each value stored as (value + add) << shift. */
static int load_table(PyObject *dict, Table *table, long add, int shift) {
    if (!PyDict_Check(dict)) {
        PyErr_SetString(PyExc_TypeError, "expected a dict of str -> int");
        return -1;
    }
    if (!table->slots && table_init(table, 1024)) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        Py_ssize_t n;
        const char *text = PyUnicode_AsUTF8AndSize(key, &n);
        long v = PyLong_AsLong(value);
        if (!text || (v == -1 && PyErr_Occurred())) return -1;
        if (v < 0 || v >= (1L << ALIAS_SHIFT)) {
            PyErr_SetString(PyExc_ValueError, "table values must be below 2**20");
            return -1;
        }
        if (table_or(table, text, (size_t)n, (v + add) << shift)) {
            PyErr_NoMemory();
            return -1;
        }
    }
    return 0;
}

/* The field layout from `fields` (names, in the order the aliases number them) and
 * `types` (each one's contract type). ts and event are the row's head; job_id, worker_id
 * and delivery_attempt have rules of their own (store/contract.py). */
static int load_layout(Config *c, PyObject *fields, PyObject *types) {
    Py_ssize_t n = PyTuple_GET_SIZE(fields);
    if (n != PyTuple_GET_SIZE(types) || n > MAX_FIELDS) {
        PyErr_SetString(PyExc_ValueError, "fields and types must pair up, at most 64");
        return -1;
    }
    c->n_fields = (int)n;
    c->n_strings = c->n_ints = 0;
    c->f_ts = c->f_event = c->f_job_id = c->f_worker_id = c->f_attempt = -1;
    for (Py_ssize_t f = 0; f < n; f++) {
        const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(fields, f));
        const char *type = PyUnicode_AsUTF8(PyTuple_GET_ITEM(types, f));
        if (!name || !type) return -1;
        int t = !strcmp(type, "timestamp") ? T_TS : !strcmp(type, "string") ? T_STR
              : !strcmp(type, "int32") ? T_INT32 : !strcmp(type, "int64") ? T_INT64 : -1;
        if (!strcmp(name, "ts")) c->f_ts = (int)f;
        else if (!strcmp(name, "event")) c->f_event = (int)f, t = T_EVENT;
        else if (!strcmp(name, "job_id")) c->f_job_id = (int)f;
        else if (!strcmp(name, "worker_id")) c->f_worker_id = (int)f;
        else if (!strcmp(name, "delivery_attempt")) c->f_attempt = (int)f;
        if (t < 0 || (t == T_TS) != ((int)f == c->f_ts)) {
            PyErr_Format(PyExc_ValueError, "field %s: type %s not decoded here", name, type);
            return -1;
        }
        c->type[f] = t;
        c->col[f] = -1;
        int is_int = t == T_INT32 || t == T_INT64;
        if ((t == T_STR && c->n_strings == MAX_STRING_FIELDS) ||
            (is_int && c->n_ints == MAX_INT_FIELDS)) {
            PyErr_SetString(PyExc_ValueError, "more fields of one type than this build holds");
            return -1;
        }
        if (t == T_STR) {
            c->str_field[c->n_strings] = (int)f;
            c->col[f] = c->n_strings++;
        } else if (is_int) {
            c->int_field[c->n_ints] = (int)f;
            c->int_width[c->n_ints] = t == T_INT32 ? 4 : 8;
            c->col[f] = c->n_ints++;
        }
    }
    if (c->f_ts < 0 || c->f_event < 0 || c->f_job_id < 0 || c->f_worker_id < 0 ||
        c->type[c->f_job_id] != T_STR || c->type[c->f_worker_id] != T_STR ||
        (c->f_attempt >= 0 && c->type[c->f_attempt] != T_INT32)) {
        PyErr_SetString(PyExc_ValueError,
                        "the layout needs ts, event, job_id and worker_id (strings), and "
                        "delivery_attempt is an int32");
        return -1;
    }
    return 0;
}

/* Every alias must name a field of the layout: emit() indexes by it. */
static int check_aliases(const Config *c, PyObject *aliases) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(aliases, &pos, &key, &value)) {
        long v = PyLong_AsLong(value);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (v < 0 || (v >> 8) >= c->n_fields) {
            PyErr_SetString(PyExc_ValueError, "an alias names no field of the layout");
            return -1;
        }
    }
    return 0;
}

static void template_of(const Config *c, Attr *a, const char *key) {
    memset(a, 0, sizeof *a);
    a->key.p = (const uint8_t *)key;
    a->key.n = strlen(key);
    classify(c, a);
}

static void decoder_dealloc(DecoderObject *self) {
    Config *c = &self->config;
    table_free(&c->roles);
    table_free(&c->kinds);
    table_free(&c->ops);
    for (int i = 0; i < c->n_kinds; i++) free(c->kind_text[i]);
    free(c->worker_key);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int decoder_init(DecoderObject *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"aliases", "keys", "kinds", "operations", "kind_names",
                            "worker_key", "fields", "types", NULL};
    PyObject *aliases, *keys, *kinds, *ops, *kind_names, *fields, *types;
    const char *worker_key;
    Py_ssize_t worker_len;
    if (self->ready) {
        PyErr_SetString(PyExc_RuntimeError, "already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OOOO!s#O!O!", names, &PyDict_Type,
                                     &aliases, &keys, &kinds, &ops, &PyTuple_Type,
                                     &kind_names, &worker_key, &worker_len, &PyTuple_Type,
                                     &fields, &PyTuple_Type, &types))
        return -1;
    Config *c = &self->config;
    if (load_layout(c, fields, types) || check_aliases(c, aliases)) return -1;
    if (PyTuple_GET_SIZE(kind_names) > 255) {
        PyErr_SetString(PyExc_ValueError, "too many event kinds");
        return -1;
    }
    if (load_table(aliases, &c->roles, 1, ALIAS_SHIFT) || load_table(keys, &c->roles, 0, 0) ||
        load_table(kinds, &c->kinds, 0, 0) || load_table(ops, &c->ops, 0, 0))
        return -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kind_names); i++) {
        Py_ssize_t n;
        const char *text = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(kind_names, i), &n);
        if (!text) return -1;
        c->kind_text[i] = malloc((size_t)n + 1);
        if (!c->kind_text[i]) { PyErr_NoMemory(); return -1; }
        memcpy(c->kind_text[i], text, (size_t)n + 1);
        c->kind_len[i] = (size_t)n;
        c->n_kinds = (int)i + 1;
    }
    c->worker_key = malloc((size_t)worker_len + 1);
    if (!c->worker_key) { PyErr_NoMemory(); return -1; }
    memcpy(c->worker_key, worker_key, (size_t)worker_len + 1);
    c->worker_key_len = (size_t)worker_len;
    c->deliver = table_get(&c->kinds, (const uint8_t *)"deliver", 7,
                           hash_bytes((const uint8_t *)"deliver", 7), 0);
    c->enqueue = table_get(&c->kinds, (const uint8_t *)"enqueue", 7,
                           hash_bytes((const uint8_t *)"enqueue", 7), 0);
    if (!(c->deliver & N_KIND) || !(c->enqueue & N_KIND)) {
        PyErr_SetString(PyExc_ValueError, "`deliver` or `enqueue` is not among the event kinds");
        return -1;
    }
    template_of(c, &c->t_trace, "trace_id");
    template_of(c, &c->t_span, "span_id");
    template_of(c, &c->t_execution, "execution_id");
    template_of(c, &c->t_name, "span.name");
    template_of(c, &c->t_end, "span.end_us");
    template_of(c, &c->t_ts, "ts");
    template_of(c, &c->t_event, "event");
    template_of(c, &c->t_worker, c->worker_key);
    self->ready = 1;
    return 0;
}

/* ------------------------------------------------------------------ Arrow C data interface */

/* The columns go to pyarrow as one struct array through the Arrow C data interface
 * (https://arrow.apache.org/docs/format/CDataInterface.html): one import, where wrapping
 * each of some sixty buffers and building twenty arrays in Python cost as much again as
 * a request's parse. The memory moves with them; their release callbacks free it. */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
#endif

/* uid, ts, event, the string fields, the integer fields, execution_id, attrs, source */
#define MAX_COLUMNS (3 + MAX_STRING_FIELDS + MAX_INT_FIELDS + 3)

typedef struct Column {
    struct ArrowArray array;
    const void *buffers[3];
    char *owned[3];
    /* Run-end encoded: the run ends and the values, the array's two children. */
    struct Column *parts;
    struct ArrowArray *children[2];
} Column;

typedef struct {
    const void *buffers[1];
    struct ArrowArray *children[MAX_COLUMNS];
    Column column[MAX_COLUMNS];
} Columns;

static void release_column(struct ArrowArray *array) {
    Column *c = array->private_data;
    for (int i = 0; i < 3; i++) free(c->owned[i]);
    if (c->parts)
        for (int i = 0; i < 2; i++)
            if (c->parts[i].array.release) c->parts[i].array.release(&c->parts[i].array);
    free(c->parts);
    array->release = NULL;
}

static void release_columns(struct ArrowArray *array) {
    Columns *all = array->private_data;
    for (int i = 0; i < MAX_COLUMNS; i++) /* the unused ones were never set */
        if (all->column[i].array.release) all->column[i].array.release(&all->column[i].array);
    free(all);
    array->release = NULL;
}

/* The buffer's memory, at least one byte of it, moved out of the Buf, cut to its length:
 * a batch waits in the collector's queue with it, and the room a buffer grew or was
 * presized into was a third of what a queued batch held (1.6 MB for 0.9 MB of columns a
 * 1000-span request with steps). Shrinking in place costs glibc no copy. */
static char *take_buf(Buf *b) {
    if (!b->data && buf_reserve(b, 1)) return NULL;
    char *data = b->data;
    if (b->cap - b->len > 4096) {
        char *fit = realloc(data, b->len ? b->len : 1);
        if (fit) data = fit;
    }
    b->data = NULL;
    b->len = b->cap = 0;
    return data;
}

/* `valid` may be NULL: no validity buffer, for a column without nulls. */
static int column_of(Column *c, size_t rows, int64_t nulls, Buf *valid, Buf *second,
                     Buf *third) {
    Buf *bufs[3] = {valid, second, third};
    int n = third ? 3 : 2;
    memset(c, 0, sizeof *c);
    for (int i = 0; i < n; i++) {
        if (!bufs[i]) continue;
        c->owned[i] = take_buf(bufs[i]);
        if (!c->owned[i]) {
            for (int j = 0; j < i; j++) free(c->owned[j]);
            return NOMEM;
        }
        c->buffers[i] = c->owned[i];
    }
    c->array = (struct ArrowArray){
        .length = (int64_t)rows, .null_count = nulls, .n_buffers = n,
        .buffers = c->buffers, .release = release_column, .private_data = c,
    };
    return 0;
}

/* A run-end encoded column of `rows` rows, its values' runs ending at `runs`: the
 * Column its values are to be exported into (c->parts[1]), or NULL. Released whole from
 * the start, so a failure from here on frees what was made. */
static Column *runs_of(Column *c, size_t rows, Buf *runs, size_t values) {
    memset(c, 0, sizeof *c);
    c->parts = calloc(2, sizeof(Column));
    if (!c->parts) return NULL;
    c->children[0] = &c->parts[0].array;
    c->children[1] = &c->parts[1].array;
    c->array = (struct ArrowArray){
        .length = (int64_t)rows, .n_buffers = 0, .n_children = 2, .buffers = c->buffers,
        .children = c->children, .release = release_column, .private_data = c,
    };
    return column_of(&c->parts[0], values, 0, NULL, runs, NULL) ? NULL : &c->parts[1];
}

static int str_export(Column *c, StrCol *col, size_t rows, int in_runs) {
    if (in_runs) {
        c = runs_of(c, rows, &col->runs, col->rows);
        if (!c) return NOMEM;
        rows = col->rows; /* the values, one a run */
    }
    return column_of(c, rows, col->nulls, &col->valid, &col->offsets, &col->data);
}

static int int_export(Column *c, IntCol *col, size_t rows, int in_runs) {
    if (in_runs) {
        c = runs_of(c, rows, &col->runs, col->rows);
        if (!c) return NOMEM;
        rows = col->rows; /* the values, one a run */
    }
    return column_of(c, rows, col->nulls, &col->valid, &col->data, NULL);
}

/* `source` on every row: the request's one value, repeated, or with runs one run of it. */
static int source_column(StrCol *col, const char *source, size_t n, size_t rows,
                         int in_runs) {
    if (in_runs)
        return rows && (str_push(col, source, n, 1) || run_open(&col->runs, rows - 1)) ? NOMEM
                                                                                      : 0;
    for (size_t r = 0; r < rows; r++)
        if (str_push(col, source, n, 1)) return NOMEM;
    return 0;
}

static void capsule_release(PyObject *capsule) {
    struct ArrowArray *array = PyCapsule_GetPointer(capsule, "arrow_array");
    if (array && array->release) array->release(array);
    free(array);
}

/* The columns of `out`, moved into an "arrow_array" capsule (a struct array). */
static PyObject *export_columns(Out *out, StrCol *source) {
    size_t rows = out->rows;
    Columns *all = calloc(1, sizeof *all);
    struct ArrowArray *array = calloc(1, sizeof *array);
    int rc = !all || !array ? NOMEM : 0;
    int k = 0;
    int runs = out->in_runs;
    if (!rc) rc = str_export(&all->column[k++], &out->fixed[C_UID], rows, 0);
    if (!rc) rc = int_export(&all->column[k++], &out->ts, rows, 0);
    if (!rc) rc = str_export(&all->column[k++], &out->fixed[C_EVENT], rows, 0);
    for (int i = 0; !rc && i < out->n_strings; i++)
        rc = str_export(&all->column[k++], &out->strings[i], rows, runs);
    for (int i = 0; !rc && i < out->n_ints; i++)
        rc = int_export(&all->column[k++], &out->ints[i], rows, runs);
    if (!rc) rc = str_export(&all->column[k++], &out->fixed[C_EXECUTION], rows, runs);
    if (!rc) rc = str_export(&all->column[k++], &out->fixed[C_ATTRS], rows, runs);
    if (!rc) rc = str_export(&all->column[k++], source, rows, runs);
    if (rc) {
        if (all)
            for (int i = 0; i < k; i++)
                if (all->column[i].array.release) release_column(&all->column[i].array);
        free(all);
        free(array);
        return PyErr_NoMemory();
    }
    for (int i = 0; i < k; i++) all->children[i] = &all->column[i].array;
    *array = (struct ArrowArray){
        .length = (int64_t)rows, .n_buffers = 1, .n_children = k,
        .buffers = all->buffers, .children = all->children, .release = release_columns,
        .private_data = all,
    };
    PyObject *capsule = PyCapsule_New(array, "arrow_array", capsule_release);
    if (!capsule) release_columns(array), free(array);
    return capsule;
}

PyDoc_STRVAR(decode_doc,
"decode(body, source) -> (rows, columns, fallback, ignored, runs) or None\n\n"
"columns: an Arrow C data interface capsule (\"arrow_array\") of a struct array of\n"
"event_uid, ts, event, the string fields, the integer fields, execution_id, attrs and\n"
"source; fallback: (resource, scope, span) indices of the spans the reference decoder\n"
"must read; ignored: spans that are not job events; runs: whether the columns but\n"
"event_uid, ts and event are run-end encoded (a request of spans with steps as span\n"
"events). None when the whole request is for the reference decoder.");

static PyObject *decoder_decode(DecoderObject *self, PyObject *args) {
    if (!self->ready) {
        PyErr_SetString(PyExc_RuntimeError, "not initialised");
        return NULL;
    }
    Py_buffer view;
    const char *source;
    Py_ssize_t source_len;
    if (!PyArg_ParseTuple(args, "y*s#", &view, &source, &source_len)) return NULL;
    StrCol source_col;
    memset(&source_col, 0, sizeof source_col);
    Out out;
    memset(&out, 0, sizeof out);
    out.ts.width = 8;
    out.n_strings = self->config.n_strings;
    out.n_ints = self->config.n_ints;
    for (int i = 0; i < out.n_ints; i++) out.ints[i].width = self->config.int_width[i];
    Result res;
    memset(&res, 0, sizeof res);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = decode_request(&self->config, (Str){view.buf, (size_t)view.len}, &out, &res,
                        &self->hints);
    if (!rc) {
        out_remember(&out, &self->hints);
        hint_set(&self->hints.body, (size_t)view.len);
        rc = source_column(&source_col, source, (size_t)source_len, out.rows, out.in_runs);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (rc == NOMEM) {
        PyErr_NoMemory();
    } else if (rc) {
        result = Py_NewRef(Py_None);
    } else {
        size_t rows = out.rows;
        int runs = out.in_runs;
        PyObject *columns = export_columns(&out, &source_col);
        PyObject *fallback = PyList_New((Py_ssize_t)(res.n_fallback / 3));
        int failed = !columns || !fallback;
        for (size_t i = 0; !failed && i < res.n_fallback / 3; i++) {
            PyObject *t = Py_BuildValue("(iii)", res.fallback[3 * i], res.fallback[3 * i + 1],
                                        res.fallback[3 * i + 2]);
            if (!t) failed = 1; else PyList_SET_ITEM(fallback, (Py_ssize_t)i, t);
        }
        if (!failed)
            result = Py_BuildValue("(nOOiO)", (Py_ssize_t)rows, columns, fallback, res.ignored,
                                   runs ? Py_True : Py_False);
        Py_XDECREF(columns);
        Py_XDECREF(fallback);
    }
    out_free(&out);
    str_col_free(&source_col);
    free(res.fallback);
    return result;
}

static PyMethodDef decoder_methods[] = {
    {"decode", (PyCFunction)decoder_decode, METH_VARARGS, decode_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "collectors._otlp_native.Decoder",
    .tp_basicsize = sizeof(DecoderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "OTLP trace requests -> canonical columns, for one field mapping.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)decoder_init,
    .tp_dealloc = (destructor)decoder_dealloc,
    .tp_methods = decoder_methods,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_otlp_native",
    "Native decoding of OTLP trace requests into canonical columns.", -1, NULL,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__otlp_native(void) {
    if (PyType_Ready(&DecoderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Decoder", (PyObject *)&DecoderType) < 0 ||
        PyModule_AddStringConstant(m, "SOURCE_DIGEST", SOURCE_DIGEST) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
