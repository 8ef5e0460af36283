/* Kineto (PyTorch profiler) Chrome-trace JSON -> columns, in one pass, without the GIL.
 *
 * The native twin of decode.py's msgspec path (decode_events_msgspec, the reference): the same
 * columns, codes, top-level keys and metadata events, from a validating JSON tokenizer that keeps
 * no per-event object.  decode.py's _from_native wraps what scan() returns.
 *
 * scan(data) -> (strings, x, x_gpu, x_op, flows, instants, metadata, top, other_events)
 *   data       a bytes-like object: the whole (uncompressed) document
 *   strings    list of str, each distinct string once (codes are indexes into it)
 *   x ... instants   dict column name -> Column (a buffer with a typed format: np.asarray gives
 *              the column's array without a copy), in decode.py's column order and dtypes
 *   metadata   list of bytes: the JSON text of each ph "M" event, in order
 *   top        list of (key, bytes): the JSON text of each top-level value but traceEvents
 *   other_events   the count of events of another phase
 * Bad input raises decode.TraceError (a ValueError) naming what is wrong and its byte offset.
 *
 * Where the reference decodes a value with msgspec and the value is unusual (a float or an
 * object in a text arg, grid / block not [int, int, int]), the scanner calls decode.py's own
 * _compact_json / _dim3 on its text (with the GIL), so those rare cases are the reference's by
 * construction; the common ones (strings, ints, lists of them) are written here.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#define CAN_RELEASE_PAGES 1
#endif
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__GLIBC__) || defined(__APPLE__)
#include <locale.h>
#if defined(__APPLE__)
#include <xlocale.h>
#endif
#define HAVE_STRTOD_L 1
static locale_t c_locale;
#endif

#define DECODE_MODULE "tb_hwprof.readers.torch.decode"
/* Python's default int_max_str_digits: msgspec refuses a longer integer ("Integer value out of
 * range"), counting the sign. */
#define MAX_INT_CHARS 4300

/* ------------------------------------------------------------------ growable buffers */
typedef struct {
    uint8_t *data;
    size_t len, cap;
} buf_t;

static int buf_reserve(buf_t *b, size_t extra) {
    if (extra <= b->cap - b->len)
        return 1;
    size_t need = b->len + extra, cap = b->cap ? b->cap : 256;
    if (need < b->len)
        return 0;
    while (cap < need) {
        if (cap > SIZE_MAX / 2)
            return 0;
        cap *= 2;
    }
    uint8_t *d = realloc(b->data, cap);
    if (!d)
        return 0;
    b->data = d;
    b->cap = cap;
    return 1;
}

static void buf_free(buf_t *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ------------------------------------------------------------------ the columns */
typedef struct {
    const char *name;
    char format; /* struct-module format: q int64, i int32, d float64, b int8, ? bool */
    uint8_t size;
} colspec;

#define MAX_COLS 20
typedef struct {
    const colspec *spec;
    int ncols;
    size_t rows, cap;
    uint8_t *cols[MAX_COLS];
} table;

/* Orders and names as decode.py's X_COLUMNS, X_GPU_COLUMNS, X_OP_COLUMNS, FLOW_COLUMNS, INSTANT_COLUMNS. */
enum { X_CAT, X_NAME, X_PID, X_TID, X_TS, X_DUR, X_EXT, X_CORR, X_N };
static const colspec X_SPEC[X_N] = {
    {"cat", 'i', 4}, {"name", 'i', 4}, {"pid", 'q', 8}, {"tid", 'q', 8},
    {"ts_ns", 'q', 8}, {"dur_ns", 'q', 8}, {"ext", 'q', 8}, {"corr", 'q', 8}};
enum { G_ROW, G_DEVICE, G_STREAM, G_CONTEXT, G_BYTES, G_REGS, G_SHMEM, G_GRAPH, G_BPSM, G_WPSM, G_OCC,
       G_KIND, G_GRID, G_BLOCK = G_GRID + 3, G_N = G_BLOCK + 3 };
static const colspec G_SPEC[G_N] = {
    {"row", 'q', 8}, {"device", 'q', 8}, {"stream", 'q', 8}, {"context", 'q', 8}, {"bytes", 'q', 8},
    {"registers", 'q', 8}, {"shared_mem", 'q', 8}, {"graph_id", 'q', 8},
    {"blocks_per_sm", 'd', 8}, {"warps_per_sm", 'd', 8}, {"est_occupancy_pct", 'd', 8},
    {"kind", 'i', 4}, {"grid_x", 'q', 8}, {"grid_y", 'q', 8}, {"grid_z", 'q', 8},
    {"block_x", 'q', 8}, {"block_y", 'q', 8}, {"block_z", 'q', 8}};
enum { O_ROW, O_SEQ, O_FWD, O_PYID, O_PYPAR, O_INN, O_OUTN, O_GSIZE, O_DIMS, O_TYPES, O_CONCRETE, O_COLL,
       O_DTYPE, O_N };
static const colspec O_SPEC[O_N] = {
    {"row", 'q', 8}, {"seq", 'q', 8}, {"fwd_tid", 'q', 8}, {"py_id", 'q', 8}, {"py_parent", 'q', 8},
    {"in_nelems", 'q', 8}, {"out_nelems", 'q', 8}, {"group_size", 'q', 8},
    {"input_dims", 'i', 4}, {"input_types", 'i', 4}, {"concrete_inputs", 'i', 4},
    {"collective", 'i', 4}, {"dtype", 'i', 4}};
enum { F_PH, F_CAT, F_NAME, F_ID, F_PID, F_TID, F_TS, F_BP, F_N };
static const colspec F_SPEC[F_N] = {
    {"ph", 'b', 1}, {"cat", 'i', 4}, {"name", 'i', 4}, {"id", 'q', 8}, {"pid", 'q', 8},
    {"tid", 'q', 8}, {"ts_ns", 'q', 8}, {"bp_enclosing", '?', 1}};
enum { I_CAT, I_NAME, I_PID, I_TID, I_TS, I_BYTES, I_ADDR, I_TALLOC, I_TRES, I_DEVID, I_DEVTYPE, I_N };
static const colspec I_SPEC[I_N] = {
    {"cat", 'i', 4}, {"name", 'i', 4}, {"pid", 'q', 8}, {"tid", 'q', 8}, {"ts_ns", 'q', 8},
    {"bytes", 'q', 8}, {"addr", 'q', 8}, {"total_allocated", 'q', 8}, {"total_reserved", 'q', 8},
    {"device_id", 'q', 8}, {"device_type", 'q', 8}};

#define I64(t, c) ((int64_t *)(t)->cols[c])
#define I32(t, c) ((int32_t *)(t)->cols[c])
#define F64(t, c) ((double *)(t)->cols[c])

/* ------------------------------------------------------------------ the string table */
typedef struct {
    size_t off, len;
    uint64_t hash;
} entry;

typedef struct {
    buf_t bytes;   /* every string's UTF-8, one after the other */
    buf_t entries; /* entry[count] */
    int32_t *slots;
    size_t mask, count;
} interner;

static inline uint64_t read64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (n * 0xff51afd7ed558ccdULL), h2 = 0;
    while (n >= 16) { /* two lanes: long kernel names hash at twice the speed of one chain */
        h = (h ^ read64(p)) * 0xbf58476d1ce4e5b9ULL;
        h2 = (h2 ^ read64(p + 8)) * 0x94d049bb133111ebULL;
        h ^= h >> 29;
        h2 ^= h2 >> 31;
        p += 16;
        n -= 16;
    }
    h ^= h2 * 0xff51afd7ed558ccdULL;
    if (n >= 8) {
        h = (h ^ read64(p)) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t tail = 0;
    memcpy(&tail, p, n);
    h = (h ^ tail) * 0x94d049bb133111ebULL;
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 32);
}

/* ------------------------------------------------------------------ the scanner's state */
typedef struct {
    const uint8_t *p; /* in the input, or NULL: in the event arena at off */
    size_t off, n;
} strref;

typedef struct {
    const uint8_t *start;
    size_t len;
    uint8_t is_int, neg, inexact; /* inexact: significant digits past the 19 kept in mant */
    uint64_t mant;                /* the first (up to) 19 significant digits */
    int32_t exp10, sig;           /* value = mant * 10**exp10 (when !inexact); sig digits in mant */
    uint64_t low64;               /* an integer's magnitude modulo 2**64 */
} number;

enum { K_NONE, K_INT, K_FLOAT, K_STR };
typedef struct {
    uint8_t kind;
    number num;
    strref str;
} value_slot;

enum { R_NULL, R_STR, R_TEXT, R_DIMS, R_PYTHON };
typedef struct {
    uint8_t kind;
    strref text;             /* R_STR: the string; R_TEXT: compact JSON text in the arena */
    int64_t dims[3];         /* R_DIMS */
    const uint8_t *start, *end; /* R_PYTHON: the raw value, for decode.py */
} raw_slot;

/* Event keys msgspec's Event struct reads (others are skipped). */
enum { E_PH, E_CAT, E_NAME, E_PID, E_TID, E_TS, E_DUR, E_ID, E_BP, E_ARGS, E_N };
/* Args keys: numbers (Union[int, float, str, None]), then text and grid / block (msgspec.Raw). */
enum { A_EXT0, A_EXT1, A_CORR, A_DEVICE, A_STREAM, A_CONTEXT, A_BYTES, A_REGS, A_SHMEM, A_GRAPH,
       A_BPSM, A_WPSM, A_OCC, A_SEQ, A_FWD, A_PYID, A_PYPAR, A_INN, A_OUTN, A_GSIZE,
       A_MBYTES, A_ADDR, A_TALLOC, A_TRES, A_DEVID, A_DEVTYPE, A_NUM };
