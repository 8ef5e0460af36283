/* Integer columns of a SQLite query straight into int64 buffers (numpy arrays), GIL released.
 *
 * Optional accelerator of sqlite_columns.py: Python's sqlite3 makes a tuple and an int object per
 * value, and the pure-Python fallback has SQLite print each column as text for numpy to parse
 * again; here each value is read with sqlite3_column_int64 into its place.  Built when a C
 * compiler and sqlite3.h are there (setup.py marks it optional); sqlite_columns.py falls back
 * to the text path otherwise, with the same results.
 *
 * fill(uri, sql, first, last, buffers) -> (rows, bad_column, error)
 *   uri      a SQLite URI, opened read-only (e.g. file:///x.sqlite?mode=ro)
 *   sql      a SELECT of len(buffers) integer columns with two parameters (bound to first, last)
 *   buffers  writable C-contiguous int64 buffers, each with room for every row
 * rows: rows written; bad_column: the first column found NULL / not an integer (-1: none), where
 * the scan stopped; error: SQLite's message (or "more rows than room"), None when it went well.
 *
 * text_codes(uri, sql, first, last, codes) -> (rows, texts, error)
 *   sql      a SELECT of one text column, parameters as fill's
 *   codes    a writable int64 buffer with room for every row
 * Each row's index in `texts` (its distinct values in order of first appearance, str) written to
 * codes: one pass, no text crossing into Python per row beyond a lookup of its bytes.  texts is
 * None where the scan met a NULL or text that is not UTF-8: the caller's SQL path then names it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sqlite3.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    Py_ssize_t rows;
    int bad_column;
    char error[256];
} scan_result;

static void set_error(scan_result *r, const char *message) {
    strncpy(r->error, message ? message : "unknown SQLite error", sizeof r->error - 1);
    r->error[sizeof r->error - 1] = '\0';
}

/* `sql` prepared on a read-only connection of its own to `uri`, its parameters bound to first and
 * last; 0 with r->error set (and nothing left open) when that fails.  No Python API in here. */
static int prepare(const char *uri, const char *sql, long long first, long long last,
                   sqlite3 **db, sqlite3_stmt **st, scan_result *r) {
    /* NOMUTEX: the connection never leaves this thread, and in SQLite's default serialized mode
     * every sqlite3_column_* call would lock and unlock its mutex (~40% of a 14-column scan). */
    int rc = sqlite3_open_v2(uri, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        set_error(r, *db ? sqlite3_errmsg(*db) : sqlite3_errstr(rc));
        sqlite3_close(*db);
        *db = NULL;
        return 0;
    }
    /* As sqlite_columns.open_read_only: a damaged page is an error, not garbage rows. */
    if (sqlite3_exec(*db, "PRAGMA cell_size_check = ON", NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(*db, sql, -1, st, NULL) != SQLITE_OK) {
        set_error(r, sqlite3_errmsg(*db));
        sqlite3_finalize(*st);
        *st = NULL;
        sqlite3_close(*db);
        *db = NULL;
        return 0;
    }
    sqlite3_bind_int64(*st, 1, first);
    sqlite3_bind_int64(*st, 2, last);
    return 1;
}

/* The scan itself: no Python API in here (it runs without the GIL). */
static void scan(const char *uri, const char *sql, long long first, long long last,
                 int64_t **columns, int ncols, Py_ssize_t capacity, scan_result *r) {
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int rc;
    if (!prepare(uri, sql, first, last, &db, &st, r))
        return;
    if (sqlite3_column_count(st) != ncols) {
        set_error(r, "the query's column count differs from the number of buffers");
    } else {
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            if (r->rows >= capacity) {
                set_error(r, "more rows than room");
                break;
            }
            for (int c = 0; c < ncols; c++) {
                if (sqlite3_column_type(st, c) != SQLITE_INTEGER) {
                    r->bad_column = c;
                    break;
                }
                columns[c][r->rows] = sqlite3_column_int64(st, c);
            }
            if (r->bad_column >= 0)
                break;
            r->rows++;
        }
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            set_error(r, sqlite3_errmsg(db));
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* A writable C-contiguous int64 view of `obj` in *v; -1 with `message` (a TypeError) and nothing held
 * when it is not one. */
static int int64_buffer(PyObject *obj, Py_buffer *v, const char *message) {
    if (PyObject_GetBuffer(obj, v, PyBUF_CONTIG | PyBUF_FORMAT) < 0)
        return -1;
    const char *f = v->format ? v->format : "B";
    if (f[0] == '<' || f[0] == '=' || f[0] == '@')
        f++;
    if (v->itemsize != 8 || !(strcmp(f, "q") == 0 || strcmp(f, "l") == 0)) {
        PyBuffer_Release(v);
        PyErr_SetString(PyExc_TypeError, message);
        return -1;
    }
    return 0;
}

static PyObject *fill(PyObject *self, PyObject *args) {
    const char *uri, *sql;
    long long first, last;
    PyObject *buffers;
    if (!PyArg_ParseTuple(args, "ssLLO", &uri, &sql, &first, &last, &buffers))
        return NULL;
    PyObject *seq = PySequence_Fast(buffers, "buffers must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > 1000) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "between 1 and 1000 buffers");
        return NULL;
    }
    Py_buffer *views = PyMem_Calloc((size_t)n, sizeof(Py_buffer));
    int64_t **columns = PyMem_Calloc((size_t)n, sizeof(int64_t *));
    Py_ssize_t got = 0, capacity = PY_SSIZE_T_MAX;
    PyObject *out = NULL;
    if (views == NULL || columns == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < n; got++) {
        Py_buffer *v = &views[got];
        if (int64_buffer(PySequence_Fast_GET_ITEM(seq, got), v, "buffers must hold int64") < 0)
            goto done;
        columns[got] = (int64_t *)v->buf;
        if (v->len / 8 < capacity)
            capacity = v->len / 8;
    }
    scan_result r = {0, -1, ""};
    Py_BEGIN_ALLOW_THREADS
    scan(uri, sql, first, last, columns, (int)n, capacity, &r);
    Py_END_ALLOW_THREADS
    if (r.error[0])
        out = Py_BuildValue("(nis)", r.rows, r.bad_column, r.error);
    else
        out = Py_BuildValue("(niO)", r.rows, r.bad_column, Py_None);
done:
    for (Py_ssize_t i = 0; i < got; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(columns);
    Py_DECREF(seq);
    return out;
}

/* The code of `text` (n bytes): its place in `order`, appended there (and to `index`) when new;
 * -1 with a Python error set when out of memory. */
static Py_ssize_t code_of(PyObject *index, PyObject *order, const char *text, int n) {
    PyObject *key = PyBytes_FromStringAndSize(text, n);
    if (key == NULL)
        return -1;
    Py_ssize_t code = -1;
    PyObject *known = PyDict_GetItemWithError(index, key);
    if (known != NULL) {
        code = PyLong_AsSsize_t(known);
    } else if (!PyErr_Occurred()) {
        PyObject *value = PyLong_FromSsize_t(PyList_GET_SIZE(order));
        if (value != NULL && PyDict_SetItem(index, key, value) == 0 && PyList_Append(order, key) == 0)
            code = PyList_GET_SIZE(order) - 1;
        Py_XDECREF(value);
    }
    Py_DECREF(key);
    return code;
}

/* The distinct texts as str, in code order; None (no error set) when one is not UTF-8. */
static PyObject *decoded(PyObject *order) {
    Py_ssize_t n = PyList_GET_SIZE(order);
    PyObject *texts = PyList_New(n);
    for (Py_ssize_t i = 0; texts != NULL && i < n; i++) {
        PyObject *b = PyList_GET_ITEM(order, i);
        PyObject *t = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b), "strict");
        if (t == NULL) {
            Py_CLEAR(texts);
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                Py_RETURN_NONE;
            }
            return NULL;
        }
        PyList_SET_ITEM(texts, i, t);
    }
    return texts;
}

