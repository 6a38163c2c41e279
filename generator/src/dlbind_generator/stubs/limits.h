/* limits.h stand-in for the backends' vendor headers (CUDA's driver_types.h includes it): nothing of it is
   selected, and widths never come from here. */
