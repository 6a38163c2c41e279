/* Declarations cffi sees of the hand-written C in _fastpath.c (appended to the generated cdef). */
int dlbind_install(void);
