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
    if (!dlbind_device_known(device_type) || stream < -1 || stream > DLBIND_STREAM_MAX) return 0;
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

/* ---- what a DLPack tensor must satisfy (read from the tables above, so the compiler inlines them) ---- */

/* The bytes a non-empty tensor's elements reach, from data + byte_offset, fit in int64 and in the address
 * space (dlbind.validate.check_reach, step by step: a producer's defect such as CuPy's negative strides carried
 * as unsigned numbers never reaches a consumer). */
static int dlbind_extent_ok(const DLTensor *t, const int64_t *strides, int padded) {
    int64_t low = 0, high = 0, span, low_b, high_b, bits = (int64_t)t->dtype.bits * t->dtype.lanes;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] <= 1) continue;
        if (dlbind_mul_overflow(strides[i], t->shape[i] - 1, &span)) return 0;
        if (span < 0 ? dlbind_add_overflow(low, span, &low) : dlbind_add_overflow(high, span, &high)) return 0;
    }
    if (high == INT64_MAX || low == INT64_MIN) return 0; /* high + 1 elements; -low elements */
    if (bits % 8 == 0 || padded) {
        int64_t item = (bits + 7) / 8;
        if (dlbind_mul_overflow(low, item, &low_b) || dlbind_mul_overflow(high + 1, item, &high_b) || low_b == INT64_MIN)
            return 0;
    } else { /* packed below a byte: whole bytes from element counts, as dlbind_nbytes counts them */
        int64_t n = high + 1, m = -low, a, b;
        if (dlbind_mul_overflow(n / 8, bits, &a) || dlbind_add_overflow(a, (n % 8 * bits + 7) / 8, &high_b) ||
            dlbind_mul_overflow(m / 8, bits, &b) || dlbind_add_overflow(b, (m % 8 * bits + 7) / 8, &low_b))
            return 0;
        low_b = -low_b;
    }
    uintptr_t start = (uintptr_t)t->data + (uintptr_t)t->byte_offset; /* no wrap: checked before */
    if (low_b < 0 && (uint64_t)(-low_b) > (uint64_t)start) return 0;
    if ((uint64_t)(high_b - 1) > (uint64_t)(UINTPTR_MAX - start)) return 0;
    return 1;
}

int dlbind_description_ok(void *data, int ndim, int64_t *shape, int64_t *strides, DLDataType dtype) {
    int64_t count, nbytes;
    if (ndim < 0 || ndim > DLBIND_MAX_NDIM) return 0;
    if (dlbind_count(shape, ndim, &count) != 0 || dlbind_nbytes(count, dtype, 0, &nbytes) != 0) return 0;
    if (count == 0) return 1; /* no element is addressed */
    if (data == NULL) return 0;
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.ndim = ndim;
    t.shape = shape;
    t.strides = strides;
    t.dtype = dtype;
    return dlbind_extent_ok(&t, strides, 0);
}

/* The checks of dlbind.validate.check_managed, without the messages: 0 sends the struct to Python,
 * which raises the precise BufferError. */
int dlbind_valid(void *managed, int versioned, int allow_vector) {
    DLTensor *t = dlbind_dl_tensor(managed, versioned);
    if (versioned && ((DLManagedTensorVersioned *)managed)->version.major != DLPACK_MAJOR_VERSION) return 0;
    if (t->ndim < 0 || t->ndim > DLBIND_MAX_NDIM) return 0;
    (void)allow_vector; /* vector dtypes are carried */
    /* a dtype code or device type newer than this runtime's header (same major version) is carried */
    if (t->dtype.lanes == 0 || t->dtype.bits == 0 ||
        (dlbind_dtype_code_known(t->dtype.code) && !dlbind_dtype_width_accepted(t->dtype.code, t->dtype.bits)))
        return 0;
    if ((int32_t)t->device.device_type < 0 || t->device.device_id < 0) return 0;
    if (t->ndim > 0 && t->shape == NULL) return 0;
    int64_t count, nbytes;
    if (dlbind_count(t->shape, t->ndim, &count) != 0) return 0; /* negative, or >= 2**63 elements */
    int padded = versioned && (((DLManagedTensorVersioned *)managed)->flags & DLBIND_FLAG_SUBBYTE_PADDED);
    if (dlbind_nbytes(count, t->dtype, padded, &nbytes) != 0) return 0;
    if (t->data == NULL && count != 0 && dlbind_device_host(t->device.device_type)) return 0;
    if (t->byte_offset > (uint64_t)INT64_MAX) return 0; /* consumers read it as int64 (torch's storage offset) */
    if (t->byte_offset > UINTPTR_MAX - (uintptr_t)t->data) return 0;
    if (t->ndim > 0 && t->strides == NULL) { /* dlbind_compact_strides' strides must fit in int64 */
        int64_t acc = 1;
        for (int i = t->ndim - 1; i > 0; i--)
            if (t->shape[i] > 1 && dlbind_mul_overflow(acc, t->shape[i], &acc)) return 0;
    }
    if (count != 0) {
        int64_t compact[DLBIND_MAX_NDIM];
        const int64_t *strides = t->strides;
        if (strides == NULL) {
            dlbind_compact_strides(t->ndim, t->shape, compact);
            strides = compact;
        }
        if (!dlbind_extent_ok(t, strides, padded)) return 0;
    }
    return 1;
}
