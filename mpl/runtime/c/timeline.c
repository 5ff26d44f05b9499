/* (being written) */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

int timeline_init_module(PyObject *m) { (void)m; return 0; }
