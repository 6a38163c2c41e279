/* Flag macros as (1UL << nUL), an octal version macro of the v0.3-v0.5 kind, and macros that
   are not integers (empty, attributes) and must be left out. */
#define DLPACK_VERSION 030
#define DLPACK_DLPACK_H_
#define DLPACK_DLL
#define FLAG_A (1UL << 0UL)
#define FLAG_C (1UL << 2UL)
#define FLAGS_BOTH (FLAG_A | FLAG_C)
#define NAME "text"
#define FUNC(x) ((x) + 1)
typedef enum { kOnly = 0U } Dummy;
