/* Two reads of a text column as polars holds it, an Arrow string view array, for the
 * column-wise decode of JSON lines (collectors/columnar.py, timestamps_vec.py), without
 * first copying it out as offsets and bytes (a third of what the NumPy reads cost).
 *
 * Both take the array's buffers as Arrow lays them out: the validity bitmap (or None),
 * the 16-byte views (a length; up to 12 bytes inline, or a prefix, a data buffer's index
 * and an offset into it), the data buffers, the array's offset and its length. A view
 * that points outside its buffers raises ValueError.
 *
 * marks(...) -> (quotes, colons): the `"` and `:` bytes in all values (nulls hold none);
 *   the NumPy reference is `columnar._text_marks_reference`.
 * coerced(...) -> bytes, one 0/1 per value: 1 where the value is text that polars may have
 *   coerced from another JSON type: a JSON number in full, `true`, `false`, `null`, or
 *   text starting with `{` or `[`; the reference is `columnar._maybe_coerced_reference`.
 * rfc3339(...) -> bytes of native int64 µs since the epoch, or None: every value read as
 *   RFC 3339 in the forms `YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|+HH:MM|-HH:MM)`, a real date
 *   from year 1, a time below second 60, a zone below 24:00; the fraction truncated to
 *   µs. None where any value is null or in another form: the general parse then reads
 *   the column. The reference is `timestamps_vec.micros_column` without this.
 */
#define PY_SSIZE_T_CLEAN
#ifndef SOURCE_DIGEST /* setup.py defines it: the first 16 hex digits of this file's sha256 */
#define SOURCE_DIGEST "unknown"
#endif
#include <Python.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

typedef struct {
    Py_buffer validity, views;
    Py_buffer *data;
    Py_ssize_t buffers, offset, count;
    int has_validity;
} Column;

static void column_release(Column *c) {
    if (c->has_validity) PyBuffer_Release(&c->validity);
    PyBuffer_Release(&c->views);
    for (Py_ssize_t i = 0; i < c->buffers; i++) PyBuffer_Release(&c->data[i]);
    PyMem_Free(c->data);
}

/* Parses (validity, views, buffers, offset, count); 0 on success. */
static int column_open(PyObject *args, Column *c) {
    PyObject *validity, *views, *buffers;
    memset(c, 0, sizeof *c);
    if (!PyArg_ParseTuple(args, "OOO!nn", &validity, &views, &PyTuple_Type, &buffers,
                          &c->offset, &c->count))
        return -1;
    if (c->offset < 0 || c->count < 0 || c->offset > PY_SSIZE_T_MAX / 16 - c->count) {
        PyErr_SetString(PyExc_ValueError, "negative or too large offset or count");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(buffers);
    c->data = PyMem_Calloc(n ? (size_t)n : 1, sizeof(Py_buffer));
    if (!c->data) {
        PyErr_NoMemory();
        return -1;
    }
    if (PyObject_GetBuffer(views, &c->views, PyBUF_SIMPLE) < 0) {
        PyMem_Free(c->data);
        return -1;
    }
    for (; c->buffers < n; c->buffers++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(buffers, c->buffers), &c->data[c->buffers],
                               PyBUF_SIMPLE) < 0) {
            column_release(c);
            return -1;
        }
    }
    if (validity != Py_None) {
        if (PyObject_GetBuffer(validity, &c->validity, PyBUF_SIMPLE) < 0) {
            column_release(c);
            return -1;
        }
        c->has_validity = 1;
    }
    Py_ssize_t end = c->offset + c->count;
    if (c->views.len / 16 < end || (c->has_validity && c->validity.len < (end + 7) / 8)) {
        column_release(c);
        PyErr_SetString(PyExc_ValueError, "views or validity shorter than the array");
        return -1;
    }
    return 0;
}

static int is_valid(const Column *c, Py_ssize_t i) {
    if (!c->has_validity) return 1;
    Py_ssize_t bit = c->offset + i;
    return (((const unsigned char *)c->validity.buf)[bit >> 3] >> (bit & 7)) & 1;
}

