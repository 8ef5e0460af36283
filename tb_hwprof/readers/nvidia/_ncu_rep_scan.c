/* The walk of one .ncu-rep launch record, in C: the native path of ncu_rep.metric_name_ids (the
 * Python function there is the reference and documents the rule; tests hold the two equal on every
 * real record and on damaged ones, error messages included).
 *
 * metric_name_ids(record) -> (distinct NameIds, a NameId given to two different results or None),
 * ValueError (the Python path's message) when the record does not parse whole, or None when a
 * varint is longer than 63 bits (only in damaged records): the caller then takes the Python path,
 * whose integers have no width.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define METRIC_RESULT 0x6a /* field 13, length-delimited: ProfileResult.MetricResults */
#define NAME_ID 0x08       /* field 1, varint: the result's NameId */

enum { OK = 0, PAST_END = -1, TOO_WIDE = -2, NO_MEMORY = -3 };

/* A varint at *i of buf[0:end]; TOO_WIDE past 9 bytes (63 bits). */
static int read_varint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *i, uint64_t *out) {
    uint64_t result = 0;
    int shift = 0;
    for (;;) {
        if (*i >= end)
            return PAST_END;
        if (shift > 56)
            return TOO_WIDE;
        unsigned char byte = buf[(*i)++];
        result |= (uint64_t)(byte & 0x7F) << shift;
        shift += 7;
        if (byte < 0x80) {
            *out = result;
            return OK;
        }
    }
}

/* NameId -> (offset of its first result, that result's length): open addressing, linear probing. */
typedef struct {
    uint64_t id;
    Py_ssize_t at; /* -1: free slot */
    uint64_t length;
} slot;

typedef struct {
    slot *slots;
    size_t mask, used;
} id_table;

static int table_init(id_table *t, size_t capacity) {
    t->mask = capacity - 1;
    t->used = 0;
    t->slots = malloc(capacity * sizeof(slot));
    if (!t->slots)
        return NO_MEMORY;
    for (size_t k = 0; k < capacity; k++)
        t->slots[k].at = -1;
    return OK;
}

static slot *table_find(id_table *t, uint64_t id) {
    size_t k = (size_t)(id * 0x9E3779B97F4A7C15ull) & t->mask;
    while (t->slots[k].at != -1 && t->slots[k].id != id)
        k = (k + 1) & t->mask;
    return &t->slots[k];
}

static int table_grow(id_table *t) {
    id_table bigger;
    if (table_init(&bigger, (t->mask + 1) * 2) != OK)
        return NO_MEMORY;
    for (size_t k = 0; k <= t->mask; k++)
        if (t->slots[k].at != -1)
            *table_find(&bigger, t->slots[k].id) = t->slots[k];
    bigger.used = t->used;
    free(t->slots);
    *t = bigger;
    return OK;
}

/* Python's first.setdefault(id, at) with lengths[id] = length for a new id; returns the id's slot
 * (its first result) and whether it was already there. */
static int remember(id_table *t, uint64_t id, Py_ssize_t at, uint64_t length, slot **found, int *seen) {
    if ((t->used + 1) * 2 > t->mask + 1 && table_grow(t) != OK)
        return NO_MEMORY;
    slot *s = table_find(t, id);
    *seen = s->at != -1;
    if (!*seen) {
        s->id = id;
        s->at = at;
        s->length = length;
        t->used++;
    }
    *found = s;
    return OK;
}

/* The two results of one id differ (the Python path's lengths and slices compared; a slice
 * running past the record is cut short there, the record is refused right after anyway). */
static int differ(const unsigned char *buf, Py_ssize_t end, const slot *first, Py_ssize_t at, uint64_t length) {
    if (first->length != length)
        return 1;
    Py_ssize_t a_len = (Py_ssize_t)length < end - first->at ? (Py_ssize_t)length : end - first->at;
    Py_ssize_t b_len = (Py_ssize_t)length < end - at ? (Py_ssize_t)length : end - at;
    return a_len != b_len || memcmp(buf + first->at, buf + at, (size_t)a_len) != 0;
}

typedef struct {
    const char *message; /* ValueError's, or NULL */
    int wire;            /* for "wire type %d" */
    int status;          /* OK, TOO_WIDE or NO_MEMORY */
} walk_error;

/* One field off the fast path (ncu_rep._skip_field): its end in *i (possibly past the record),
 * a metric result's id remembered, *shared set when that id was given to a different result. */
