/* The generated policy tables (dlbind/_generated/tables.h, the same data dlbind/_generated/tables.py
 * gives the Python side) behind small lookups, and the checked arithmetic of element counts and
 * byte sizes. The only file that includes tables.h: no other C file knows a device type, a dtype
 * code or a buffer format. */
#include "fastpath.h"

#include "../_generated/tables.h"

const char *dlbind_device_name(int64_t device_type) {
    if (device_type < 0 || device_type >= DLBIND_DEVICE_TYPE_LIMIT) return NULL;
    return DLBIND_DEVICE_NAMES[device_type];
}

int dlbind_device_known(int64_t device_type) { return dlbind_device_name(device_type) != NULL; }

int dlbind_device_host(int64_t device_type) {
    return dlbind_device_known(device_type) && DLBIND_DEVICE_HOST[device_type];
}

int dlbind_device_stream_free(int64_t device_type) {
    if (!dlbind_device_known(device_type)) return 0;
    unsigned rule = DLBIND_DEVICE_STREAM[device_type];
    return rule < DLBIND_STREAM_RULE_COUNT && DLBIND_STREAM_RULES[rule].none_only;
}

long long dlbind_device_default_stream(int64_t device_type) {
    if (!dlbind_device_known(device_type)) return -1;
    unsigned rule = DLBIND_DEVICE_STREAM[device_type];
    if (rule >= DLBIND_STREAM_RULE_COUNT || DLBIND_STREAM_RULES[rule].none_only) return -1;
    return DLBIND_STREAM_RULES[rule].default_stream;
}

int dlbind_device_stream_accepted(int64_t device_type, long long stream) {
    if (!dlbind_device_known(device_type) || stream < -1) return 0;
    unsigned rule = DLBIND_DEVICE_STREAM[device_type];
    if (rule >= DLBIND_STREAM_RULE_COUNT || DLBIND_STREAM_RULES[rule].none_only) return 0;
    const dlbind_stream_rule *r = &DLBIND_STREAM_RULES[rule];
    for (unsigned i = 0; i < r->n_refused; i++)
        if (r->refused[i] == stream) return 0;
    return 1;
}

int dlbind_dtype_code_known(int64_t code) {
    return code >= 0 && code < DLBIND_DTYPE_CODE_LIMIT && DLBIND_DTYPE_CODE_KNOWN[code];
}

/* A legacy capsule's dtype read one element per byte (spec/dtypes.toml [[legacy]]); 1 when rewritten */
int dlbind_legacy_reading(DLDataType *dt) { return dlbind_table_legacy_reading(dt); }

/* bits is a width the spec defines for this (known) code; never 0 */
int dlbind_dtype_width_accepted(int code, int bits) {
    if (bits <= 0 || bits > 255) return 0;
    return (int)((DLBIND_DTYPE_ACCEPTS[code][bits >> 6] >> (bits & 63)) & 1ULL);
}

static const dlbind_dtype_row *dlbind_dtype_row_of(int code, int bits) {
    for (size_t i = 0; i < DLBIND_DTYPE_COUNT; i++)
        if (DLBIND_DTYPES[i].code == code && DLBIND_DTYPES[i].bits == bits) return &DLBIND_DTYPES[i];
    return NULL;
}

const char *dlbind_dtype_name(int code, int bits) {
    const dlbind_dtype_row *row = dlbind_dtype_row_of(code, bits);
    return row ? row->name : NULL;
}

const char *dlbind_dtype_format(int code, int bits) {
    const dlbind_dtype_row *row = dlbind_dtype_row_of(code, bits);
    return row ? row->format : NULL;
}

/* DLBIND_FORMATS row of each one-character format (-1: none), made from the table at module init. */
static signed char dlbind_single_char_row[128];
_Static_assert(DLBIND_FORMAT_COUNT < 128, "format rows are indexed by signed char");

void dlbind_policy_init(void) {
    memset(dlbind_single_char_row, -1, sizeof dlbind_single_char_row);
    for (size_t i = DLBIND_FORMAT_COUNT; i-- > 0;) {
        const char *f = DLBIND_FORMATS[i].format;
        if (f[0] != '\0' && f[1] == '\0' && (unsigned char)f[0] < 128) dlbind_single_char_row[(unsigned char)f[0]] = (signed char)i;
    }
}

int dlbind_format_dtype(const char *format, DLDataType *out) {
    if (format == NULL) format = "B"; /* the buffer protocol's default: unsigned bytes */
    switch (format[0]) {           /* byte order: native only, as dlbind.dtypes.from_format */
        case '@': case '=': format++; break;
#if PY_LITTLE_ENDIAN
        case '<': format++; break;
        case '>': case '!': return 0;
#else
        case '>': case '!': format++; break;
        case '<': return 0;
#endif
        default: break;
    }
    size_t first = 0;
    if (format[0] != '\0' && format[1] == '\0' && (unsigned char)format[0] < 128) { /* one character: the index */
        signed char row = dlbind_single_char_row[(unsigned char)format[0]];
        if (row < 0) return 0;
        first = (size_t)row; /* the row of exactly this format: no comparison needed */
        out->code = DLBIND_FORMATS[first].code;
        out->bits = (uint8_t)DLBIND_FORMATS[first].bits;
        out->lanes = 1;
        return DLBIND_FORMATS[first].bits <= 255;
    }
    for (size_t i = first; i < DLBIND_FORMAT_COUNT; i++) {
        if (strcmp(DLBIND_FORMATS[i].format, format) == 0) {
            out->code = DLBIND_FORMATS[i].code;
            out->bits = (uint8_t)DLBIND_FORMATS[i].bits;
            out->lanes = 1;
            return DLBIND_FORMATS[i].bits <= 255;
        }
    }
    return 0;
}

int dlbind_count(const int64_t *shape, int ndim, int64_t *out) {
    int64_t count = 1;
    int empty = 0;
    for (int i = 0; i < ndim; i++) { /* a negative dimension anywhere is an error, even beside a zero */
        if (shape[i] < 0) return -1;
        if (shape[i] == 0) empty = 1; /* a zero dimension makes any shape empty, however large the rest */
    }
    if (empty) {
        *out = 0;
        return 0;
    }
    for (int i = 0; i < ndim; i++)
        if (dlbind_mul_overflow(count, shape[i], &count)) return -1;
    *out = count;
    return 0;
}

int dlbind_nbytes(int64_t count, DLDataType dtype, int padded, int64_t *out) {
    int64_t bits_per_item = (int64_t)dtype.bits * (int64_t)dtype.lanes;
    int64_t itemsize = (bits_per_item + 7) / 8;
    if (itemsize < 1) itemsize = 1;
    if (bits_per_item % 8 == 0 || padded) return dlbind_mul_overflow(count, itemsize, out) ? -1 : 0;
    /* (count * bits + 7) / 8 without the intermediate product: count = 8q + r */
    int64_t whole;
    if (dlbind_mul_overflow(count / 8, bits_per_item, &whole) ||
        dlbind_add_overflow(whole, ((count % 8) * bits_per_item + 7) / 8, out))
        return -1;
    return 0;
}