static PyObject *text_codes(PyObject *self, PyObject *args) {
    const char *uri, *sql;
    long long first, last;
    PyObject *buffer;
    if (!PyArg_ParseTuple(args, "ssLLO", &uri, &sql, &first, &last, &buffer))
        return NULL;
    Py_buffer view;
    if (int64_buffer(buffer, &view, "codes must hold int64") < 0)
        return NULL;
    int64_t *codes = (int64_t *)view.buf;
    Py_ssize_t capacity = view.len / 8;
    scan_result r = {0, -1, ""};
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    PyObject *index = PyDict_New(), *order = PyList_New(0), *out = NULL, *texts = NULL;
    int ok, rc = SQLITE_DONE, unreadable = 0;
    if (index == NULL || order == NULL)
        goto done;
    Py_BEGIN_ALLOW_THREADS
    ok = prepare(uri, sql, first, last, &db, &st, &r);
    Py_END_ALLOW_THREADS
    if (!ok)
        goto result;
    if (sqlite3_column_count(st) != 1) {
        set_error(&r, "the query must have one column");
        goto result;
    }
    for (;;) {
        /* The GIL only for the lookup: SQLite's paging and decoding run beside other threads. */
        Py_BEGIN_ALLOW_THREADS
        rc = sqlite3_step(st);
        Py_END_ALLOW_THREADS
        if (rc != SQLITE_ROW)
            break;
        if (r.rows >= capacity) {
            set_error(&r, "more rows than room");
            break;
        }
        if (sqlite3_column_type(st, 0) == SQLITE_NULL) {
            unreadable = 1;
            break;
        }
        const char *text = (const char *)sqlite3_column_text(st, 0);
        Py_ssize_t code = code_of(index, order, text ? text : "", sqlite3_column_bytes(st, 0));
        if (code < 0)
            goto done;
        codes[r.rows++] = code;
    }
    if (!r.error[0] && rc != SQLITE_ROW && rc != SQLITE_DONE)
        set_error(&r, sqlite3_errmsg(db));
result:
    if (!r.error[0] && !unreadable && (texts = decoded(order)) == NULL)
        goto done;
    if (r.error[0])
        out = Py_BuildValue("(nOs)", r.rows, Py_None, r.error);
    else
        out = Py_BuildValue("(nOO)", r.rows, unreadable ? Py_None : texts, Py_None);
done:
    Py_XDECREF(texts);
    sqlite3_finalize(st);
    sqlite3_close(db);
    Py_XDECREF(index);
    Py_XDECREF(order);
    PyBuffer_Release(&view);
    return out;
}

/* Whether the SQLite library this module links may be used from several threads at once (each
 * thread on its own connection, as sqlite_columns does): not when built with SQLITE_THREADSAFE=0. */
static PyObject *threadsafe(PyObject *self, PyObject *unused) {
    return PyBool_FromLong(sqlite3_threadsafe() != 0);
}

static PyMethodDef methods[] = {
    {"fill", fill, METH_VARARGS, "fill(uri, sql, first, last, buffers) -> (rows, bad_column, error)"},
    {"text_codes", text_codes, METH_VARARGS, "text_codes(uri, sql, first, last, codes) -> (rows, texts, error)"},
    {"threadsafe", threadsafe, METH_NOARGS, "threadsafe() -> whether the linked SQLite allows threads"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sqlite_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sqlite_scan(void) {
    return PyModule_Create(&module);
}
