/* Enumerator values that are expressions over earlier enumerators and macros. */
#define DLPACK_VERSION 80
#define BASE (1 << 4)
typedef enum {
  kFirst = BASE,
  kSecond,
  kBoth = kFirst | kSecond,
  kNeg = -1,
  kShifted = (kSecond << 2) + 1,
} Expr;
