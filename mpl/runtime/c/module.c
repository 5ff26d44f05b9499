/* mpl.runtime._engine: the compiled engine of the policy runtime (one extension module built
 * from the units of this folder, each with its own init function below). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "budget.h"
#include "learned.h"

int stores_init_module(PyObject *m);
int engine_init_module(PyObject *m);
int pack_init_module(PyObject *m);
int belady_init_module(PyObject *m);
int jsonl_init_module(PyObject *m);

/* the calling convention between this module and mpl/runtime/compiled.py: a build of an older
 * source is not used */
#define ENGINE_ABI 4

/* _wrap_probe(a, b): a + b in signed 64-bit arithmetic, overflow and all. The sanitizer run
 * (tests/run_sanitizers.sh) calls it with a sum past 2^63 - 1 and expects UBSan to report it:
 * the proof that the build does not hide signed overflow behind -fwrapv. Never used
 * otherwise. */
static PyObject *wrap_probe(PyObject *self, PyObject *args) {
    long long a, b;
    if (!PyArg_ParseTuple(args, "LL:_wrap_probe", &a, &b)) return NULL;
    volatile long long x = a;
    return PyLong_FromLongLong(x + b);
}

static PyMethodDef module_methods[] = {
    {"_wrap_probe", wrap_probe, METH_VARARGS, "test-only: a + b in signed 64 bits"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "mpl.runtime._engine",
    "The compiled engine of the policy runtime (see mpl/runtime/compiled.py).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__engine(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddIntConstant(m, "ABI", ENGINE_ABI) < 0 || stores_init_module(m) < 0 ||
            learned_init_module(m) < 0 ||
            budget_init_module(m) < 0 || engine_init_module(m) < 0 || pack_init_module(m) < 0 ||
            belady_init_module(m) < 0 || jsonl_init_module(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