static int skip_field(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *i, id_table *t,
                      int *has_shared, uint64_t *shared, walk_error *err) {
    uint64_t key, length, value;
    int r = read_varint(buf, end, i, &key);
    if (r != OK)
        goto varint_failed;
    int wire = (int)(key & 7);
    if ((key >> 3) == 0) {
        err->message = "field number 0";
        return -1;
    }
    if (wire == 2) {
        r = read_varint(buf, end, i, &length);
        if (r != OK)
            goto varint_failed;
        if (key == METRIC_RESULT && length && *i < end && buf[*i] == NAME_ID) {
            /* The id's varint, read inside the result (Python: _varint(record[i:i + length], 1)). */
            Py_ssize_t limit = length < (uint64_t)(end - *i) ? *i + (Py_ssize_t)length : end;
            Py_ssize_t j = *i + 1;
            uint64_t id;
            r = read_varint(buf, limit, &j, &id);
            if (r != OK)
                goto varint_failed;
            slot *first;
            int seen;
            if (remember(t, id, *i, length, &first, &seen) != OK) {
                err->status = NO_MEMORY;
                return -1;
            }
            if (seen && differ(buf, end, first, *i, length)) {
                *has_shared = 1;
                *shared = id;
            }
        }
        if (length > (uint64_t)(end - *i)) {
            *i = end + 1; /* past the end: the caller refuses the record */
            return 0;
        }
        *i += (Py_ssize_t)length;
        return 0;
    }
    if (wire == 0) {
        r = read_varint(buf, end, i, &value);
        if (r != OK)
            goto varint_failed;
        return 0;
    }
    if (wire == 1 || wire == 5) {
        *i += wire == 1 ? 8 : 4;
        return 0;
    }
    err->message = "wire type %d";
    err->wire = wire;
    return -1;
varint_failed:
    if (r == TOO_WIDE)
        err->status = TOO_WIDE;
    else
        err->message = "varint past end";
    return -1;
}

static PyObject *metric_name_ids(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t end = view.len, i = 0, last = end - 5;
    id_table t;
    walk_error err = {NULL, 0, OK};
    int has_shared = 0;
    uint64_t shared = 0;
    PyObject *out = NULL;
    if (table_init(&t, 1024) != OK) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    while (i < end) {
        /* The common shape: tag, a one-byte length, the NameId tag, an id of one or two bytes. */
        int64_t name_id = -1;
        if (i <= last && buf[i] == METRIC_RESULT && buf[i + 1] >= 2 && buf[i + 1] < 0x80 && buf[i + 2] == NAME_ID) {
            unsigned char low = buf[i + 3];
            if (low < 0x80)
                name_id = low;
            else if (buf[i + 1] >= 3 && buf[i + 4] < 0x80)
                name_id = (low & 0x7F) | ((int64_t)buf[i + 4] << 7);
        }
        if (name_id >= 0) {
            uint64_t length = buf[i + 1];
            Py_ssize_t at = i + 2;
            i = at + (Py_ssize_t)length;
            slot *first;
            int seen;
            if (remember(&t, (uint64_t)name_id, at, length, &first, &seen) != OK) {
                err.status = NO_MEMORY;
                break;
            }
            if (seen && differ(buf, end, first, at, length)) {
                has_shared = 1;
                shared = (uint64_t)name_id;
            }
        } else if (skip_field(buf, end, &i, &t, &has_shared, &shared, &err) < 0) {
            break;
        }
        if (i > end) {
            err.message = "field past the end of its message";
            break;
        }
    }
    if (err.status == NO_MEMORY)
        PyErr_NoMemory();
    else if (err.status == TOO_WIDE)
        out = (Py_INCREF(Py_None), Py_None);
    else if (err.message)
        PyErr_Format(PyExc_ValueError, err.message, err.wire);
    else if (has_shared)
        out = Py_BuildValue("(nK)", (Py_ssize_t)t.used, (unsigned long long)shared);
    else
        out = Py_BuildValue("(nO)", (Py_ssize_t)t.used, Py_None);
    free(t.slots);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"metric_name_ids", metric_name_ids, METH_O,
     "metric_name_ids(record) -> (distinct NameIds, shared NameId or None); None: take the Python path"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ncu_rep_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__ncu_rep_scan(void) { return PyModule_Create(&module); }
