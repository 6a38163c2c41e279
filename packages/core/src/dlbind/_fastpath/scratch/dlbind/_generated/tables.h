/* SCRATCH stand-in (contract of TABLES.md) until main has the generated header. */
#ifndef DLBIND_TABLES_H
#define DLBIND_TABLES_H
#define DLBIND_DEVICE_TYPE_LIMIT 19
#define DLBIND_DTYPE_CODE_LIMIT 18
static const char *const DLBIND_DEVICE_NAMES[DLBIND_DEVICE_TYPE_LIMIT] = {
    NULL, "cpu", "cuda", "cuda_host", "opencl", NULL, NULL, "vulkan", "metal", "vpi", "rocm", "rocm_host",
    "ext_dev", "cuda_managed", "oneapi", "webgpu", "hexagon", "maia", "trn"};
static const unsigned char DLBIND_DEVICE_HOST[DLBIND_DEVICE_TYPE_LIMIT] = {0,1,0,1,0,0,0,0,0,0,0,1,0,1,0,0,0,0,0};
static const unsigned char DLBIND_DEVICE_STREAM[DLBIND_DEVICE_TYPE_LIMIT] = {0,0,1,0,0,0,0,0,0,0,2,0,0,1,0,0,0,0,0};
static const unsigned char DLBIND_DTYPE_CODE_KNOWN[DLBIND_DTYPE_CODE_LIMIT] = {1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1};
typedef struct { const char *name; unsigned char none_only; unsigned char n_refused;
                 long long refused[4]; const char *allowed; } dlbind_stream_rule;
#define DLBIND_STREAM_RULE_COUNT 3
static const dlbind_stream_rule DLBIND_STREAM_RULES[DLBIND_STREAM_RULE_COUNT] = {
    {"none", 1, 0, {0}, "None"},
    {"cuda", 0, 1, {0}, "None, -1, 1 (legacy default), 2 (per-thread default) or a stream handle"},
    {"rocm", 0, 2, {1, 2}, "None, -1, 0 (default) or a stream handle"},
};
typedef struct { unsigned char code; unsigned short bits; const char *name; const char *format; } dlbind_dtype_row;
#define DLBIND_DTYPE_COUNT 16
static const dlbind_dtype_row DLBIND_DTYPES[DLBIND_DTYPE_COUNT] = {
    {6, 8, "bool", "?"}, {0, 8, "int8", "b"}, {0, 16, "int16", "h"}, {0, 32, "int32", "i"}, {0, 64, "int64", "q"},
    {1, 8, "uint8", "B"}, {1, 16, "uint16", "H"}, {1, 32, "uint32", "I"}, {1, 64, "uint64", "Q"},
    {2, 16, "float16", "e"}, {2, 32, "float32", "f"}, {2, 64, "float64", "d"}, {4, 16, "bfloat16", NULL},
    {5, 64, "complex64", "Zf"}, {5, 128, "complex128", "Zd"}, {10, 8, "float8_e4m3fn", NULL},
};
typedef struct { const char *format; unsigned char code; unsigned short bits; } dlbind_format_row;
#define DLBIND_FORMAT_COUNT 19
static const dlbind_format_row DLBIND_FORMATS[DLBIND_FORMAT_COUNT] = {
    {"?", 6, 8}, {"b", 0, 8}, {"B", 1, 8}, {"c", 1, 8}, {"h", 0, 16}, {"H", 1, 16}, {"i", 0, 32}, {"I", 1, 32},
    {"l", 0, 64}, {"L", 1, 64}, {"q", 0, 64}, {"Q", 1, 64}, {"n", 0, 64}, {"N", 1, 64}, {"e", 2, 16},
    {"f", 2, 32}, {"d", 2, 64}, {"Zf", 5, 64}, {"Zd", 5, 128},
};
#endif
