# Included by selector_eval.pyx (one extension module; this file holds its LIKE matcher):
# a LIKE pattern matched on the string's code points, with the segment algorithm of
# jmspy.selector.like. Uses the PyUnicode_* declarations at the top of selector_eval.pyx.


# LIKE matcher kinds, as in jmspy.selector.like.like_matcher.
cdef enum:
    _LIKE_EQUAL = 0      # no wildcard: the whole value equals the text
    _LIKE_AFFIXES = 1    # 'pre%suf'
    _LIKE_CONTAINS = 2   # '%mid%'
    _LIKE_SEGMENTS = 3   # anything with '_', or more '%'


cdef class _LikeMatcher:
    """A LIKE pattern split at ``%`` into fixed-length segments, matched on code points.

    A segment is its text (any character at a ``_`` position) and a mask with 1 at the
    ``_`` positions. First segment anchored at the start, last at the end, the others at
    their leftmost fit in between: O(len(value) * len(pattern)), no backtracking.
    """

    cdef int mode
    cdef str a
    cdef str b
    cdef Py_ssize_t total
    cdef bint single
    cdef list texts
    cdef list masks

    def __cinit__(self, tuple parts):
        segments = [[]]
        for kind, text in parts:
            if kind == "many":
                segments.append([])
            else:
                segments[len(segments) - 1].append((kind, text))
        plain = all(kind == "text" for segment in segments for kind, _ in segment)
        self.texts = []
        self.masks = []
        for segment in segments:
            self.texts.append("".join(text if kind == "text" else "_" for kind, text in segment))
            self.masks.append(b"".join(
                b"\x00" * len(text) if kind == "text" else b"\x01" for kind, text in segment))
        self.total = sum(len(t) for t in self.texts)
        self.single = len(segments) == 1
        self.mode = _LIKE_SEGMENTS
        if plain and len(segments) == 1:
            self.mode = _LIKE_EQUAL
            self.a = self.texts[0]
        elif plain and len(segments) == 2:
            self.mode = _LIKE_AFFIXES
            self.a, self.b = self.texts
        elif plain and len(segments) == 3 and not self.texts[0] and not self.texts[2]:
            self.mode = _LIKE_CONTAINS
            self.a = self.texts[1]

    cdef bint match(self, str value) except -1:
        cdef Py_ssize_t n = len(value)
        if self.mode == _LIKE_EQUAL:
            return value == self.a
        if self.mode == _LIKE_AFFIXES:
            return n >= self.total and value.startswith(self.a) and value.endswith(self.b)
        if self.mode == _LIKE_CONTAINS:
            return self.a in value
        if n < self.total:
            return False
        cdef int kind = PyUnicode_KIND(value)
        cdef void *data = PyUnicode_DATA(value)
        if self.single:
            return n == self.total and _segment_at(kind, data, 0, self.texts[0], self.masks[0])
        cdef str first = self.texts[0]
        cdef Py_ssize_t n_seg = len(self.texts)
        cdef str last = self.texts[n_seg - 1]
        cdef Py_ssize_t end = n - len(last)
        if not _segment_at(kind, data, 0, first, self.masks[0]):
            return False
        if not _segment_at(kind, data, end, last, self.masks[n_seg - 1]):
            return False
        cdef Py_ssize_t pos = len(first)
        cdef Py_ssize_t i, size, p
        cdef str text
        for i in range(1, n_seg - 1):
            text = self.texts[i]
            size = len(text)
            if size == 0:
                continue
            p = pos
            while p + size <= end:
                if _segment_at(kind, data, p, text, self.masks[i]):
                    break
                p += 1
            else:
                return False
            pos = p + size
        return True


cdef bint _segment_at(int kind, void *data, Py_ssize_t pos, str text, bytes mask) noexcept:
    cdef Py_ssize_t i
    cdef Py_ssize_t size = len(text)
    cdef const unsigned char *m = mask
    cdef int tkind = PyUnicode_KIND(text)
    cdef void *tdata = PyUnicode_DATA(text)
    for i in range(size):
        if m[i] == 0 and PyUnicode_READ(kind, data, pos + i) != PyUnicode_READ(tkind, tdata, i):
            return False
    return True
