package partition

import (
	"errors"
	"sort"

	"go.uber.org/zap"
)

// OffsetAt returns the offset of the first record whose commit time is at
// or after atMs (milliseconds since the epoch), or the high watermark when
// no record is. It is exact (commit times never decrease along a
// partition); records in damaged frames have no known time and are
// stepped over: the answer is the lowest offset from which the next
// readable record is at or after atMs. The bisection and its cost are
// docs/design.md's "Seek by time".
func (l *Log) OffsetAt(atMs int64) (int64, error) {
	v := l.view.Load()
	if v.closed {
		return 0, ErrLogClosed
	}
	segs := append(append([]*segment(nil), v.sealed...), v.active)
	end := func(i int) int64 {
		if i+1 < len(segs) {
			return segs[i+1].base
		}
		return v.hwm
	}
	// from(o) says whether the first readable record at or after o is at
	// or after atMs (true when none is: the answer lies at or before o).
	// Monotone in o, whatever frames are damaged.
	from := func(o int64) (bool, error) {
		t, found, err := l.timeFrom(max(o, v.start), v.hwm)
		return !found || t >= atMs, err
	}
	var ferr error
	// The first segment whose records all come at or after atMs.
	i := sort.Search(len(segs), func(i int) bool {
		if ferr != nil {
			return true
		}
		ok, err := from(segs[i].base)
		ferr = err
		return ok
	})
	if ferr != nil {
		return 0, ferr
	}
	if i == 0 {
		return v.start, nil
	}
	// The answer lies in segment i-1, or is where segment i begins.
	lo, hi := max(segs[i-1].base, v.start), end(i-1)
	if seg := segs[i-1]; seg != v.active {
		if lo, hi, ferr = l.narrowByTime(seg, lo, hi, atMs, from); ferr != nil {
			return 0, ferr
		}
	}
	n := sort.Search(int(hi-lo), func(k int) bool {
		if ferr != nil {
			return true
		}
		ok, err := from(lo + int64(k))
		ferr = err
		return ok
	})
	if ferr != nil {
		return 0, ferr
	}
	return lo + int64(n), nil
}

// timeFrom returns the commit time of the first readable record at or
// after o and below end, stepping over damaged frames and records
// retention deleted meanwhile; found is false when there is none.
func (l *Log) timeFrom(o, end int64) (t int64, found bool, err error) {
	for o < end {
		res, err := l.Read(o, 1, 1)
		var unreadable *UnreadableError
		switch {
		case errors.As(err, &unreadable) && unreadable.Next > o:
			o = unreadable.Next
			continue
		case errors.Is(err, ErrOffsetDeleted):
			if start := l.StartOffset(); start > o {
				o = start
				continue
			}
			return 0, false, err
		case err != nil:
			return 0, false, err
		}
		if len(res.Records) == 0 || res.Records[0].Offset >= end {
			return 0, false, nil
		}
		return res.Records[0].CommittedAtUnixMs, true, nil
	}
	return 0, false, nil
}

// narrowByTime narrows [lo, hi], the range of a sealed segment where the
// answer lies, to the span between two entries of the segment's time
// index: the last entry before atMs and the first at or after it. The
// index is a hint: the narrower range is taken only when from agrees at
// both of its ends (and the entries that bound it are frames that check
// out), so a stale or lying index costs reads, never a wrong answer;
// without an index, the range is returned as it came.
func (l *Log) narrowByTime(seg *segment, lo, hi, atMs int64, from func(int64) (bool, error)) (int64, int64, error) {
	f, err := seg.file.acquire()
	if err != nil {
		return lo, hi, nil // the search meets the failure, and explains it
	}
	defer seg.file.release()
	l.hot.touch(seg)
	entries, err := l.timeIndexOf(seg, f)
	if err != nil {
		l.logger.Warn("seek by time without the segment's time index", zap.String("segment", seg.path), zap.Error(err))
		return lo, hi, nil
	}
	// Only entries whose frame checks out bound the range: a position that
	// lies would make a read resync past good records.
	k := sort.Search(len(entries), func(k int) bool { return entries[k].TimeMs >= atMs })
	nlo, nhi := lo, hi
	if k > 0 && l.seedIfFrame(seg, f, entries[k-1]) {
		nlo = min(max(lo, entries[k-1].Offset), hi)
	}
	if k < len(entries) && l.seedIfFrame(seg, f, entries[k]) {
		nhi = max(min(hi, entries[k].Offset), nlo)
	}
	if nlo > lo {
		if ok, err := from(nlo); err != nil || ok {
			return lo, hi, err
		}
	}
	if nhi < hi {
		if ok, err := from(nhi); err != nil || !ok {
			return lo, hi, err
		}
	}
	return nlo, nhi, nil
}