/* The bytes of value i: 0 on success, -1 (ValueError set) for a view outside its buffers. */
static int value_at(const Column *c, Py_ssize_t i, const unsigned char **text, int32_t *size) {
    const unsigned char *view = (const unsigned char *)c->views.buf + (c->offset + i) * 16;
    int32_t length, index, at;
    memcpy(&length, view, 4);
    if (length < 0) goto bad;
    if (length <= 12) {
        *text = view + 4;
        *size = length;
        return 0;
    }
    memcpy(&index, view + 8, 4);
    memcpy(&at, view + 12, 4);
    if (index < 0 || index >= c->buffers || at < 0 || c->data[index].len < length ||
        at > c->data[index].len - length)
        goto bad;
    *text = (const unsigned char *)c->data[index].buf + at;
    *size = length;
    return 0;
bad:
    PyErr_Format(PyExc_ValueError, "view %zd points outside its buffers", i);
    return -1;
}

/* Adds the `"` and `:` among `size` bytes to the counts. */
static void count_marks(const unsigned char *text, int32_t size, Py_ssize_t *quotes,
                        Py_ssize_t *colons) {
    int32_t k = 0;
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), colon = _mm_set1_epi8(':');
    for (; k + 16 <= size; k += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(text + k));
        *quotes += __builtin_popcount(_mm_movemask_epi8(_mm_cmpeq_epi8(v, quote)));
        *colons += __builtin_popcount(_mm_movemask_epi8(_mm_cmpeq_epi8(v, colon)));
    }
#endif
    for (; k < size; k++) {
        *quotes += text[k] == '"';
        *colons += text[k] == ':';
    }
}

static PyObject *text_marks(PyObject *self, PyObject *args) {
    Column c;
    if (column_open(args, &c) < 0) return NULL;
    Py_ssize_t quotes = 0, colons = 0;
    const unsigned char *views = (const unsigned char *)c.views.buf + c.offset * 16;
    for (Py_ssize_t i = 0; i < c.count; i++) {
        const unsigned char *text;
        int32_t size;
        if (!is_valid(&c, i)) continue;
#ifdef __SSE2__
        int32_t length;
        memcpy(&length, views + i * 16, 4);
        if (length >= 0 && length <= 12) {
            /* An inline value: the whole view at once, its length's four bytes and the
             * unused tail masked off. */
            __m128i v = _mm_loadu_si128((const __m128i *)(views + i * 16));
            unsigned keep = ((1u << length) - 1) << 4;
            quotes += __builtin_popcount(
                (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('"'))) & keep);
            colons += __builtin_popcount(
                (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(':'))) & keep);
            continue;
        }
#endif
        if (value_at(&c, i, &text, &size) < 0) {
            column_release(&c);
            return NULL;
        }
        count_marks(text, size, &quotes, &colons);
    }
    column_release(&c);
    return Py_BuildValue("(nn)", quotes, colons);
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* A JSON number, all of the text: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? */
static int is_number(const unsigned char *t, int32_t size) {
    int32_t k = 0;
    if (k < size && t[k] == '-') k++;
    if (k >= size || !is_digit(t[k])) return 0;
    if (t[k++] != '0')
        while (k < size && is_digit(t[k])) k++;
    if (k < size && t[k] == '.') {
        if (++k >= size || !is_digit(t[k])) return 0;
        while (k < size && is_digit(t[k])) k++;
    }
    if (k < size && (t[k] == 'e' || t[k] == 'E')) {
        if (++k < size && (t[k] == '+' || t[k] == '-')) k++;
        if (k >= size || !is_digit(t[k])) return 0;
        while (k < size && is_digit(t[k])) k++;
    }
    return k == size;
}

static int is_word(const unsigned char *t, int32_t size, const char *word) {
    return (size_t)size == strlen(word) && memcmp(t, word, (size_t)size) == 0;
}

static PyObject *text_coerced(PyObject *self, PyObject *args) {
    Column c;
    if (column_open(args, &c) < 0) return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, c.count);
    if (!out) {
        column_release(&c);
        return NULL;
    }
    unsigned char *maybe = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < c.count; i++) {
        const unsigned char *text;
        int32_t size;
        maybe[i] = 0;
        if (!is_valid(&c, i)) continue;
        if (value_at(&c, i, &text, &size) < 0) {
            column_release(&c);
            Py_DECREF(out);
            return NULL;
        }
        if (!size) continue;
        maybe[i] = text[0] == '{' || text[0] == '[' || is_number(text, size) ||
                   is_word(text, size, "true") || is_word(text, size, "false") ||
                   is_word(text, size, "null");
    }
    column_release(&c);
    return out;
}