enum { T_KIND, T_DIMS, T_TYPES, T_CONCRETE, T_COLL, T_DTYPE, T_GRID, T_BLOCK, T_NUM };

#define GPU_NUM_MASK ((1u << A_DEVICE) | (1u << A_STREAM) | (1u << A_CONTEXT) | (1u << A_BYTES) | \
                      (1u << A_REGS) | (1u << A_SHMEM) | (1u << A_GRAPH) | (1u << A_BPSM) |      \
                      (1u << A_WPSM) | (1u << A_OCC))
#define OP_NUM_MASK ((1u << A_SEQ) | (1u << A_FWD) | (1u << A_PYID) | (1u << A_PYPAR) | (1u << A_INN) | \
                     (1u << A_OUTN) | (1u << A_GSIZE))
#define GPU_RAW_MASK ((1u << T_KIND) | (1u << T_GRID) | (1u << T_BLOCK))
#define OP_RAW_MASK ((1u << T_DIMS) | (1u << T_TYPES) | (1u << T_CONCRETE) | (1u << T_COLL) | (1u << T_DTYPE))

typedef struct {
    const uint8_t *base, *end;
    const uint8_t *event; /* the event being read */
    jmp_buf fail_jump;
    char message[240];
    int out_of_memory;
    PyObject *exc_type, *exc_value, *exc_tb; /* an error Python raised in a callback */
    PyThreadState *thread;
    PyObject *decode_module;
    PyObject *kept; /* decode.py's results whose text is in use */

    buf_t arena;   /* this event's decoded strings and compact texts */
    buf_t compact; /* a text arg's compact JSON while it is written */
    buf_t stack;   /* open containers while a value is skipped */
    buf_t digits;  /* a number's text, NUL-terminated, for strtod */
    interner strings;
    table x, gpu, op, flows, instants;
    buf_t metadata; /* (start, end) offsets of the ph "M" events */
    buf_t top;      /* top_item[] */
    buf_t top_keys;
    int64_t other;
    /* scan_part: the part ends where an event starts at stop_at (landed), or begins at resume_at */
    const uint8_t *stop_at, *resume_at;
    int landed, restarted;
    /* release: the data is a read-only map of the file; the pages behind the scan are handed back
     * (released: where the next release starts) */
    int release;
    const uint8_t *released;
    buf_t string_id_rows; /* flow rows whose id is a string (its code: remapped when parts join) */

    /* the event being read */
    uint32_t event_mask, num_mask, raw_mask;
    int args_present;
    value_slot ev[E_N];
    value_slot num[A_NUM];
    raw_slot raw[T_NUM];
} scanner;

typedef struct {
    size_t key_off, key_len;
    size_t start, end;
} top_item;

/* ------------------------------------------------------------------ failing */
static void fail(scanner *s, const uint8_t *at, const char *what) __attribute__((noreturn));
static void fail(scanner *s, const uint8_t *at, const char *what) {
    snprintf(s->message, sizeof s->message, "%s at byte %zu", what, (size_t)(at - s->base));
    longjmp(s->fail_jump, 1);
}

static void out_of_memory(scanner *s) __attribute__((noreturn));
static void out_of_memory(scanner *s) {
    s->out_of_memory = 1;
    longjmp(s->fail_jump, 1);
}

static inline void reserve(scanner *s, buf_t *b, size_t extra) {
    if (!buf_reserve(b, extra))
        out_of_memory(s);
}

static inline void append(scanner *s, buf_t *b, const void *data, size_t n) {
    if (n == 0) /* b->data may still be NULL, and memcpy must not see it */
        return;
    reserve(s, b, n);
    memcpy(b->data + b->len, data, n);
    b->len += n;
}

static inline void append_byte(scanner *s, buf_t *b, uint8_t c) {
    reserve(s, b, 1);
    b->data[b->len++] = c;
}

/* ------------------------------------------------------------------ tables and the interner */
static void table_init(table *t, const colspec *spec, int ncols) {
    memset(t, 0, sizeof *t);
    t->spec = spec;
    t->ncols = ncols;
}

static void table_free(table *t) {
    for (int c = 0; c < t->ncols; c++) {
        free(t->cols[c]);
        t->cols[c] = NULL;
    }
    t->rows = t->cap = 0;
}

/* The index of a new row (every column has room for it). */
static size_t table_row(scanner *s, table *t) {
    if (t->rows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 4096;
        for (int c = 0; c < t->ncols; c++) {
            uint8_t *d = realloc(t->cols[c], cap * t->spec[c].size);
            if (!d)
                out_of_memory(s);
            t->cols[c] = d;
        }
        t->cap = cap;
    }
    return t->rows++;
}

static void interner_free(interner *in) {
    buf_free(&in->bytes);
    buf_free(&in->entries);
    free(in->slots);
    in->slots = NULL;
    in->mask = in->count = 0;
}

static void interner_grow(scanner *s, interner *in) {
    size_t size = in->slots ? (in->mask + 1) * 2 : 4096;
    int32_t *slots = malloc(size * sizeof *slots);
    if (!slots)
        out_of_memory(s);
    memset(slots, 0xff, size * sizeof *slots);
    const entry *entries = (const entry *)in->entries.data;
    for (size_t code = 0; code < in->count; code++) {
        size_t i = entries[code].hash & (size - 1);
        while (slots[i] >= 0)
            i = (i + 1) & (size - 1);
        slots[i] = (int32_t)code;
    }
    free(in->slots);
    in->slots = slots;
    in->mask = size - 1;
}

static int32_t intern(scanner *s, const uint8_t *p, size_t n) {
    interner *in = &s->strings;
    if (!in->slots)
        interner_grow(s, in);
    uint64_t h = hash_bytes(p, n);
    size_t i = h & in->mask;
    const entry *entries = (const entry *)in->entries.data;
    for (int32_t code; (code = in->slots[i]) >= 0; i = (i + 1) & in->mask) {
        const entry *e = &entries[code];
        if (e->hash == h && e->len == n && memcmp(in->bytes.data + e->off, p, n) == 0)
            return code;
    }
    if (in->count >= INT32_MAX)
        fail(s, s->event, "more distinct strings than int32 codes");
    entry e = {in->bytes.len, n, h};
    append(s, &in->bytes, p, n);
    append(s, &in->entries, &e, sizeof e);
    int32_t code = (int32_t)in->count++;
    in->slots[i] = code;
    if (in->count * 2 > in->mask + 1)
        interner_grow(s, in);
    return code;
}

static inline const uint8_t *ref_ptr(scanner *s, const strref *r) {
    return r->p ? r->p : s->arena.data + r->off;
}

static inline int32_t intern_ref(scanner *s, const strref *r) {
    return intern(s, ref_ptr(s, r), r->n);
}

/* ------------------------------------------------------------------ the tokenizer
 * Each reader takes the position p and returns the position after what it read, so that p lives
 * in a register (kept in the scanner, every step would wait for the previous one's store). */
static uint8_t is_ws[256];
static uint8_t plain[256]; /* 1 for the bytes a string holds as they are: printable ASCII but '"' '\\' */

static inline const uint8_t *skip_ws(const uint8_t *p, const uint8_t *end) {
    while (p < end && is_ws[*p])
        p++;
    return p;
}

static inline int at(const uint8_t *p, const uint8_t *end) {
    return p < end ? *p : -1;
}

static void fail_at(scanner *s, const uint8_t *p, const char *what) __attribute__((noreturn));
static void fail_at(scanner *s, const uint8_t *p, const char *what) {
    fail(s, p, p < s->end ? what : "not valid JSON: truncated");
}

static inline const uint8_t *expect(scanner *s, const uint8_t *p, uint8_t c, const char *what) {
    if (p >= s->end || *p != c)
        fail_at(s, p, what);
    return p + 1;
}

static const uint8_t *literal(scanner *s, const uint8_t *p, const char *word, size_t n) {
    size_t left = (size_t)(s->end - p);
    if (left < n || memcmp(p, word, n) != 0)
        fail(s, p, left < n && memcmp(p, word, left) == 0 ? "not valid JSON: truncated"
                                                          : "not valid JSON: invalid literal");
    return p + n;
}

static inline const uint8_t *find_special(const uint8_t *p, const uint8_t *end) {
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(' ');
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        /* signed compare: bytes >= 0x80 are negative, so below ' ' as control characters are */
        __m128i special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                       _mm_cmplt_epi8(v, space));
        int mask = _mm_movemask_epi8(special);
        if (mask)
            return p + __builtin_ctz((unsigned)mask);
        p += 16;
    }
#endif
    while (p < end && plain[*p])
        p++;
    return p;
}

/* One UTF-8 sequence at p (its first byte >= 0x80): the byte after it. */
static const uint8_t *utf8_sequence(scanner *s, const uint8_t *p) {
    uint8_t c = p[0], lo = 0x80, hi = 0xBF;
    size_t more;
    if (c < 0xC2)
        fail(s, p, "not valid JSON: invalid UTF-8 in a string");
    if (c < 0xE0) {
        more = 1;
    } else if (c < 0xF0) {
        more = 2;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c < 0xF5) {
        more = 3;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        if (c == 0xF4)
            hi = 0x8F; /* past U+10FFFF */
    } else {
        fail(s, p, "not valid JSON: invalid UTF-8 in a string");
    }
    if ((size_t)(s->end - p) <= more || p[1] < lo || p[1] > hi)
        fail(s, p, "not valid JSON: invalid UTF-8 in a string");
    for (size_t i = 2; i <= more; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            fail(s, p, "not valid JSON: invalid UTF-8 in a string");
    return p + 1 + more;
}

static uint32_t hex4(scanner *s, const uint8_t *p) {
    if (s->end - p < 4)
        fail(s, p, "not valid JSON: truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            fail(s, p + i, "not valid JSON: invalid \\u escape");
        v = v * 16 + (uint32_t)d;
    }
    return v;
}

static void append_utf8(scanner *s, buf_t *b, uint32_t cp) {
    uint8_t out[4];
    size_t n;
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        n = 1;
    } else if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        out[0] = (uint8_t)(0xF0 | (cp >> 18));
        out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (uint8_t)(0x80 | (cp & 0x3F));
        n = 4;
    }
    append(s, b, out, n);
}

