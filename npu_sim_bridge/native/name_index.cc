// NameIndex: node names to their places, for graph/name_index.py (which has a Python twin of it).
//
// A place is the position a name was appended at. The pipeline numbers every node so (the view's
// places, the report's rows, partition's units), and a dict for each, with an int object per number,
// was a quarter of a rewrite's peak memory on graphs of small nodes. Here a name costs its pointer
// and two 4-byte slots of an open-addressing table over the names' own (cached) str hashes; a place
// becomes an int object only while Python holds it.
//
// The arrays come from Python's allocator, so tracemalloc counts them as it counts the dicts they
// stand for. Names are exact strs (they hold no references, so the index needs no GC support).
// Every call runs with the GIL held.

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

namespace {

constexpr int32_t kEmpty = -1;  // a slot never used since the table was made
constexpr int32_t kGone = -2;   // a slot whose name was removed (probes go on past it)

struct NameIndex {
  PyObject_HEAD
  PyObject** names;       // by place: the name (a reference of the index's own), nullptr once removed
  Py_ssize_t places;      // places given out: live names and removed ones
  Py_ssize_t capacity;    // of `names`
  int32_t* slots;         // a place, kEmpty or kGone
  Py_ssize_t mask;        // the slot count less one (a power of two less one)
  Py_ssize_t live;        // names held
  Py_ssize_t filled;      // slots not kEmpty
  Py_ssize_t renumbered;  // how many times `renumber` ran (an iterator stops if it changes)
};

struct Found {
  Py_ssize_t place;  // the name's place, -1 when the index lacks it, -2 with a Python error set
  Py_ssize_t slot;   // its slot; when missing, the slot to put it in
};

PyTypeObject* index_type = nullptr;
PyTypeObject* iterator_type = nullptr;

// `name`'s hash, or -1 with a TypeError set when it is not an exact str.
Py_hash_t HashOf(PyObject* name) {
  if (!PyUnicode_CheckExact(name)) {
    PyErr_Format(PyExc_TypeError, "NameIndex holds node names (str), not %.200s", Py_TYPE(name)->tp_name);
    return -1;
  }
  return PyObject_Hash(name);  // computed once per str, then read from it
}

Found Find(const NameIndex* self, PyObject* name, Py_hash_t hash) {
  size_t perturb = static_cast<size_t>(hash);
  size_t slot = static_cast<size_t>(hash) & static_cast<size_t>(self->mask);
  Py_ssize_t free_slot = -1;
  for (;;) {
    const int32_t place = self->slots[slot];
    if (place == kEmpty) return {-1, free_slot >= 0 ? free_slot : static_cast<Py_ssize_t>(slot)};
    if (place == kGone) {
      if (free_slot < 0) free_slot = static_cast<Py_ssize_t>(slot);
    } else {
      PyObject* held = self->names[place];
      if (held == name) return {place, static_cast<Py_ssize_t>(slot)};
      if (PyObject_Hash(held) == hash) {
        const int same = PyUnicode_Compare(held, name);
        if (same == -1 && PyErr_Occurred()) return {-2, -1};
        if (same == 0) return {place, static_cast<Py_ssize_t>(slot)};
      }
    }
    perturb >>= 5;
    slot = (slot * 5 + perturb + 1) & static_cast<size_t>(self->mask);
  }
}

// Make the table anew, for the live names, at least three slots for every two of them.
int Rehash(NameIndex* self) {
  Py_ssize_t size = 8;
  while (size * 2 < (self->live + 1) * 3) size *= 2;
  auto* slots = static_cast<int32_t*>(PyMem_Malloc(sizeof(int32_t) * size));
  if (slots == nullptr) {
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < size; ++i) slots[i] = kEmpty;
  PyMem_Free(self->slots);
  self->slots = slots;
  self->mask = size - 1;
  self->filled = self->live;
  for (Py_ssize_t place = 0; place < self->places; ++place) {
    PyObject* name = self->names[place];
    if (name == nullptr) continue;
    const Py_hash_t hash = PyObject_Hash(name);
    size_t perturb = static_cast<size_t>(hash);
    size_t slot = static_cast<size_t>(hash) & static_cast<size_t>(self->mask);
    while (slots[slot] != kEmpty) {
      perturb >>= 5;
      slot = (slot * 5 + perturb + 1) & static_cast<size_t>(self->mask);
    }
    slots[slot] = static_cast<int32_t>(place);
  }
  return 0;
}

// Room in `names` for one more place: 0, or -1 with MemoryError set.
int Reserve(NameIndex* self) {
  if (self->places < self->capacity) return 0;
  const Py_ssize_t grown = self->capacity < 16 ? 16 : self->capacity + self->capacity / 2;
  auto* names = static_cast<PyObject**>(PyMem_Realloc(self->names, sizeof(PyObject*) * grown));
  if (names == nullptr) {
    PyErr_NoMemory();
    return -1;
  }
  self->names = names;
  self->capacity = grown;
  return 0;
}

// Append `name` at the next place; returns the place, -1 with an error set (-2: the name is held
// already, with ValueError set).
Py_ssize_t Append(NameIndex* self, PyObject* name) {
  const Py_hash_t hash = HashOf(name);
  if (hash == -1) return -1;
  if (self->places >= INT32_MAX) {
    PyErr_SetString(PyExc_OverflowError, "NameIndex holds at most 2**31 - 1 places");
    return -1;
  }
  if ((self->filled + 1) * 3 > (self->mask + 1) * 2 && Rehash(self) != 0) return -1;
  const Found found = Find(self, name, hash);
  if (found.place == -2) return -1;
  if (found.place >= 0) {
    PyErr_Format(PyExc_ValueError, "the name %R is held already", name);
    return -2;
  }
  if (Reserve(self) != 0) return -1;
  if (self->slots[found.slot] == kEmpty) ++self->filled;
  self->slots[found.slot] = static_cast<int32_t>(self->places);
  Py_INCREF(name);
  self->names[self->places] = name;
  ++self->live;
  return self->places++;
}

// Append every name of `names`; one held already is skipped but takes its place (left empty), as
// dict(zip(names, range(len(names)))) numbers them. 0, or -1 with an error set.
int AppendAll(NameIndex* self, PyObject* names, bool repeats_allowed) {
  PyObject* iterator = PyObject_GetIter(names);
  if (iterator == nullptr) return -1;
  PyObject* name;
  while ((name = PyIter_Next(iterator)) != nullptr) {
    const Py_ssize_t place = Append(self, name);
    Py_DECREF(name);
    if (place == -2 && repeats_allowed) {
      PyErr_Clear();
      if (Reserve(self) != 0) {
        Py_DECREF(iterator);
        return -1;
      }
      self->names[self->places++] = nullptr;
      continue;
    }
    if (place < 0) {
      Py_DECREF(iterator);
      return -1;
    }
  }
  Py_DECREF(iterator);
  return PyErr_Occurred() ? -1 : 0;
}

// ------------------------------------------------------------------ the type
PyObject* IndexNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject* names = nullptr;
  static const char* keywords[] = {"names", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:NameIndex", const_cast<char**>(keywords), &names)) {
    return nullptr;
  }
  auto* self = reinterpret_cast<NameIndex*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->names = nullptr;
  self->places = self->capacity = self->live = self->filled = self->renumbered = 0;
  self->slots = nullptr;
  Py_ssize_t hint = names != nullptr ? PyObject_LengthHint(names, 0) : 0;
  if (hint < 0) hint = 0;
  if (hint > 0) {
    self->names = static_cast<PyObject**>(PyMem_Malloc(sizeof(PyObject*) * hint));
    if (self->names == nullptr) {
      Py_DECREF(self);
      return PyErr_NoMemory();
    }
    self->capacity = hint;
  }
  self->live = hint;  // sizes the first table for them all
  const int made = Rehash(self);
  self->live = 0;
  self->filled = 0;
  if (made != 0 || (names != nullptr && AppendAll(self, names, true) != 0)) {
    Py_DECREF(self);
    return nullptr;
  }
  return reinterpret_cast<PyObject*>(self);
}

