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

/* The scan itself: no Python API in here (it runs without the GIL). */
static void scan(const char *uri, const char *sql, long long first, long long last,
                 int64_t **columns, int ncols, Py_ssize_t capacity, scan_result *r) {
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    /* NOMUTEX: the connection never leaves this thread, and in SQLite's default serialized mode
     * every sqlite3_column_* call would lock and unlock its mutex (~40% of a 14-column scan). */
    int rc = sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        set_error(r, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        return;
    }
    /* As sqlite_columns.open_read_only: a damaged page is an error, not garbage rows. */
    if (sqlite3_exec(db, "PRAGMA cell_size_check = ON", NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        set_error(r, sqlite3_errmsg(db));
        sqlite3_close(db);
        return;
    }
    if (sqlite3_column_count(st) != ncols) {
        set_error(r, "the query's column count differs from the number of buffers");
    } else {
        sqlite3_bind_int64(st, 1, first);
        sqlite3_bind_int64(st, 2, last);
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
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, got), v, PyBUF_CONTIG | PyBUF_FORMAT) < 0)
            goto done;
        const char *f = v->format ? v->format : "B";
        if (f[0] == '<' || f[0] == '=' || f[0] == '@')
            f++;
        if (v->itemsize != 8 || !(strcmp(f, "q") == 0 || strcmp(f, "l") == 0)) {
            got++;
            PyErr_SetString(PyExc_TypeError, "buffers must hold int64");
            goto done;
        }
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

/* Whether the SQLite library this module links may be used from several threads at once (each
 * thread on its own connection, as sqlite_columns does): not when built with SQLITE_THREADSAFE=0. */
static PyObject *threadsafe(PyObject *self, PyObject *unused) {
    return PyBool_FromLong(sqlite3_threadsafe() != 0);
}

static PyMethodDef methods[] = {
    {"fill", fill, METH_VARARGS, "fill(uri, sql, first, last, buffers) -> (rows, bad_column, error)"},
    {"threadsafe", threadsafe, METH_NOARGS, "threadsafe() -> whether the linked SQLite allows threads"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sqlite_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sqlite_scan(void) {
    return PyModule_Create(&module);
}