/* One escape at p ('\\'), its character appended to the arena when decoding: the byte after it. */
static const uint8_t *escape(scanner *s, const uint8_t *p, int decode) {
    if (s->end - p < 2)
        fail(s, p, "not valid JSON: truncated");
    uint8_t c;
    switch (p[1]) {
    case '"': c = '"'; break;
    case '\\': c = '\\'; break;
    case '/': c = '/'; break;
    case 'b': c = '\b'; break;
    case 'f': c = '\f'; break;
    case 'n': c = '\n'; break;
    case 'r': c = '\r'; break;
    case 't': c = '\t'; break;
    case 'u': {
        uint32_t cp = hex4(s, p + 2);
        const uint8_t *q = p + 6;
        if (cp >= 0xD800 && cp <= 0xDBFF) { /* a high surrogate needs its low half next */
            if (s->end - q < 2 || q[0] != '\\' || q[1] != 'u')
                fail(s, q, "not valid JSON: unpaired UTF-16 surrogate");
            uint32_t low = hex4(s, q + 2);
            if (low < 0xDC00 || low > 0xDFFF)
                fail(s, q, "not valid JSON: unpaired UTF-16 surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            q += 6;
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail(s, p, "not valid JSON: unpaired UTF-16 surrogate");
        }
        if (decode)
            append_utf8(s, &s->arena, cp);
        return q;
    }
    default:
        fail(s, p, "not valid JSON: invalid escape in a string");
    }
    if (decode)
        append_byte(s, &s->arena, c);
    return p + 2;
}

/* The string at p ('"'), validated, into *out; escaped and `decode`: its text decoded into the arena. */
static const uint8_t *scan_string(scanner *s, const uint8_t *p, int decode, strref *out) {
    const uint8_t *start = p + 1, *run = start, *end = s->end;
    int escaped = 0;
    size_t arena_start = 0;
    p = start;
    for (;;) {
        p = find_special(p, end);
        if (p >= end)
            fail(s, start - 1, "not valid JSON: unterminated string");
        uint8_t c = *p;
        if (c == '"')
            break;
        if (c >= 0x80) {
            p = utf8_sequence(s, p);
        } else if (c == '\\') {
            if (decode) {
                if (!escaped)
                    arena_start = s->arena.len;
                append(s, &s->arena, run, (size_t)(p - run));
            }
            escaped = 1;
            p = escape(s, p, decode);
            run = p;
        } else {
            fail(s, p, "not valid JSON: control character in a string");
        }
    }
    if (escaped && decode) {
        append(s, &s->arena, run, (size_t)(p - run));
        out->p = NULL;
        out->off = arena_start;
        out->n = s->arena.len - arena_start;
    } else {
        out->p = start;
        out->off = 0;
        out->n = (size_t)(p - start);
    }
    return p + 1;
}

static inline int is_digit(int c) {
    return c >= '0' && c <= '9';
}

/* 8 ASCII digits at p as their value (1), or 0 when they are not all digits (simdjson's SWAR). */
static inline int eight_digits(const uint8_t *p, uint64_t *value) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v = read64(p);
    if ((((v & 0xF0F0F0F0F0F0F0F0ULL) | (((v + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) >> 4))) !=
        0x3333333333333333ULL)
        return 0;
    v -= 0x3030303030303030ULL;
    v = (v * 10) + (v >> 8);
    v = (((v & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32))) +
         (((v >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >> 32;
    *value = v;
    return 1;
#else
    (void)p;
    (void)value;
    return 0;
#endif
}

/* The number at p ('-' or a digit), by JSON's grammar, into *n. */
static const uint8_t *parse_number(scanner *s, const uint8_t *p, number *n) {
    const uint8_t *end = s->end;
    uint64_t mant = 0, low = 0, eight;
    int32_t sig = 0;
    int64_t exp10 = 0;
    int inexact = 0;
    n->start = p;
    n->neg = 0;
    n->is_int = 1;
    if (*p == '-') {
        n->neg = 1;
        p++;
    }
    if (p >= end)
        fail(s, p, "not valid JSON: truncated");
    if (*p == '0') {
        p++;
    } else if (is_digit(*p)) {
        /* up to 19 digits (< 2**64) in mant, 8 at a time where it can */
        while (sig <= 11 && end - p >= 8 && eight_digits(p, &eight)) {
            mant = mant * 100000000ULL + eight;
            sig += 8;
            p += 8;
        }
        for (; sig < 19 && p < end && is_digit(*p); p++, sig++)
            mant = mant * 10 + (unsigned)(*p - '0');
        low = mant;
        for (; p < end && is_digit(*p); p++) { /* past 19 digits: low wraps, mant keeps its 19 */
            unsigned d = *p - '0';
            low = low * 10 + d;
            if (exp10 < 1000000)
                exp10++;
            inexact |= d != 0;
        }
    } else {
        fail(s, p, "not valid JSON: invalid number");
    }
    if (p < end && *p == '.') {
        n->is_int = 0;
        p++;
        if (p >= end || !is_digit(*p))
            fail(s, p, "not valid JSON: invalid number");
        for (; p < end && is_digit(*p); p++) {
            unsigned d = *p - '0';
            if (mant == 0 && d == 0) {
                if (exp10 > -1000000)
                    exp10--;
            } else if (sig < 19) {
                mant = mant * 10 + d;
                sig++;
                exp10--;
            } else {
                inexact |= d != 0;
            }
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        n->is_int = 0;
        p++;
        int negative = 0;
        if (p < end && (*p == '+' || *p == '-'))
            negative = *p++ == '-';
        if (p >= end || !is_digit(*p))
            fail(s, p, "not valid JSON: invalid number");
        int64_t e = 0;
        for (; p < end && is_digit(*p); p++)
            if (e < 1000000)
                e = e * 10 + (*p - '0');
        exp10 += negative ? -e : e;
    }
    n->len = (size_t)(p - n->start);
    n->mant = mant;
    n->sig = sig;
    n->exp10 = (int32_t)exp10; /* |exp10| <= 2000000 */
    n->inexact = (uint8_t)inexact;
    n->low64 = low;
    return p;
}

/* A number at p validated and passed over (a value nobody reads). */
static const uint8_t *skip_number(scanner *s, const uint8_t *p) {
    const uint8_t *end = s->end;
    if (*p == '-')
        p++;
    if (p >= end)
        fail(s, p, "not valid JSON: truncated");
    if (*p == '0')
        p++;
    else if (is_digit(*p))
        while (++p < end && is_digit(*p)) {
        }
    else
        fail(s, p, "not valid JSON: invalid number");
    if (p < end && *p == '.') {
        if (++p >= end || !is_digit(*p))
            fail_at(s, p, "not valid JSON: invalid number");
        while (++p < end && is_digit(*p)) {
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        if (++p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || !is_digit(*p))
            fail_at(s, p, "not valid JSON: invalid number");
        while (++p < end && is_digit(*p)) {
        }
    }
    return p;
}

static const double POW10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
#if defined(__x86_64__) && LDBL_MANT_DIG == 64
static long double POW10L[28]; /* exact: 5**27 < 2**64 */
#endif

static double slow_double(scanner *s, const number *n) {
    s->digits.len = 0;
    append(s, &s->digits, n->start, n->len);
    append_byte(s, &s->digits, 0);
#ifdef HAVE_STRTOD_L
    return strtod_l((const char *)s->digits.data, NULL, c_locale);
#else
    PyEval_RestoreThread(s->thread);
    double v = PyOS_string_to_double((const char *)s->digits.data, NULL, NULL);
    if (v == -1.0 && PyErr_Occurred()) /* not for JSON's grammar: overflow gives inf here */
        PyErr_Clear();
    s->thread = PyEval_SaveThread();
    return v;
#endif
}

/* The correctly rounded double of a number's text (inf past DBL_MAX), as strtod and msgspec read it. */
static double number_double(scanner *s, const number *n) {
    if (!n->inexact) {
        if (n->mant == 0)
            return n->neg ? -0.0 : 0.0;
        int32_t e = n->exp10;
        /* exact operands, one rounding (Clinger's fast path) */
        if (n->mant <= (1ULL << 53) && e >= -22 && e <= 22) {
            double v = (double)n->mant;
            v = e < 0 ? v / POW10[-e] : v * POW10[e];
            return n->neg ? -v : v;
        }
#if defined(__x86_64__) && LDBL_MANT_DIG == 64
        /* 19-digit mantissas (today's µs timestamps) in x87's 64-bit precision, where 10**27 and
         * below are exact: the second rounding, to double, is right unless the first landed
         * exactly half-way between two doubles (low 11 bits 0x400), left to strtod. */
        if (e >= -27 && e <= 27) {
            long double q = e < 0 ? (long double)n->mant / POW10L[-e] : (long double)n->mant * POW10L[e];
            uint64_t bits;
            memcpy(&bits, &q, 8);
            if ((bits & 0x7FF) != 0x400) {
                double v = (double)q;
                return n->neg ? -v : v;
            }
        }
#endif
    }
    return slow_double(s, n);
}

/* A float as the reference's int columns hold it: int(value) (truncated), its low 64 bits. */
static int64_t low64_of_double(double d) {
    if (d > -9223372036854775808.0 && d < 9223372036854775808.0)
        return (int64_t)d;
    int e;
    double m = frexp(fabs(d), &e); /* |d| = m * 2**e, an integer >= 2**63 */
    uint64_t mi = (uint64_t)ldexp(m, 53);
    int shift = e - 53;
    uint64_t low = shift >= 64 ? 0 : mi << shift;
    return (int64_t)(d < 0 ? 0 - low : low);
}

static int64_t number_int64(scanner *s, const number *n) {
    if (n->is_int)
        return (int64_t)(n->neg ? 0 - n->low64 : n->low64);
    return low64_of_double(number_double(s, n));
}

/* msgspec refuses a typed number past DBL_MAX ("Number out of range") or an int longer than
 * Python reads ("Integer value out of range"). */
static void check_range(scanner *s, const number *n) {
    if (n->is_int) {
        if (n->len > MAX_INT_CHARS)
            fail(s, n->start, "not a Chrome trace: integer value out of range");
    } else if (n->mant != 0 && (int64_t)n->exp10 + n->sig > 308 && isinf(number_double(s, n))) {
        fail(s, n->start, "not a Chrome trace: number out of range");
    }
}

/* A number the reference turns into a float (ts, dur, a float column): past DBL_MAX is an error. */
static double finite_double(scanner *s, const number *n) {
    double v = number_double(s, n);
    if (isinf(v))
        fail(s, n->start, "not a Chrome trace: number out of range for a float");
    return v;
}

/* ------------------------------------------------------------------ skipping a value */
enum { IN_ARRAY = 1, IN_OBJECT = 2 };

/* An object member's key at p (its text decoded into the arena if escaped): the position after ':'. */
static const uint8_t *member_key(scanner *s, const uint8_t *p, strref *key) {
    const uint8_t *end = s->end;
    if (p >= end || *p != '"')
        fail_at(s, p, "not valid JSON: expected a key");
    p = skip_ws(scan_string(s, p, 1, key), end);
    return skip_ws(expect(s, p, ':', "not valid JSON: expected ':'"), end);
}

/* A key nobody reads, validated: the position after ':'. */
static const uint8_t *skip_key(scanner *s, const uint8_t *p) {
    const uint8_t *end = s->end;
    strref key;
    if (p >= end || *p != '"')
        fail_at(s, p, "not valid JSON: expected a key");
    p = skip_ws(scan_string(s, p, 0, &key), end);
    return skip_ws(expect(s, p, ':', "not valid JSON: expected ':'"), end);
}

/* The value at p, validated (strings' UTF-8 and escapes, numbers' grammar), without recursion. */
static const uint8_t *skip_value(scanner *s, const uint8_t *p) {
    const uint8_t *end = s->end;
    buf_t *stack = &s->stack;
    size_t base = stack->len;
    strref ignored;
    for (;;) {
        int c = at(p, end);
        switch (c) {
        case '{':
            p = skip_ws(p + 1, end);
            if (at(p, end) == '}') {
                p++;
                break;
            }
            append_byte(s, stack, IN_OBJECT);
            p = skip_key(s, p);
            continue;
        case '[':
            p = skip_ws(p + 1, end);
            if (at(p, end) == ']') {
                p++;
                break;
            }
            append_byte(s, stack, IN_ARRAY);
            continue;
        case '"':
            p = scan_string(s, p, 0, &ignored);
            break;
        case 't':
            p = literal(s, p, "true", 4);
            break;
        case 'f':
            p = literal(s, p, "false", 5);
            break;
        case 'n':
            p = literal(s, p, "null", 4);
            break;
        default:
            if (c == '-' || is_digit(c)) {
                p = skip_number(s, p);
                break;
            }
            fail_at(s, p, "not valid JSON: unexpected character");
        }
        /* after a value: close what ends here, or go on to the next element */
        for (;;) {
            if (stack->len == base)
                return p;
            uint8_t in = stack->data[stack->len - 1];
            p = skip_ws(p, end);
            c = at(p, end);
            if (c == ',') {
                p = skip_ws(p + 1, end);
                if (in == IN_OBJECT)
                    p = skip_key(s, p);
                break;
            }
            if (c == (in == IN_OBJECT ? '}' : ']')) {
                p++;
                stack->len--;
                continue;
            }
            fail_at(s, p, "not valid JSON: expected ',' or a closing bracket");
        }
    }
}

/* After an object member's value: the position of the next key (*more = 1) or after '}' (0). */
static inline const uint8_t *next_member(scanner *s, const uint8_t *p, int *more) {
    const uint8_t *end = s->end;
    p = skip_ws(p, end);
    if (p < end && *p == ',') {
        *more = 1;
        return skip_ws(p + 1, end);
    }
    if (p < end && *p == '}') {
        *more = 0;
        return p + 1;
    }
    fail_at(s, p, "not valid JSON: expected ',' or '}'");
}

/* ------------------------------------------------------------------ decode.py's own functions */
static PyObject *decode_attr(scanner *s, const char *name) {
    if (!s->decode_module)
        s->decode_module = PyImport_ImportModule(DECODE_MODULE);
    return s->decode_module ? PyObject_GetAttrString(s->decode_module, name) : NULL;
}

/* decode.py's `name`(raw bytes of the value) with the GIL; a Python error stops the scan. */
static PyObject *call_reference(scanner *s, const char *name, const uint8_t *start, const uint8_t *end) {
    PyEval_RestoreThread(s->thread);
    PyObject *result = NULL, *fn = decode_attr(s, name);
    if (fn) {
        result = PyObject_CallFunction(fn, "y#", (const char *)start, (Py_ssize_t)(end - start));
        Py_DECREF(fn);
    }
    if (!result)
        PyErr_Fetch(&s->exc_type, &s->exc_value, &s->exc_tb);
    s->thread = PyEval_SaveThread();
    if (!result)
        longjmp(s->fail_jump, 1);
    return result;
}

/* The code of _compact_json(raw): its str's UTF-8 interned, -1 for None.  The str is kept (in
 * s->kept, until the scan ends) so that its UTF-8 stays valid while interned without the GIL. */
static int32_t reference_text_code(scanner *s, const raw_slot *r) {
    PyObject *text = call_reference(s, "_compact_json", r->start, r->end);
    PyEval_RestoreThread(s->thread);
    const char *utf8 = NULL;
    Py_ssize_t n = 0;
    int ok = text == Py_None;
    if (!ok && PyUnicode_Check(text) && (utf8 = PyUnicode_AsUTF8AndSize(text, &n)) != NULL)
        ok = (s->kept || (s->kept = PyList_New(0))) && PyList_Append(s->kept, text) == 0;
    else if (!ok && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "_compact_json returned neither str nor None");
    Py_DECREF(text);
    if (!ok)
        PyErr_Fetch(&s->exc_type, &s->exc_value, &s->exc_tb);
    s->thread = PyEval_SaveThread();
    if (!ok)
        longjmp(s->fail_jump, 1);
    return utf8 ? intern(s, (const uint8_t *)utf8, (size_t)n) : -1;
}

static void reference_dims(scanner *s, const raw_slot *r, int64_t dims[3]) {
    PyObject *values = call_reference(s, "_dim3", r->start, r->end);
    PyEval_RestoreThread(s->thread);
    int ok = PyList_Check(values) && PyList_GET_SIZE(values) == 3;
    for (int i = 0; ok && i < 3; i++) {
        dims[i] = PyLong_AsLongLong(PyList_GET_ITEM(values, i));
        ok = !(dims[i] == -1 && PyErr_Occurred());
    }
    Py_DECREF(values);
    if (!ok && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "_dim3 returned no list of 3 ints");
    if (!ok)
        PyErr_Fetch(&s->exc_type, &s->exc_value, &s->exc_tb);
    s->thread = PyEval_SaveThread();
    if (!ok)
        longjmp(s->fail_jump, 1);
}

/* ------------------------------------------------------------------ text args, compacted */
/* A decoded string as msgspec.json.encode writes it: '"' '\\' and control characters escaped
 * (\b \f \n \r \t, else \u00xx), everything else (non-ASCII too) as is. */
static void write_json_string(scanner *s, buf_t *out, const uint8_t *p, size_t n) {
    static const char hex[] = "0123456789abcdef";
    append_byte(s, out, '"');
    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            append_byte(s, out, c);
            continue;
        }
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        size_t len = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            len = 6;
        }
        append(s, out, esc, len);
    }
    append_byte(s, out, '"');
}

/* The value at *pp as compact JSON into s->compact; 0 where decode.py must write it (a float, an
 * object, an int past Python's digits, deep nesting): the caller then keeps its raw text. */
static int compact_value(scanner *s, const uint8_t **pp, int depth) {
    const uint8_t *p = *pp, *end = s->end;
    int c = at(p, end);
    switch (c) {
    case '"': {
        strref r;
        p = scan_string(s, p, 1, &r);
        write_json_string(s, &s->compact, ref_ptr(s, &r), r.n);
        break;
    }
    case '[':
        append_byte(s, &s->compact, '[');
        p = skip_ws(p + 1, end);
        if (at(p, end) == ']') {
            append_byte(s, &s->compact, ']');
            p++;
            break;
        }
        if (depth >= 64)
            return 0;
        for (;;) {
            if (!compact_value(s, &p, depth + 1))
                return 0;
            p = skip_ws(p, end);
            c = at(p, end);
            if (c != ',' && c != ']')
                fail_at(s, p, "not valid JSON: expected ',' or ']'");
            append_byte(s, &s->compact, (uint8_t)c);
            p = skip_ws(p + 1, end);
            if (c == ']')
                break;
        }
        break;
    case 't':
        p = literal(s, p, "true", 4);
        append(s, &s->compact, "true", 4);
        break;
    case 'f':
        p = literal(s, p, "false", 5);
        append(s, &s->compact, "false", 5);
        break;
    case 'n':
        p = literal(s, p, "null", 4);
        append(s, &s->compact, "null", 4);
        break;
    case '{':
        return 0;
    default: {
        if (c != '-' && !is_digit(c))
            fail_at(s, p, "not valid JSON: unexpected character");
        number n;
        p = parse_number(s, p, &n);
        if (!n.is_int || n.len > MAX_INT_CHARS)
            return 0;
        if (n.neg && n.low64 == 0 && n.len == 2) /* -0 is the int 0 */
            append_byte(s, &s->compact, '0');
        else
            append(s, &s->compact, n.start, n.len);
    }
    }
    *pp = p;
    return 1;
}

/* A text arg (a msgspec.Raw): what the reference makes of it, or its raw text for decode.py. */
static const uint8_t *read_text_arg(scanner *s, const uint8_t *p, raw_slot *r) {
    const uint8_t *start = p;
    int c = at(p, s->end);
    if (c == 'n') {
        r->kind = R_NULL; /* msgspec.Raw(b"null") is not None: the row is there, the code -1 */
        return literal(s, p, "null", 4);
    }
    if (c == '"') {
        r->kind = R_STR;
        return scan_string(s, p, 1, &r->text);
    }
    s->compact.len = 0;
    size_t arena_mark = s->arena.len;
    if (compact_value(s, &p, 0)) {
        r->text.p = NULL;
        r->text.off = s->arena.len;
        r->text.n = s->compact.len;
        append(s, &s->arena, s->compact.data, s->compact.len);
        r->kind = R_TEXT;
        return p;
    }
    s->arena.len = arena_mark;
    r->start = start;
    r->end = p = skip_value(s, start);
    r->kind = R_PYTHON;
    return p;
}

/* grid / block: [x, y, z] of ints read here; anything else left to decode.py's _dim3. */
static const uint8_t *read_dims_arg(scanner *s, const uint8_t *p, raw_slot *r) {
    const uint8_t *start = p, *end = s->end;
    if (at(p, end) == 'n') {
        r->kind = R_DIMS; /* _dim3 of null: [-1, -1, -1], the row still there */
        r->dims[0] = r->dims[1] = r->dims[2] = -1;
        return literal(s, p, "null", 4);
    }
    if (at(p, end) == '[') {
        p++;
        int i = 0;
        for (; i < 3; i++) {
            number n;
            p = skip_ws(p, end);
            int c = at(p, end);
            if (c != '-' && !is_digit(c))
                break;
            p = parse_number(s, p, &n);
            if (!n.is_int || n.len > MAX_INT_CHARS)
                break;
            r->dims[i] = (int64_t)(n.neg ? 0 - n.low64 : n.low64);
            p = skip_ws(p, end);
            if (at(p, end) != (i < 2 ? ',' : ']'))
                break;
            p++;
        }
        if (i == 3) {
            r->kind = R_DIMS;
            return p;
        }
    }
    r->start = start;
    r->end = p = skip_value(s, start);
    r->kind = R_PYTHON;
    return p;
}

/* ------------------------------------------------------------------ events */
typedef struct {
    const char *key;
    uint8_t len;
    uint8_t raw; /* 0: a number slot, 1: a text slot, 2: a grid / block slot */
    uint8_t slot;
} arg_key;

/* decode.py's INT_ARGS, FLOAT_ARGS, TEXT_ARGS and DIM3_ARGS keys. */
static arg_key ARG_KEYS[] = {
    {"External id", 0, 0, A_EXT0}, {"external id", 0, 0, A_EXT1}, {"correlation", 0, 0, A_CORR},
    {"device", 0, 0, A_DEVICE}, {"stream", 0, 0, A_STREAM}, {"context", 0, 0, A_CONTEXT},
    {"bytes", 0, 0, A_BYTES}, {"registers per thread", 0, 0, A_REGS}, {"shared memory", 0, 0, A_SHMEM},
    {"graph id", 0, 0, A_GRAPH}, {"blocks per SM", 0, 0, A_BPSM}, {"warps per SM", 0, 0, A_WPSM},
    {"est. achieved occupancy %", 0, 0, A_OCC}, {"Sequence number", 0, 0, A_SEQ},
    {"Fwd thread id", 0, 0, A_FWD}, {"Python id", 0, 0, A_PYID}, {"Python parent id", 0, 0, A_PYPAR},
    {"In msg nelems", 0, 0, A_INN}, {"Out msg nelems", 0, 0, A_OUTN}, {"Group size", 0, 0, A_GSIZE},
    {"kind", 0, 1, T_KIND}, {"Input Dims", 0, 1, T_DIMS}, {"Input type", 0, 1, T_TYPES},
    {"Concrete Inputs", 0, 1, T_CONCRETE}, {"Collective name", 0, 1, T_COLL}, {"dtype", 0, 1, T_DTYPE},
    {"grid", 0, 2, T_GRID}, {"block", 0, 2, T_BLOCK},
    /* decode.py's MEMORY_INT_ARGS: the [memory] instant events of profile_memory=True */
    {"Bytes", 0, 0, A_MBYTES}, {"Addr", 0, 0, A_ADDR}, {"Total Allocated", 0, 0, A_TALLOC},
    {"Total Reserved", 0, 0, A_TRES}, {"Device Id", 0, 0, A_DEVID}, {"Device Type", 0, 0, A_DEVTYPE}};
#define N_ARG_KEYS (sizeof ARG_KEYS / sizeof ARG_KEYS[0])
/* ARG_KEYS by first byte: indexes + 1, up to 4 keys share one (0 ends a list). */
static uint8_t arg_keys_by_first[128][4];

static void index_arg_keys(void) {
    memset(arg_keys_by_first, 0, sizeof arg_keys_by_first);
    for (size_t i = 0; i < N_ARG_KEYS; i++) {
        ARG_KEYS[i].len = (uint8_t)strlen(ARG_KEYS[i].key);
        uint8_t *list = arg_keys_by_first[(uint8_t)ARG_KEYS[i].key[0]];
        int k = 0;
        while (list[k])
            k++; /* at most 3 keys share a first letter: list[3] stays 0 */
        list[k] = (uint8_t)(i + 1);
    }
}

/* The args key whose text is k[0 .. n), or NULL. */
static const arg_key *find_arg_key(const uint8_t *k, size_t n) {
    if (n == 0 || k[0] >= 128)
        return NULL;
    for (const uint8_t *i = arg_keys_by_first[k[0]]; *i; i++) {
        const arg_key *a = &ARG_KEYS[*i - 1];
        if (a->len == n && memcmp(a->key, k, n) == 0)
            return a;
    }
    return NULL;
}

/* The args key spelled at p as '"' key '"' (no escapes): *key, and the position after the quote. */
static inline const uint8_t *quoted_arg_key(const uint8_t *p, const uint8_t *end, const arg_key **key) {
    if (end - p < 40 || p[0] != '"' || p[1] >= 128)
        return NULL;
    /* no known key holds '"' or '\\': a match is the whole key, as written */
    for (const uint8_t *i = arg_keys_by_first[p[1]]; *i; i++) {
        const arg_key *a = &ARG_KEYS[*i - 1];
        if (p[1 + a->len] == '"' && memcmp(a->key, p + 1, a->len) == 0) {
            *key = a;
            return p + 2 + a->len;
        }
    }
    return NULL;
}

static inline int event_key(const uint8_t *k, size_t n) {
    switch (n) {
    case 2:
        if (k[0] == 'p' && k[1] == 'h') return E_PH;
        if (k[0] == 't' && k[1] == 's') return E_TS;
        if (k[0] == 'i' && k[1] == 'd') return E_ID;
        if (k[0] == 'b' && k[1] == 'p') return E_BP;
        return -1;
    case 3:
        if (memcmp(k, "cat", 3) == 0) return E_CAT;
        if (memcmp(k, "pid", 3) == 0) return E_PID;
        if (memcmp(k, "tid", 3) == 0) return E_TID;
        if (memcmp(k, "dur", 3) == 0) return E_DUR;
        return -1;
    case 4:
        if (memcmp(k, "name", 4) == 0) return E_NAME;
        if (memcmp(k, "args", 4) == 0) return E_ARGS;
        return -1;
    }
    return -1;
}

/* The event key spelled at p as '"' key '"': *slot, and the position after the quote; else NULL. */
static inline const uint8_t *quoted_event_key(const uint8_t *p, const uint8_t *end, int *slot) {
    if (end - p < 8 || p[0] != '"')
        return NULL;
    size_t n = p[3] == '"' ? 2 : p[4] == '"' ? 3 : p[5] == '"' ? 4 : 0;
    int k = n ? event_key(p + 1, n) : -1; /* no event key holds '"' or '\\': a match is the whole key */
    if (k < 0)
        return NULL;
    *slot = k;
    return p + n + 2;
}

/* A value msgspec reads as one of `allowed` (bits of K_INT, K_FLOAT, K_STR) or null (kind
 * K_NONE, msgspec's None); anything else is `what`. */
static const uint8_t *read_typed(scanner *s, const uint8_t *p, value_slot *v, unsigned allowed, const char *what) {
    int c = at(p, s->end);
    if (c == '"' && (allowed & (1u << K_STR))) {
        v->kind = K_STR;
        return scan_string(s, p, 1, &v->str);
    }
    if ((c == '-' || is_digit(c)) && (allowed & ((1u << K_INT) | (1u << K_FLOAT)))) {
        p = parse_number(s, p, &v->num);
        if (!(allowed & (1u << (v->num.is_int ? K_INT : K_FLOAT))))
            fail(s, v->num.start, what);
        check_range(s, &v->num);
        v->kind = v->num.is_int ? K_INT : K_FLOAT;
        return p;
    }
    if (c == 'n') {
        v->kind = K_NONE;
        return literal(s, p, "null", 4);
    }
    fail_at(s, p, what);
}

static const uint8_t *read_args(scanner *s, const uint8_t *p) {
    const uint8_t *end = s->end;
    s->num_mask = s->raw_mask = 0;
    s->args_present = 1;
    p = skip_ws(p + 1, end);
    if (at(p, end) == '}')
        return p + 1;
    int more;
    do {
        const arg_key *k = NULL;
        const uint8_t *q = quoted_arg_key(p, end, &k);
        if (q) {
            p = skip_ws(expect(s, skip_ws(q, end), ':', "not valid JSON: expected ':'"), end);
        } else {
            strref key;
            p = member_key(s, p, &key);
            k = find_arg_key(ref_ptr(s, &key), key.n);
        }
        if (!k) {
            p = skip_value(s, p);
        } else if (k->raw == 0) {
            value_slot *v = &s->num[k->slot];
            p = read_typed(s, p, v, (1u << K_INT) | (1u << K_FLOAT) | (1u << K_STR),
                           "not a Chrome trace: an args number is neither a number, a string nor null");
            if (v->kind == K_NONE)
                s->num_mask &= ~(1u << k->slot);
            else
                s->num_mask |= 1u << k->slot;
        } else {
            p = k->raw == 1 ? read_text_arg(s, p, &s->raw[k->slot]) : read_dims_arg(s, p, &s->raw[k->slot]);
            s->raw_mask |= 1u << k->slot;
        }
        p = next_member(s, p, &more);
    } while (more);
    return p;
}

static const uint8_t *read_event_member(scanner *s, const uint8_t *p, int slot) {
    value_slot *v = &s->ev[slot];
    switch (slot) {
    case E_PH: case E_CAT: case E_NAME: case E_BP:
        p = read_typed(s, p, v, 1u << K_STR, "not a Chrome trace: ph / cat / name / bp is not a string");
        break;
    case E_PID: case E_TID: case E_ID:
        p = read_typed(s, p, v, (1u << K_INT) | (1u << K_STR),
                       "not a Chrome trace: pid / tid / id is not an int or a string");
        break;
    case E_TS: case E_DUR:
        p = read_typed(s, p, v, (1u << K_INT) | (1u << K_FLOAT), "not a Chrome trace: ts / dur is not a number");
        break;
    default: /* E_ARGS */
        if (at(p, s->end) == '{') {
            p = read_args(s, p);
            v->kind = K_STR; /* present */
        } else if (at(p, s->end) == 'n') {
            p = literal(s, p, "null", 4);
            s->args_present = 0;
            s->num_mask = s->raw_mask = 0;
            v->kind = K_NONE;
        } else {
            fail_at(s, p, "not a Chrome trace: args is not an object");
        }
    }
    if (v->kind == K_NONE)
        s->event_mask &= ~(1u << slot);
    else
        s->event_mask |= 1u << slot;
    return p;
}

static inline int has(scanner *s, int slot) {
    return (s->event_mask >> slot) & 1;
}

static int32_t string_code(scanner *s, int slot) {
    return has(s, slot) ? intern_ref(s, &s->ev[slot].str) : -1;
}

/* pid / tid: an int as is, a string as STRING_ID_BASE - its code (real tids can be negative:
   int32-wrapped pthread ids), absent 0. */
#define STRING_ID_BASE (-((int64_t)1 << 62))
static int64_t track_id(scanner *s, int slot) {
    if (!has(s, slot))
        return 0;
    value_slot *v = &s->ev[slot];
    if (v->kind == K_STR)
        return STRING_ID_BASE - (int64_t)intern_ref(s, &v->str);
    return number_int64(s, &v->num);
}

/* floor(ts) * 1000 + round(frac * 1000), the reference's ns of a µs double; absent -1. */
static int64_t ts_ns(scanner *s) {
    if (!has(s, E_TS))
        return -1;
    const number *n = &s->ev[E_TS].num;
    double ts = finite_double(s, n), whole = floor(ts);
    int64_t ns;
    if (!(whole >= -9223372036854775808.0 && whole < 9223372036854775808.0) ||
        __builtin_mul_overflow((int64_t)whole, (int64_t)1000, &ns) ||
        __builtin_add_overflow(ns, (int64_t)nearbyint((ts - whole) * 1000.0), &ns))
        fail(s, n->start, "not a Chrome trace: ts out of range for int64 ns");
    return ns;
}

/* round(dur * 1000) (half to even, as Python's round), absent 0. */
static int64_t dur_ns(scanner *s) {
    if (!has(s, E_DUR))
        return 0;
    const number *n = &s->ev[E_DUR].num;
    double ns = nearbyint(finite_double(s, n) * 1000.0);
    if (!(ns >= -9223372036854775808.0 && ns < 9223372036854775808.0))
        fail(s, n->start, "not a Chrome trace: dur out of range for int64 ns");
    return (int64_t)ns;
}

/* An args number as _int_or_absent: an int's low 64 bits, a float truncated, else -1. */
static int64_t arg_int(scanner *s, int slot) {
    if (!((s->num_mask >> slot) & 1) || s->num[slot].kind == K_STR)
        return -1;
    return number_int64(s, &s->num[slot].num);
}

/* The first of two keys that is not None (_first), as _int_or_absent. */
static int64_t arg_int_first(scanner *s, int slot, int other) {
    return ((s->num_mask >> slot) & 1) ? arg_int(s, slot) : arg_int(s, other);
}

static double arg_float(scanner *s, int slot) {
    if (!((s->num_mask >> slot) & 1) || s->num[slot].kind == K_STR)
        return NAN;
    return finite_double(s, &s->num[slot].num);
}

static int32_t text_code(scanner *s, int slot) {
    if (!((s->raw_mask >> slot) & 1))
        return -1;
    raw_slot *r = &s->raw[slot];
    switch (r->kind) {
    case R_STR:
    case R_TEXT:
        return intern_ref(s, &r->text);
    case R_PYTHON:
        return reference_text_code(s, r);
    default:
        return -1;
    }
}

static void dims(scanner *s, int slot, int64_t out[3]) {
    raw_slot *r = &s->raw[slot];
    if (!((s->raw_mask >> slot) & 1))
        out[0] = out[1] = out[2] = -1;
    else if (r->kind == R_PYTHON)
        reference_dims(s, r, out);
    else
        memcpy(out, r->dims, sizeof r->dims);
}

static void add_complete(scanner *s) {
    table *x = &s->x;
    size_t row = table_row(s, x);
    I32(x, X_CAT)[row] = string_code(s, E_CAT);
    I32(x, X_NAME)[row] = string_code(s, E_NAME);
    I64(x, X_PID)[row] = track_id(s, E_PID);
    I64(x, X_TID)[row] = track_id(s, E_TID);
    I64(x, X_TS)[row] = ts_ns(s);
    I64(x, X_DUR)[row] = dur_ns(s);
    int args = has(s, E_ARGS);
    I64(x, X_EXT)[row] = args ? arg_int_first(s, A_EXT0, A_EXT1) : -1;
    I64(x, X_CORR)[row] = args ? arg_int(s, A_CORR) : -1;
    if (!args)
        return;
    if ((s->num_mask & GPU_NUM_MASK) || (s->raw_mask & GPU_RAW_MASK)) {
        static const int ints[][2] = {{G_DEVICE, A_DEVICE}, {G_STREAM, A_STREAM}, {G_CONTEXT, A_CONTEXT},
                                      {G_BYTES, A_BYTES}, {G_REGS, A_REGS}, {G_SHMEM, A_SHMEM}, {G_GRAPH, A_GRAPH}};
        static const int floats[][2] = {{G_BPSM, A_BPSM}, {G_WPSM, A_WPSM}, {G_OCC, A_OCC}};
        table *g = &s->gpu;
        size_t r = table_row(s, g);
        int64_t d[3];
        I64(g, G_ROW)[r] = (int64_t)row;
        for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
            I64(g, ints[i][0])[r] = arg_int(s, ints[i][1]);
        for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++)
            F64(g, floats[i][0])[r] = arg_float(s, floats[i][1]);
        I32(g, G_KIND)[r] = text_code(s, T_KIND);
        dims(s, T_GRID, d);
        for (int i = 0; i < 3; i++)
            I64(g, G_GRID + i)[r] = d[i];
        dims(s, T_BLOCK, d);
        for (int i = 0; i < 3; i++)
            I64(g, G_BLOCK + i)[r] = d[i];
    }
    if ((s->num_mask & OP_NUM_MASK) || (s->raw_mask & OP_RAW_MASK)) {
        static const int ints[][2] = {{O_SEQ, A_SEQ}, {O_FWD, A_FWD}, {O_PYID, A_PYID}, {O_PYPAR, A_PYPAR},
                                      {O_INN, A_INN}, {O_OUTN, A_OUTN}, {O_GSIZE, A_GSIZE}};
        static const int texts[][2] = {{O_DIMS, T_DIMS}, {O_TYPES, T_TYPES}, {O_CONCRETE, T_CONCRETE},
                                       {O_COLL, T_COLL}, {O_DTYPE, T_DTYPE}};
        table *o = &s->op;
        size_t r = table_row(s, o);
        I64(o, O_ROW)[r] = (int64_t)row;
        for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
            I64(o, ints[i][0])[r] = arg_int(s, ints[i][1]);
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
            I32(o, texts[i][0])[r] = text_code(s, texts[i][1]);
    }
}

static void add_flow(scanner *s, int8_t ph) {
    table *f = &s->flows;
    size_t row = table_row(s, f);
    ((int8_t *)f->cols[F_PH])[row] = ph;
    I32(f, F_CAT)[row] = string_code(s, E_CAT);
    I32(f, F_NAME)[row] = string_code(s, E_NAME);
    int64_t id = -1;
    if (has(s, E_ID) && s->ev[E_ID].kind == K_STR) {
        int64_t at_row = (int64_t)row;
        id = intern_ref(s, &s->ev[E_ID].str);
        append(s, &s->string_id_rows, &at_row, sizeof at_row);
    } else if (has(s, E_ID)) {
        id = number_int64(s, &s->ev[E_ID].num);
    }
    I64(f, F_ID)[row] = id;
    I64(f, F_PID)[row] = track_id(s, E_PID);
    I64(f, F_TID)[row] = track_id(s, E_TID);
    I64(f, F_TS)[row] = ts_ns(s);
    const value_slot *bp = &s->ev[E_BP];
    ((uint8_t *)f->cols[F_BP])[row] = has(s, E_BP) && bp->str.n == 1 && *ref_ptr(s, &bp->str) == 'e';
}

static void add_instant(scanner *s) {
    static const int ints[][2] = {{I_ADDR, A_ADDR}, {I_TALLOC, A_TALLOC}, {I_TRES, A_TRES},
                                  {I_DEVID, A_DEVID}, {I_DEVTYPE, A_DEVTYPE}};
    table *t = &s->instants;
    size_t row = table_row(s, t);
    int args = has(s, E_ARGS);
    I32(t, I_CAT)[row] = string_code(s, E_CAT);
    I32(t, I_NAME)[row] = string_code(s, E_NAME);
    I64(t, I_PID)[row] = track_id(s, E_PID);
    I64(t, I_TID)[row] = track_id(s, E_TID);
    I64(t, I_TS)[row] = ts_ns(s);
    /* Bytes is signed (a free is negative, a 1-byte one -1): absent is 0, as the profiler's readers take it */
    I64(t, I_BYTES)[row] = args && ((s->num_mask >> A_MBYTES) & 1) && s->num[A_MBYTES].kind != K_STR
                               ? arg_int(s, A_MBYTES) : 0;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        I64(t, ints[i][0])[row] = args ? arg_int(s, ints[i][1]) : -1;
}

/* One event (an object at p): every member validated as msgspec's Event struct reads it (a
 * repeated key: the last wins), then the row of its phase.  The position after it. */
static const uint8_t *read_event(scanner *s, const uint8_t *p) {
    const uint8_t *start = p, *end = s->end;
    s->event = start;
    s->arena.len = 0;
    s->event_mask = s->num_mask = s->raw_mask = 0;
    s->args_present = 0;
    p = skip_ws(p + 1, end);
    if (at(p, end) == '}') {
        p++;
    } else {
        int more;
        do {
            int slot;
            const uint8_t *q = quoted_event_key(p, end, &slot);
            if (q) {
                p = skip_ws(expect(s, skip_ws(q, end), ':', "not valid JSON: expected ':'"), end);
            } else {
                strref key;
                p = member_key(s, p, &key);
                slot = event_key(ref_ptr(s, &key), key.n);
            }
            p = slot < 0 ? skip_value(s, p) : read_event_member(s, p, slot);
            p = next_member(s, p, &more);
        } while (more);
    }
    int ph = -1;
    if (has(s, E_PH) && s->ev[E_PH].str.n == 1)
        ph = *ref_ptr(s, &s->ev[E_PH].str);
    switch (ph) {
    case 'X':
        add_complete(s);
        break;
    case 's':
        add_flow(s, 0);
        break;
    case 'f':
        add_flow(s, 1);
        break;
    case 't':
        add_flow(s, 2);
        break;
    case 'i':
    case 'I':
        add_instant(s);
        break;
    case 'M': {
        size_t span[2] = {(size_t)(start - s->base), (size_t)(p - s->base)};
        append(s, &s->metadata, span, sizeof span);
        break;
    }
    default:
        s->other++;
    }
    return p;
}

static void reset_events(scanner *s) {
    table_free(&s->x);
    table_free(&s->gpu);
    table_free(&s->op);
    table_free(&s->flows);
    table_free(&s->instants);
    interner_free(&s->strings);
    s->metadata.len = 0;
    s->string_id_rows.len = 0;
    s->other = 0;
}

/* A read-only file map's pages scanned already are handed back every RELEASE_BYTES: they would
 * otherwise stay in the process' memory until the map is closed (a 0.7 GB trace: its whole size on
 * top of the columns, the export's peak).  Read again (the metadata events, an error's context),
 * a page simply comes back from the page cache: the file is unchanged. */
#define RELEASE_BYTES (32 << 20)

static void release_behind(scanner *s, const uint8_t *p) {
#ifdef CAN_RELEASE_PAGES
    static uintptr_t page = 0;
    if (!page)
        page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t from = ((uintptr_t)s->released + page - 1) / page * page, to = (uintptr_t)p / page * page;
    if (to > from)
        madvise((void *)from, to - from, MADV_DONTNEED);  /* advice: a refusal only keeps the pages */
#endif
    s->released = p;
}

/* Events from the one at p to the array's ']'; the position after it.  A part scan that reaches an
 * event starting at stop_at has landed: it stops there (the next part starts at that event). */
static const uint8_t *read_event_list(scanner *s, const uint8_t *p) {
    const uint8_t *end = s->end;
    for (;;) {
        if (at(p, end) != '{')
            fail_at(s, p, "not a Chrome trace: an event is not an object");
        p = skip_ws(read_event(s, p), end);
        if (s->release && p - s->released >= RELEASE_BYTES)
            release_behind(s, p);
        int c = at(p, end);
        if (c != ',' && c != ']')
            fail_at(s, p, "not valid JSON: expected ',' or ']'");
        p++;
        if (c == ']')
            return p;
        p = skip_ws(p, end);
        if (p == s->stop_at) {
            s->landed = 1;
            longjmp(s->fail_jump, 1);
        }
    }
}

static const uint8_t *read_events(scanner *s, const uint8_t *p) {
    const uint8_t *end = s->end;
    if (at(p, end) != '[')
        fail_at(s, p, "not a Chrome trace: traceEvents is not an array");
    p = skip_ws(p + 1, end);
    if (at(p, end) == ']')
        return p + 1;
    return read_event_list(s, p);
}

static const uint8_t *read_members(scanner *s, const uint8_t *p, int more, int seen);
static void trailing(scanner *s, const uint8_t *p);

/* The document: {"traceEvents": [...], other keys} (the last traceEvents wins, as in a dict), or
 * Chrome's array format [...] (events only). */
static void read_document(scanner *s) {
    const uint8_t *end = s->end, *p = skip_ws(s->base, end);
    int c = at(p, end);
    if (c == '[') {
        p = read_events(s, p);
    } else if (c == '{') {
        int more = 1;
        p = skip_ws(p + 1, end);
        if (at(p, end) == '}') {
            p++;
            more = 0;
        }
        p = read_members(s, p, more, 0);
    } else {
        fail(s, p, c < 0 ? "not valid JSON: empty document" : "not valid JSON: neither an object nor an array");
    }
    trailing(s, p);
}

/* The part of a document from the event at resume_at on: the rest of its events, then (an object
 * document) the members after traceEvents. */
static void read_rest(scanner *s) {
    const uint8_t *p = read_event_list(s, s->resume_at);
    if (at(skip_ws(s->base, s->end), s->end) == '{') {
        int more = 0;
        p = next_member(s, p, &more);
        p = read_members(s, p, more, 1);
    }
    trailing(s, p);
}

/* The top-level object's members from p (more: one follows), the last traceEvents' events read
 * (seen: one was read before p); the position after the object. */
static const uint8_t *read_members(scanner *s, const uint8_t *p, int more, int seen) {
    while (more) {
            strref key;
            s->arena.len = 0;
            p = member_key(s, p, &key);
            const uint8_t *k = ref_ptr(s, &key);
            if (key.n == 11 && memcmp(k, "traceEvents", 11) == 0) {
                if (seen) {
                    s->restarted = 1; /* the events before are dropped: a part scan's join would be wrong */
                    reset_events(s);
                }
                seen = 1;
                p = read_events(s, p);
            } else {
                top_item item = {s->top_keys.len, key.n, (size_t)(p - s->base), 0};
                append(s, &s->top_keys, k, key.n);
                p = skip_value(s, p);
                item.end = (size_t)(p - s->base);
                append(s, &s->top, &item, sizeof item);
            }
            p = next_member(s, p, &more);
    }
    if (!seen)
        fail(s, p, "not a Chrome trace: no traceEvents array");
    return p;
}

static void trailing(scanner *s, const uint8_t *p) {
    p = skip_ws(p, s->end);
    if (p != s->end)
        fail(s, p, "not valid JSON: trailing characters");
}

/* ------------------------------------------------------------------ Column: a column's memory */
typedef struct {
    PyObject_HEAD
    void *data;
    Py_ssize_t length, itemsize;
    char format[2];
} Column;

static int column_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    Column *c = (Column *)self;
    Py_INCREF(self);
    view->obj = self;
    view->buf = c->data ? c->data : (void *)&c->length; /* never NULL, even when empty */
    view->len = c->length * c->itemsize;
    view->readonly = 0;
    view->itemsize = c->itemsize;
    view->format = (flags & PyBUF_FORMAT) ? c->format : NULL;
    view->ndim = 1;
    view->shape = (flags & PyBUF_ND) ? &c->length : NULL;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? &c->itemsize : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    return 0;
}

static void column_dealloc(PyObject *self) {
    free(((Column *)self)->data);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs column_buffer = {column_getbuffer, NULL};

static PyTypeObject ColumnType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tb_hwprof.readers.torch._kineto_scan.Column",
    .tp_basicsize = sizeof(Column),
    .tp_dealloc = column_dealloc,
    .tp_as_buffer = &column_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One column's values (np.asarray(column) is its array, without a copy).",
};

/* The table's columns as {name: Column}; the memory moves into the Columns. */
static PyObject *table_dict(table *t) {
    PyObject *dict = PyDict_New();
    for (int c = 0; dict && c < t->ncols; c++) {
        Column *col = PyObject_New(Column, &ColumnType);
        if (!col) {
            Py_CLEAR(dict);
            break;
        }
        size_t bytes = t->rows * t->spec[c].size;
        col->data = t->cols[c];
        if (col->data && bytes < t->cap * t->spec[c].size) { /* give back the room never used */
            void *smaller = realloc(col->data, bytes ? bytes : 1);
            if (smaller)
                col->data = smaller;
        }
        t->cols[c] = NULL;
        col->length = (Py_ssize_t)t->rows;
        col->itemsize = t->spec[c].size;
        col->format[0] = t->spec[c].format;
        col->format[1] = 0;
        if (PyDict_SetItemString(dict, t->spec[c].name, (PyObject *)col) < 0)
            Py_CLEAR(dict);
        Py_DECREF(col);
    }
    return dict;
}

/* ------------------------------------------------------------------ the module */
static void scanner_free(scanner *s) {
    buf_free(&s->arena);
    buf_free(&s->compact);
    buf_free(&s->stack);
    buf_free(&s->digits);
    buf_free(&s->metadata);
    buf_free(&s->top);
    buf_free(&s->top_keys);
    buf_free(&s->string_id_rows);
    reset_events(s);
    Py_CLEAR(s->decode_module);
    Py_CLEAR(s->kept);
}

/* Kept apart so that nothing the scan changes lives in the frame setjmp returns to. */
static int run_scan(scanner *s) {
    if (setjmp(s->fail_jump))
        return s->landed; /* landing at stop_at is a part scan's success */
    if (s->resume_at)
        read_rest(s);
    else
        read_document(s);
    return 1;
}

static void raise_trace_error(scanner *s) {
    PyObject *module = s->decode_module;
    if (module)
        Py_INCREF(module);
    else
        module = PyImport_ImportModule(DECODE_MODULE);
    PyObject *type = module ? PyObject_GetAttrString(module, "TraceError") : NULL;
    Py_XDECREF(module);
    if (!type) {
        PyErr_Clear();
        type = PyExc_ValueError;
        Py_INCREF(type);
    }
    PyErr_SetString(type, s->message);
    Py_DECREF(type);
}

static PyObject *results(scanner *s) {
    PyObject *strings = NULL, *meta = NULL, *top = NULL, *out = NULL;
    PyObject *tables[5] = {NULL, NULL, NULL, NULL, NULL};
    const entry *entries = (const entry *)s->strings.entries.data;
    strings = PyList_New((Py_ssize_t)s->strings.count);
    for (size_t i = 0; strings && i < s->strings.count; i++) {
        PyObject *text = PyUnicode_DecodeUTF8((const char *)s->strings.bytes.data + entries[i].off,
                                              (Py_ssize_t)entries[i].len, "strict");
        if (!text)
            goto done;
        PyList_SET_ITEM(strings, (Py_ssize_t)i, text);
    }
    if (!strings)
        goto done;
    buf_free(&s->strings.bytes);
    table *all[5] = {&s->x, &s->gpu, &s->op, &s->flows, &s->instants};
    for (int t = 0; t < 5; t++)
        if (!(tables[t] = table_dict(all[t])))
            goto done;
    size_t n_meta = s->metadata.len / (2 * sizeof(size_t));
    const size_t *spans = (const size_t *)s->metadata.data;
    if (!(meta = PyList_New((Py_ssize_t)n_meta)))
        goto done;
    for (size_t i = 0; i < n_meta; i++) {
        PyObject *raw = PyBytes_FromStringAndSize((const char *)s->base + spans[2 * i],
                                                  (Py_ssize_t)(spans[2 * i + 1] - spans[2 * i]));
        if (!raw)
            goto done;
        PyList_SET_ITEM(meta, (Py_ssize_t)i, raw);
    }
    size_t n_top = s->top.len / sizeof(top_item);
    const top_item *items = (const top_item *)s->top.data;
    if (!(top = PyList_New((Py_ssize_t)n_top)))
        goto done;
    for (size_t i = 0; i < n_top; i++) {
        PyObject *pair = Py_BuildValue("(s#y#)", (const char *)s->top_keys.data + items[i].key_off,
                                       (Py_ssize_t)items[i].key_len, (const char *)s->base + items[i].start,
                                       (Py_ssize_t)(items[i].end - items[i].start));
        if (!pair)
            goto done;
        PyList_SET_ITEM(top, (Py_ssize_t)i, pair);
    }
    out = Py_BuildValue("(OOOOOOOOL)", strings, tables[0], tables[1], tables[2], tables[3], tables[4], meta,
                        top, (long long)s->other);
done:
    Py_XDECREF(strings);
    for (int t = 0; t < 5; t++)
        Py_XDECREF(tables[t]);
    Py_XDECREF(meta);
    Py_XDECREF(top);
    return out;
}

/* scan(), or with start / stop (byte offsets of events, 0: none) a part of the document. */
static PyObject *scan_range(PyObject *arg, Py_ssize_t start, Py_ssize_t stop, int part, int release) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (start < 0 || stop < 0 || (start && start >= view.len) || (stop && stop >= view.len)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan_part: start / stop outside the data");
        return NULL;
    }
    scanner *s = calloc(1, sizeof *s);
    if (!s) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    s->base = s->event = (const uint8_t *)view.buf;
    s->end = s->base + view.len;
    s->resume_at = start ? s->base + start : NULL;
    s->stop_at = stop ? s->base + stop : NULL;
    s->release = release;
    s->released = s->resume_at ? s->resume_at : s->base;
    table_init(&s->x, X_SPEC, X_N);
    table_init(&s->gpu, G_SPEC, G_N);
    table_init(&s->op, O_SPEC, O_N);
    table_init(&s->flows, F_SPEC, F_N);
    table_init(&s->instants, I_SPEC, I_N);
    s->thread = PyEval_SaveThread();
    int ok = run_scan(s);
    PyEval_RestoreThread(s->thread);
    PyObject *out = NULL;
    if (ok) {
        out = results(s);
        if (out && part) {
            PyObject *whole = Py_BuildValue("(Oiiy#)", out, s->landed, s->restarted, (const char *)s->string_id_rows.data,
                                            (Py_ssize_t)s->string_id_rows.len);
            Py_DECREF(out);
            out = whole;
        }
    } else if (s->exc_type)
        PyErr_Restore(s->exc_type, s->exc_value, s->exc_tb);
    else if (s->out_of_memory)
        PyErr_NoMemory();
    else
        raise_trace_error(s);
    scanner_free(s);
    free(s);
    PyBuffer_Release(&view);
    return out;
}

