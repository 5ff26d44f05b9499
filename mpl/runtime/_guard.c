/* mpl.runtime._fast.Guard: the lock of one runtime (included by _fast.c).
 *
 * A runtime is used by one dispatcher at a time (SPEC §11, "Threads and callbacks"). Its
 * Guard is a re-entrant lock with an owner thread and a "busy" mark:
 *
 *   acquire() / release()   the lock; another thread waits (the GIL released meanwhile),
 *                           the owner may nest (a read inside a read);
 *   begin() / end()         a dispatch or a replay: acquire and mark busy; begin() while
 *                           this thread is already busy on the runtime (a callback the
 *                           dispatch invoked - a logging handler, a finalizer - dispatching
 *                           again) raises the RuntimeBusyError the guard was made with;
 *   busy                    True when the calling thread is inside a dispatch or a replay
 *                           of this runtime (a read then gets a snapshot: fast.live_sync).
 *
 * LiveState (_live.c) calls guard_begin / guard_end directly; the pure dispatch and the
 * Python glue use the methods. mpl/runtime/guard.py has the same semantics in Python for
 * the pure backend. */

#include "pythread.h"

typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    unsigned long owner;     /* the holding thread; valid while depth > 0 */
    long depth;              /* acquire() nesting of the owner */
    int busy;                /* a dispatch or replay of the owner is in progress */
    PyObject *busy_error;    /* the exception class of a refused re-entry */
} Guard;

static inline int guard_mine(Guard *g) {
    return g->depth > 0 && g->owner == PyThread_get_thread_ident();
}

/* the lock, waiting (without the GIL) while another thread holds it */
static int guard_acquire(Guard *g) {
    if (guard_mine(g)) {
        if (g->depth == LONG_MAX) {
            PyErr_SetString(PyExc_RuntimeError, "runtime guard: nested too deeply");
            return -1;
        }
        g->depth++;
        return 0;
    }
    if (!PyThread_acquire_lock(g->lock, NOWAIT_LOCK)) {
        Py_BEGIN_ALLOW_THREADS
        PyThread_acquire_lock(g->lock, WAIT_LOCK);
        Py_END_ALLOW_THREADS
    }
    g->owner = PyThread_get_thread_ident();
    g->depth = 1;
    return 0;
}

static int guard_release(Guard *g) {
    if (!guard_mine(g)) {
        PyErr_SetString(PyExc_RuntimeError, "runtime guard: released by a thread that does not hold it");
        return -1;
    }
    if (--g->depth == 0) {
        g->owner = 0;
        g->busy = 0;
        PyThread_release_lock(g->lock);
    }
    return 0;
}

static void guard_refuse(Guard *g, const char *what) {
    PyErr_Format(g->busy_error ? g->busy_error : PyExc_RuntimeError,
                 "%s from inside a dispatch of the same runtime: a callback the dispatch invoked "
                 "(a logging handler, a finalizer, a tick) called back into it; read its statistics "
                 "there, dispatch or change it after the call returns (docs/runtime.md, "
                 "\"Threads and callbacks\")", what);
}

/* a dispatch or replay: the lock and the busy mark (refused while this thread is busy) */
static int guard_begin(Guard *g, const char *what) {
    if (guard_mine(g) && g->busy) {
        guard_refuse(g, what);
        return -1;
    }
    if (guard_acquire(g) < 0) return -1;
    g->busy = 1;
    return 0;
}

/* the end of guard_begin's hold (an exception being raised is left as it is) */
static void guard_end(Guard *g) {
    g->busy = 0;
    if (!guard_mine(g)) return;          /* (released meanwhile by a hostile release()) */
    if (--g->depth == 0) {
        g->owner = 0;
        PyThread_release_lock(g->lock);
    }
}