static int digits(const unsigned char *t, int from, int count, int64_t *value) {
    int64_t v = 0;
    for (int k = from; k < from + count; k++) {
        if (!is_digit(t[k])) return 0;
        v = v * 10 + (t[k] - '0');
    }
    *value = v;
    return 1;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm). */
static int64_t days_from_civil(int64_t year, int64_t month, int64_t day) {
    year -= month <= 2;
    int64_t era = (year >= 0 ? year : year - 399) / 400;
    int64_t of_era = year - era * 400;
    int64_t of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    return era * 146097 + of_era * 365 + of_era / 4 - of_era / 100 + of_year - 719468;
}

/* µs of one value in the fixed forms; 0 where it is in none of them. */
static int read_stamp(const unsigned char *t, int32_t width, int64_t *micros) {
    static const int days_in_month[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (width < 20) return 0;
    int zone = t[width - 1] == 'Z' ? 1 : 6;
    int fraction = width - 19 - zone - 1; /* digits after the point, when there is one */
    if (fraction >= 0 && (t[19] != '.' || fraction < 1 || fraction > 9)) return 0;
    if (fraction < 0 && width != 19 + zone) return 0;
    if (t[4] != '-' || t[7] != '-' || t[10] != 'T' || t[13] != ':' || t[16] != ':') return 0;
    int64_t year, month, day, hour, minute, second, part = 0;
    if (!digits(t, 0, 4, &year) || !digits(t, 5, 2, &month) || !digits(t, 8, 2, &day) ||
        !digits(t, 11, 2, &hour) || !digits(t, 14, 2, &minute) || !digits(t, 17, 2, &second))
        return 0;
    if (fraction > 0) {
        int64_t ignored;
        int kept = fraction < 6 ? fraction : 6;
        if (!digits(t, 20, kept, &part) || !digits(t, 20 + kept, fraction - kept, &ignored))
            return 0;
        for (int k = kept; k < 6; k++) part *= 10;
    }
    int64_t offset = 0;
    if (zone == 6) {
        int64_t zone_hour, zone_minute;
        char sign = (char)t[width - 6];
        if ((sign != '+' && sign != '-') || t[width - 3] != ':' ||
            !digits(t, width - 5, 2, &zone_hour) || !digits(t, width - 2, 2, &zone_minute) ||
            zone_hour > 23 || zone_minute > 59)
            return 0;
        offset = (sign == '-' ? -1 : 1) * (zone_hour * 3600 + zone_minute * 60);
    }
    int leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    if (year < 1 || month < 1 || month > 12 || day < 1 ||
        day > days_in_month[month] + (month == 2 && leap) || hour > 23 || minute > 59 ||
        second > 59)
        return 0;
    int64_t seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 +
                      minute * 60 + second - offset;
    *micros = seconds * 1000000 + part;
    return 1;
}

static PyObject *text_rfc3339(PyObject *self, PyObject *args) {
    Column c;
    if (column_open(args, &c) < 0) return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, c.count * (Py_ssize_t)sizeof(int64_t));
    if (!out) {
        column_release(&c);
        return NULL;
    }
    int64_t *stamps = (int64_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < c.count; i++) {
        const unsigned char *text;
        int32_t size;
        if (!is_valid(&c, i)) goto none;
        if (value_at(&c, i, &text, &size) < 0) {
            column_release(&c);
            Py_DECREF(out);
            return NULL;
        }
        if (!read_stamp(text, size, &stamps[i])) goto none;
    }
    column_release(&c);
    return out;
none:
    column_release(&c);
    Py_DECREF(out);
    Py_RETURN_NONE;
}

static PyMethodDef view_methods[] = {
    {"marks", text_marks, METH_VARARGS,
     "marks(validity, views, buffers, offset, count) -> (quotes, colons) in all values."},
    {"coerced", text_coerced, METH_VARARGS,
     "coerced(validity, views, buffers, offset, count) -> one 0/1 byte per value: text that "
     "may be a JSON number, boolean, null, object or array polars read as text."},
    {"rfc3339", text_rfc3339, METH_VARARGS,
     "rfc3339(validity, views, buffers, offset, count) -> int64 µs as bytes, or None where "
     "a value is null or not in the fixed RFC 3339 forms."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_text_views",
    "Reads of an Arrow string view column: its marks, what may be coerced, its timestamps.",
    -1, view_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__text_views(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_DIGEST", SOURCE_DIGEST) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