static PyObject *scan(PyObject *module, PyObject *args) {
    PyObject *data;
    int release = 0;
    if (!PyArg_ParseTuple(args, "O|p", &data, &release))
        return NULL;
    return scan_range(data, 0, 0, 0, release);
}

static PyObject *scan_part(PyObject *module, PyObject *args) {
    PyObject *data;
    Py_ssize_t start, stop;
    int release = 0;
    if (!PyArg_ParseTuple(args, "Onn|p", &data, &start, &stop, &release))
        return NULL;
    return scan_range(data, start, stop, 1, release);
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(data, release=False) -> (strings, x, x_gpu, x_op, flows, instants, metadata, top, other_events): the "
     "columns of a Kineto Chrome-trace JSON document (see decode.py).  release: data is a read-only map of a "
     "file, whose pages are handed back as the scan passes them (never for data in the process' own memory)."},
    {"scan_part", scan_part, METH_VARARGS,
     "scan_part(data, start, stop, release=False) -> (scan's result, landed, restarted, string_id_rows): a part "
     "of the document: from its start, stopping (landed) at an event that starts at byte stop; or (start > 0) "
     "from the event at byte start to the end.  string_id_rows: int64 rows of the flows whose id is a string."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_kineto_scan",
                                        "Kineto Chrome-trace JSON to columns (decode.py's native scanner).", -1,
                                        methods};

PyMODINIT_FUNC PyInit__kineto_scan(void) {
#ifdef HAVE_STRTOD_L
    if (!c_locale && !(c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0)))
        return PyErr_NoMemory();
#endif
#if defined(__x86_64__) && LDBL_MANT_DIG == 64
    POW10L[0] = 1.0L;
    for (int i = 1; i < 28; i++)
        POW10L[i] = POW10L[i - 1] * 10.0L;
#endif
    for (int c = 0x20; c < 0x80; c++)
        plain[c] = c != '"' && c != '\\';
    is_ws[' '] = is_ws['\n'] = is_ws['\r'] = is_ws['\t'] = 1;
    index_arg_keys();
    if (PyType_Ready(&ColumnType) < 0)
        return NULL;
    return PyModule_Create(&module_def);
}