static PyObject *guard_py_acquire(Guard *g, PyObject *noarg) {
    if (guard_acquire(g) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *guard_py_release(Guard *g, PyObject *noarg) {
    if (guard_mine(g) && g->busy && g->depth == 1) {
        guard_refuse(g, "releasing the runtime's lock");
        return NULL;
    }
    if (guard_release(g) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *guard_py_begin(Guard *g, PyObject *what) {
    const char *w = "a dispatch";
    if (what && PyUnicode_Check(what)) {
        w = PyUnicode_AsUTF8(what);
        if (!w) return NULL;
    }
    if (guard_begin(g, w) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *guard_py_end(Guard *g, PyObject *noarg) {
    if (!guard_mine(g) || !g->busy) {
        PyErr_SetString(PyExc_RuntimeError, "runtime guard: end() without begin()");
        return NULL;
    }
    g->busy = 0;
    if (guard_release(g) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *guard_py_exit(Guard *g, PyObject *args) {
    return guard_py_release(g, NULL);
}

static PyObject *guard_get_busy(Guard *g, void *closure) {
    return PyBool_FromLong(guard_mine(g) && g->busy);
}

static PyObject *guard_get_held(Guard *g, void *closure) {
    return PyBool_FromLong(guard_mine(g));
}

static PyObject *guard_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *err = NULL;
    if (!PyArg_ParseTuple(args, "|O", &err)) return NULL;
    if (err && !(PyType_Check(err) && PyType_IsSubtype((PyTypeObject *)err, (PyTypeObject *)PyExc_Exception))) {
        PyErr_SetString(PyExc_TypeError, "Guard(error): error must be an exception class");
        return NULL;
    }
    Guard *g = (Guard *)type->tp_alloc(type, 0);
    if (!g) return NULL;
    g->lock = PyThread_allocate_lock();
    if (!g->lock) { Py_DECREF(g); return PyErr_NoMemory(); }
    Py_XINCREF(err);
    g->busy_error = err;
    return (PyObject *)g;
}

static void guard_dealloc(Guard *g) {
    PyObject_GC_UnTrack(g);
    Py_CLEAR(g->busy_error);
    if (g->lock) {
        if (g->depth > 0) PyThread_release_lock(g->lock);
        PyThread_free_lock(g->lock);
    }
    Py_TYPE(g)->tp_free((PyObject *)g);
}

static int guard_traverse(Guard *g, visitproc visit, void *arg) {
    Py_VISIT(g->busy_error);
    return 0;
}

static int guard_clear(Guard *g) {
    Py_CLEAR(g->busy_error);
    return 0;
}

static PyMethodDef guard_methods[] = {
    {"acquire", (PyCFunction)guard_py_acquire, METH_NOARGS, "the lock (re-entrant; other threads wait)"},
    {"release", (PyCFunction)guard_py_release, METH_NOARGS, "give the lock back"},
    {"begin", (PyCFunction)guard_py_begin, METH_O,
     "begin(what): a dispatch or replay starts (refused with the busy error inside another)"},
    {"end", (PyCFunction)guard_py_end, METH_NOARGS, "the dispatch or replay is over"},
    {"__enter__", (PyCFunction)guard_py_acquire, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)guard_py_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef guard_getset[] = {
    {"busy", (getter)guard_get_busy, NULL, "the calling thread is inside a dispatch or replay", NULL},
    {"held", (getter)guard_get_held, NULL, "the calling thread holds the lock", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject GuardType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mpl.runtime._fast.Guard",
    .tp_basicsize = sizeof(Guard),
    .tp_dealloc = (destructor)guard_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)guard_traverse,
    .tp_clear = (inquiry)guard_clear,
    .tp_free = PyObject_GC_Del,
    .tp_methods = guard_methods,
    .tp_getset = guard_getset,
    .tp_doc = "Guard(busy_error): the lock of one runtime (see mpl/runtime/guard.py).",
    .tp_new = guard_new,
};

static int guard_init_module(PyObject *m) {
    if (PyType_Ready(&GuardType) < 0) return -1;
    Py_INCREF(&GuardType);
    if (PyModule_AddObject(m, "Guard", (PyObject *)&GuardType) < 0) { Py_DECREF(&GuardType); return -1; }
    return 0;
}
