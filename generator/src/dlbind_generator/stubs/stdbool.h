/* stdbool.h stand-in for the backends' vendor headers (HIP's driver_types.h). */
#define bool _Bool
#define true 1
#define false 0
