/* Innermost enclosing interval by a per-group stack: the native path of core/nesting.py
 * (which documents the rule and holds the numpy path, the reference; tests hold them equal).
 *
 * Inputs are int64 buffers already sorted by (group, start, end descending) for the intervals and
 * by (group, start) for the queries.  An interval j encloses an item i (same group) when
 * end_j >= max(end_i - tolerance, start_i + 1); the answer is the nearest such interval before i
 * in sorted order.  One pass, O(n + depth) per item; no numpy C API (buffers in, bytes out).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    Py_buffer view;
    int held;
} held_buffer;

static int get_int64(PyObject *obj, held_buffer *b, const char *what) {
    if (PyObject_GetBuffer(obj, &b->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    b->held = 1;
    if (b->view.itemsize != 8 || (b->view.format && strcmp(b->view.format, "l") && strcmp(b->view.format, "q"))) {
        PyErr_Format(PyExc_TypeError, "%s: expected an int64 buffer", what);
        return -1;
    }
    return 0;
}

static void release(held_buffer *b) {
    if (b->held)
        PyBuffer_Release(&b->view);
    b->held = 0;
}

static int64_t need_of(int64_t start, int64_t end, int64_t tolerance) {
    int64_t reach = end - tolerance;
    return reach > start + 1 ? reach : start + 1;
}

/* parents(start, end, group, tolerance) -> bytes of int64 parent positions (sorted order, -1). */
static PyObject *parents(PyObject *self, PyObject *args) {
    PyObject *s_obj, *e_obj, *g_obj;
    long long tolerance;
    held_buffer s = {0}, e = {0}, g = {0};
    PyObject *out = NULL;
    int64_t *stack = NULL;
    if (!PyArg_ParseTuple(args, "OOOL", &s_obj, &e_obj, &g_obj, &tolerance))
        return NULL;
    if (get_int64(s_obj, &s, "start") < 0 || get_int64(e_obj, &e, "end") < 0 || get_int64(g_obj, &g, "group") < 0)
        goto done;
    Py_ssize_t n = s.view.len / 8;
    if (e.view.len / 8 != n || g.view.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "parents: columns of different lengths");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, n * 8);
    stack = malloc((n ? n : 1) * sizeof(int64_t));
    if (!out || !stack) {
        Py_CLEAR(out);
        PyErr_NoMemory();
        goto done;
    }
    const int64_t *start = s.view.buf, *end = e.view.buf, *group = g.view.buf;
    int64_t *parent = (int64_t *)PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t depth = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i && group[i] != group[i - 1])
            depth = 0;
        int64_t need = need_of(start[i], end[i], tolerance);
        while (depth && end[stack[depth - 1]] < need)
            depth--;
        parent[i] = depth ? stack[depth - 1] : -1;
        stack[depth++] = i;
    }
    Py_END_ALLOW_THREADS
done:
    free(stack);
    release(&s);
    release(&e);
    release(&g);
    return out;
}

/* enclosing(start, end, group, q_start, q_end, q_group, tolerance) -> bytes of int64: per query
 * (sorted by group, start), the sorted position of its innermost enclosing interval, -1.
 * Intervals that start at or before a query come before it; the query is looked up down the
 * stack without popping (a query is not an interval: what it would pop may enclose later ones). */
static PyObject *enclosing(PyObject *self, PyObject *args) {
    PyObject *objs[6];
    long long tolerance;
    held_buffer b[6];
    memset(b, 0, sizeof b);
    const char *names[6] = {"start", "end", "group", "query start", "query end", "query group"};
    PyObject *out = NULL;
    int64_t *stack = NULL;
    if (!PyArg_ParseTuple(args, "OOOOOOL", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5], &tolerance))
        return NULL;
    for (int k = 0; k < 6; k++)
        if (get_int64(objs[k], &b[k], names[k]) < 0)
            goto done;
    Py_ssize_t n = b[0].view.len / 8, m = b[3].view.len / 8;
    if (b[1].view.len / 8 != n || b[2].view.len / 8 != n || b[4].view.len / 8 != m || b[5].view.len / 8 != m) {
        PyErr_SetString(PyExc_ValueError, "enclosing: columns of different lengths");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, m * 8);
    stack = malloc((n ? n : 1) * sizeof(int64_t));
    if (!out || !stack) {
        Py_CLEAR(out);
        PyErr_NoMemory();
        goto done;
    }
    const int64_t *start = b[0].view.buf, *end = b[1].view.buf, *group = b[2].view.buf;
    const int64_t *qs = b[3].view.buf, *qe = b[4].view.buf, *qg = b[5].view.buf;
    int64_t *found = (int64_t *)PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t depth = 0, i = 0;
    for (Py_ssize_t q = 0; q < m; q++) {
        /* Intervals before the query: earlier groups, or its group starting at or before it. */
        while (i < n && (group[i] < qg[q] || (group[i] == qg[q] && start[i] <= qs[q]))) {
            if (i && group[i] != group[i - 1])
                depth = 0;
            int64_t need = need_of(start[i], end[i], tolerance);
            while (depth && end[stack[depth - 1]] < need)
                depth--;
            stack[depth++] = i;
            i++;
        }
        found[q] = -1;
        if (!depth || group[stack[depth - 1]] != qg[q])
            continue;
        int64_t need = need_of(qs[q], qe[q], tolerance);
        for (Py_ssize_t k = depth - 1; k >= 0; k--) {
            if (end[stack[k]] >= need) {
                found[q] = stack[k];
                break;
            }
        }
    }
    Py_END_ALLOW_THREADS
done:
    free(stack);
    for (int k = 0; k < 6; k++)
        release(&b[k]);
    return out;
}

static PyMethodDef methods[] = {
    {"parents", parents, METH_VARARGS, "Innermost enclosing interval of each sorted interval (positions, -1)."},
    {"enclosing", enclosing, METH_VARARGS, "Innermost enclosing interval of each sorted query (positions, -1)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nesting", NULL, -1, methods};

PyMODINIT_FUNC PyInit__nesting(void) {
    return PyModule_Create(&module);
}