void IndexDealloc(PyObject* object) {
  auto* self = reinterpret_cast<NameIndex*>(object);
  for (Py_ssize_t place = 0; place < self->places; ++place) Py_XDECREF(self->names[place]);
  PyMem_Free(self->names);
  PyMem_Free(self->slots);
  PyTypeObject* type = Py_TYPE(object);
  type->tp_free(object);
  Py_DECREF(type);
}

Py_ssize_t IndexLength(PyObject* object) { return reinterpret_cast<NameIndex*>(object)->live; }

// The place of `name` (-1 when missing, -2 with an error set); anything but an exact str is missing.
Py_ssize_t PlaceOf(NameIndex* self, PyObject* name) {
  if (!PyUnicode_CheckExact(name)) return -1;
  const Py_hash_t hash = PyObject_Hash(name);
  if (hash == -1) return -2;
  return Find(self, name, hash).place;
}

PyObject* IndexSubscript(PyObject* object, PyObject* name) {
  const Py_ssize_t place = PlaceOf(reinterpret_cast<NameIndex*>(object), name);
  if (place == -2) return nullptr;
  if (place == -1) {
    PyErr_SetObject(PyExc_KeyError, name);
    return nullptr;
  }
  return PyLong_FromSsize_t(place);
}

int IndexContains(PyObject* object, PyObject* name) {
  const Py_ssize_t place = PlaceOf(reinterpret_cast<NameIndex*>(object), name);
  return place == -2 ? -1 : place >= 0;
}

