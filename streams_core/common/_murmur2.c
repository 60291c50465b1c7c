/* murmur2 exactly as Java's org.apache.kafka.common.utils.Utils.murmur2, for the default partitioner.
 * The pure-Python streams_core.common.partitioner.murmur2_py is the reference; a test holds the two
 * equal. Built by `make setup` (an optional extension: without a C compiler the Python one is used). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static PyObject *murmur2(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)view.buf;
    Py_ssize_t length = view.len;
    const uint32_t seed = 0x9747b28cU;
    const uint32_t m = 0x5bd1e995U;
    const int r = 24;
    uint32_t h = seed ^ (uint32_t)length;
    Py_ssize_t blocks = length / 4;
    for (Py_ssize_t i = 0; i < blocks; i++) {
        const unsigned char *p = data + i * 4;
        uint32_t k = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    const unsigned char *tail = data + blocks * 4;
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    PyBuffer_Release(&view);
    return PyLong_FromLong((long)(int32_t)h);
}

static PyMethodDef methods[] = {
    {"murmur2", murmur2, METH_O, "The 32-bit murmur2 hash of a bytes-like object, as Java computes it (signed)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_murmur2", "murmur2 in C for the default partitioner.", -1, methods};

PyMODINIT_FUNC PyInit__murmur2(void) { return PyModule_Create(&module); }