PyObject* IndexGet(PyObject* object, PyObject* const* args, Py_ssize_t count) {
  if (count < 1 || count > 2) {
    PyErr_SetString(PyExc_TypeError, "get(name, default=None)");
    return nullptr;
  }
  const Py_ssize_t place = PlaceOf(reinterpret_cast<NameIndex*>(object), args[0]);
  if (place == -2) return nullptr;
  if (place >= 0) return PyLong_FromSsize_t(place);
  PyObject* fallback = count == 2 ? args[1] : Py_None;
  Py_INCREF(fallback);
  return fallback;
}

PyObject* IndexAppend(PyObject* object, PyObject* name) {
  const Py_ssize_t place = Append(reinterpret_cast<NameIndex*>(object), name);
  return place < 0 ? nullptr : PyLong_FromSsize_t(place);
}

PyObject* IndexExtend(PyObject* object, PyObject* names) {
  if (AppendAll(reinterpret_cast<NameIndex*>(object), names, false) != 0) return nullptr;
  Py_RETURN_NONE;
}

PyObject* IndexPop(PyObject* object, PyObject* name) {
  auto* self = reinterpret_cast<NameIndex*>(object);
  if (!PyUnicode_CheckExact(name)) {
    PyErr_SetObject(PyExc_KeyError, name);
    return nullptr;
  }
  const Py_hash_t hash = PyObject_Hash(name);
  if (hash == -1) return nullptr;
  const Found found = Find(self, name, hash);
  if (found.place == -2) return nullptr;
  if (found.place == -1) {
    PyErr_SetObject(PyExc_KeyError, name);
    return nullptr;
  }
  self->slots[found.slot] = kGone;
  Py_CLEAR(self->names[found.place]);
  --self->live;
  return PyLong_FromSsize_t(found.place);
}

PyObject* IndexRenumber(PyObject* object, PyObject* /*unused*/) {
  auto* self = reinterpret_cast<NameIndex*>(object);
  Py_ssize_t kept = 0;
  for (Py_ssize_t place = 0; place < self->places; ++place) {
    if (self->names[place] != nullptr) self->names[kept++] = self->names[place];
  }
  self->places = kept;
  ++self->renumbered;
  if (Rehash(self) != 0) return nullptr;
  Py_RETURN_NONE;
}

PyObject* IndexName(PyObject* object, PyObject* argument) {
  auto* self = reinterpret_cast<NameIndex*>(object);
  const Py_ssize_t place = PyLong_AsSsize_t(argument);
  if (place == -1 && PyErr_Occurred()) return nullptr;
  if (place < 0 || place >= self->places || self->names[place] == nullptr) {
    PyErr_Format(PyExc_IndexError, "no name at place %zd", place);
    return nullptr;
  }
  Py_INCREF(self->names[place]);
  return self->names[place];
}

PyObject* IndexSizeof(PyObject* object, PyObject* /*unused*/) {
  auto* self = reinterpret_cast<NameIndex*>(object);
  return PyLong_FromSsize_t(static_cast<Py_ssize_t>(sizeof(NameIndex)) + self->capacity * sizeof(PyObject*) +
                            (self->mask + 1) * sizeof(int32_t));
}

// ------------------------------------------------------------- iteration
enum IterKind { kNames = 0, kItems = 1, kPlaces = 2 };

struct NameIterator {
  PyObject_HEAD
  NameIndex* index;
  Py_ssize_t place;
  Py_ssize_t renumbered;
  int kind;
};

PyObject* MakeIterator(PyObject* object, int kind) {
  auto* iterator = PyObject_New(NameIterator, iterator_type);
  if (iterator == nullptr) return nullptr;
  Py_INCREF(object);
  iterator->index = reinterpret_cast<NameIndex*>(object);
  iterator->place = 0;
  iterator->renumbered = iterator->index->renumbered;
  iterator->kind = kind;
  return reinterpret_cast<PyObject*>(iterator);
}

PyObject* IndexIter(PyObject* object) { return MakeIterator(object, kNames); }
PyObject* IndexItems(PyObject* object, PyObject* /*unused*/) { return MakeIterator(object, kItems); }
PyObject* IndexValues(PyObject* object, PyObject* /*unused*/) { return MakeIterator(object, kPlaces); }
PyObject* IndexKeys(PyObject* object, PyObject* /*unused*/) { return MakeIterator(object, kNames); }

PyObject* IteratorNext(PyObject* object) {
  auto* iterator = reinterpret_cast<NameIterator*>(object);
  NameIndex* index = iterator->index;
  if (iterator->renumbered != index->renumbered) {
    PyErr_SetString(PyExc_RuntimeError, "NameIndex renumbered during iteration");
    return nullptr;
  }
  while (iterator->place < index->places && index->names[iterator->place] == nullptr) ++iterator->place;
  if (iterator->place >= index->places) return nullptr;  // StopIteration
  const Py_ssize_t place = iterator->place++;
  PyObject* name = index->names[place];
  if (iterator->kind == kNames) {
    Py_INCREF(name);
    return name;
  }
  if (iterator->kind == kPlaces) return PyLong_FromSsize_t(place);
  return Py_BuildValue("(On)", name, place);
}

void IteratorDealloc(PyObject* object) {
  auto* iterator = reinterpret_cast<NameIterator*>(object);
  Py_DECREF(iterator->index);
  PyTypeObject* type = Py_TYPE(object);
  PyObject_Free(object);
  Py_DECREF(type);
}

PyMethodDef kIndexMethods[] = {
    {"get", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(IndexGet)), METH_FASTCALL,
     "get(name, default=None): the name's place, or default"},
    {"append", IndexAppend, METH_O, "append(name) -> its place, the next one (ValueError if held)"},
    {"extend", IndexExtend, METH_O, "extend(names): append each (ValueError at one held already)"},
    {"pop", IndexPop, METH_O, "pop(name) -> its place, which stays empty until renumber (KeyError if missing)"},
    {"renumber", IndexRenumber, METH_NOARGS, "renumber(): the live names take places 0, 1, ... in order"},
    {"name", IndexName, METH_O, "name(place) -> the name there (IndexError if none)"},
    {"items", IndexItems, METH_NOARGS, "(name, place) of the live names, in place order"},
    {"values", IndexValues, METH_NOARGS, "the live names' places, in order"},
    {"keys", IndexKeys, METH_NOARGS, "the live names, in place order"},
    {"__sizeof__", IndexSizeof, METH_NOARGS, "bytes held"},
    {nullptr, nullptr, 0, nullptr}};

PyType_Slot kIndexSlots[] = {
    {Py_tp_new, reinterpret_cast<void*>(IndexNew)},
    {Py_tp_dealloc, reinterpret_cast<void*>(IndexDealloc)},
    {Py_tp_iter, reinterpret_cast<void*>(IndexIter)},
    {Py_tp_methods, kIndexMethods},
    {Py_mp_length, reinterpret_cast<void*>(IndexLength)},
    {Py_mp_subscript, reinterpret_cast<void*>(IndexSubscript)},
    {Py_sq_length, reinterpret_cast<void*>(IndexLength)},
    {Py_sq_contains, reinterpret_cast<void*>(IndexContains)},
    {Py_tp_doc, const_cast<char*>("NameIndex(names=()): each name's place, the position it was appended at")},
    {0, nullptr}};

PyType_Spec kIndexSpec = {"npu_sim_bridge.NameIndex", sizeof(NameIndex), 0, Py_TPFLAGS_DEFAULT, kIndexSlots};

PyType_Slot kIteratorSlots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(IteratorDealloc)},
    {Py_tp_iter, reinterpret_cast<void*>(PyObject_SelfIter)},
    {Py_tp_iternext, reinterpret_cast<void*>(IteratorNext)},
    {0, nullptr}};

PyType_Spec kIteratorSpec = {"npu_sim_bridge.NameIndexIterator", sizeof(NameIterator), 0, Py_TPFLAGS_DEFAULT,
                             kIteratorSlots};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_name_index", "NameIndex (see graph/name_index.py)", -1,
                       nullptr, nullptr, nullptr, nullptr, nullptr};

}  // namespace

extern "C" __attribute__((visibility("default"))) PyObject* PyInit__name_index() {
  PyObject* module = PyModule_Create(&kModule);
  if (module == nullptr) return nullptr;
  index_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&kIndexSpec));
  iterator_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&kIteratorSpec));
  if (index_type == nullptr || iterator_type == nullptr ||
      PyModule_AddObjectRef(module, "NameIndex", reinterpret_cast<PyObject*>(index_type)) != 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
