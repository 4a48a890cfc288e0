package partition

import (
	"bytes"
	"testing"
)

// largeFramesLog writes three frames of three 1 MiB records each (offsets
// 0-2, 3-5, 6-8: each frame keeping over stoppedFrameBytes, so cached only as
// the large frame), with a cache budget, and reopens it so nothing is
// cached.
func largeFramesLog(t *testing.T) *Log {
	t.Helper()
	opts := Options{FS: newDisk(t, 1), CacheBudget: NewCacheBudget(64 << 20)}
	l := openLog(t, opts)
	for from := int64(0); from < 9; from += 3 {
		if _, err := l.Produce(bg, bigRecords(from, 3, 1<<20)); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	l = openLog(t, opts)
	t.Cleanup(func() { closeLog(t, l) })
	return l
}

// stopInside reads the record at offset and stops, leaving its frame
// cached as the large one, and returns that frame.
func stopInside(t *testing.T, l *Log, offset int64) *cachedFrame {
	t.Helper()
	if _, err := l.ReadFunc(offset, 1, 1<<30, func(ReadRecord) error { return nil }); err != nil {
		t.Fatal(err)
	}
	l.cache.mu.Lock()
	defer l.cache.mu.Unlock()
	f := l.cache.large
	if f == nil || offset < f.base || offset >= f.end || f.pooled == nil {
		t.Fatalf("a lending read that stopped inside the frame of offset %d left %+v as the large frame, want it in its pooled buffer", offset, f)
	}
	return f
}

func recycled(l *Log, f *cachedFrame) bool {
	l.cache.mu.Lock()
	defer l.cache.mu.Unlock()
	return f.recycled
}

// TestReadFunc_ALargeFrameGoesBackToThePoolOnlyWhenNobodyHoldsIt: the
// large frame a lending read stopped inside keeps the read's pooled
// buffer; when a later stop replaces it, the buffer goes back to the pool
// (no fresh 16 MiB buffer for every frame of a catch-up), but never while
// a lending reader is still handing out its records: those records stay
// what was written though other reads take buffers from the pool
// meanwhile.
func TestReadFunc_ALargeFrameGoesBackToThePoolOnlyWhenNobodyHoldsIt(t *testing.T) {
	l := largeFramesLog(t)
	first := stopInside(t, l, 0)
	var inside bool
	_, err := l.ReadFunc(1, 1, 1<<30, func(r ReadRecord) error {
		inside = true
		second := stopInside(t, l, 3) // replaces the first frame
		if recycled(l, first) {
			t.Fatal("the large frame went back to the pool while a lending read held it")
		}
		stopInside(t, l, 6) // takes a buffer from the pool, recycles the second
		if !recycled(l, second) {
			t.Fatal("a large frame nobody held did not go back to the pool when replaced")
		}
		if !bytes.Equal(r.Value, bigValue(1, 1<<20)) {
			t.Fatal("a lent record changed under its reader")
		}
		return nil
	})
	if err != nil || !inside {
		t.Fatalf("read of offset 1: %v (lent: %v)", err, inside)
	}
	if !recycled(l, first) {
		t.Fatal("the replaced large frame did not go back to the pool when its last reader let go")
	}
}

// TestRead_ALargeFrameHandedToAReaderThatKeepsItIsNeverPooled: Read
// returns records that point into the large frame's buffer for as long as
// the caller keeps them, so once Read took records from it the buffer is
// never pooled, and the records stay what was written after the frame
// leaves the cache and other reads take buffers.
func TestRead_ALargeFrameHandedToAReaderThatKeepsItIsNeverPooled(t *testing.T) {
	l := largeFramesLog(t)
	first := stopInside(t, l, 0)
	res, err := l.Read(1, 2, 1<<30)
	if err != nil || len(res.Records) != 2 {
		t.Fatalf("read: %d records, %v", len(res.Records), err)
	}
	stopInside(t, l, 3)
	stopInside(t, l, 6)
	if recycled(l, first) {
		t.Fatal("a large frame Read returned records from went back to the pool")
	}
	for i, r := range res.Records {
		if !bytes.Equal(r.Value, bigValue(int64(1+i), 1<<20)) {
			t.Fatalf("record %d changed after Read returned it", 1+i)
		}
	}
}

// TestFrameCache_ARefusedLargeFrameGoesBackToThePool: a large frame the
// budget cannot take was never visible to a reader; its buffer is pooled
// at once.
func TestFrameCache_ARefusedLargeFrameGoesBackToThePool(t *testing.T) {
	buf, pooled := getBuf(frameCacheBytes + 1<<20) // keeps more than a log's frames may: only the large frame
	c := &frameCache{budget: NewCacheBudget(1 << 20)}
	f := &cachedFrame{base: 0, end: 1, records: []ReadRecord{{Value: buf}}, bytes: len(buf), pooled: pooled}
	c.putStopped(f)
	if c.large != nil || !f.recycled {
		t.Fatalf("a frame over the budget: cached %v, pooled again %v", c.large != nil, f.recycled)
	}
}

// TestFrameCache_AStoppedFrameTheFramesHoldIsNotCachedAgainAsLarge: a
// frame written for a tail reader (among the frames, up to 2 MiB) that a
// read then stops inside, kept in place over 1 MiB, is not cached a
// second time as the large frame: it would be counted twice, displace
// the large frame there, and never be served (get looks in the frames
// first). Its buffer goes back to the pool at once.
func TestFrameCache_AStoppedFrameTheFramesHoldIsNotCachedAgainAsLarge(t *testing.T) {
	c := &frameCache{budget: NewCacheBudget(64 << 20)}
	written := &cachedFrame{base: 0, end: 1, records: []ReadRecord{{}}, bytes: 1536 << 10}
	if !c.put(written) {
		t.Fatal("the written frame was not cached")
	}
	buf, pooled := getBuf(2 << 20)
	stopped := &cachedFrame{base: 0, end: 1, records: []ReadRecord{{Value: buf}}, bytes: len(buf) + 64, pooled: pooled}
	c.putStopped(stopped)
	if c.large != nil || !stopped.recycled || c.bytes != written.bytes || c.budget.Used() != int64(written.bytes) {
		t.Fatalf("large %v, buffer pooled again %v, counted %d (budget %d); want only the written frame's %d", c.large != nil, stopped.recycled, c.bytes, c.budget.Used(), written.bytes)
	}
}

// TestFrameCache_TheLargeFrameIsNotCachedAgainAmongTheFrames: the other order
// of the race above: a read's decode of a frame (frameAt, after missing
// the cache) put after another read stopped inside the same frame and
// cached it as large. It is refused, so the frame is counted once, and
// get serves the large frame.
func TestFrameCache_TheLargeFrameIsNotCachedAgainAmongTheFrames(t *testing.T) {
	c := &frameCache{budget: NewCacheBudget(64 << 20)}
	buf, pooled := getBuf(2 << 20)
	stopped := &cachedFrame{base: 0, end: 1, records: []ReadRecord{{Value: buf}}, bytes: len(buf) + 64, pooled: pooled}
	c.putStopped(stopped)
	if c.large != stopped {
		t.Fatal("the stopped frame was not cached as large")
	}
	decoded := &cachedFrame{base: 0, end: 1, records: []ReadRecord{{}}, bytes: 1536 << 10}
	if c.put(decoded) {
		t.Fatal("put cached a frame the large frame already is")
	}
	if len(c.frames) != 0 || c.bytes != stopped.bytes || c.budget.Used() != int64(stopped.bytes) || c.get(0, false) != stopped {
		t.Fatalf("frames %d, counted %d (budget %d); want only the large frame's %d, served", len(c.frames), c.bytes, c.budget.Used(), stopped.bytes)
	}
}

// TestFrameCache_IdleLargeFramesLeaveHalfTheBudgetToTailFrames: large
// frames keep at most half of a budget. Nothing drops one log's large
// frame for another's tail frames, so logs left idle with one each (an
// embedder's bare logs, which nothing closes for idleness) would
// otherwise fill the budget and keep every other log's tail cache empty;
// a large frame given back frees its share for the next.
func TestFrameCache_IdleLargeFramesLeaveHalfTheBudgetToTailFrames(t *testing.T) {
	const limit, large = 64 << 20, 4 << 20
	budget := NewCacheBudget(limit)
	var idle []*frameCache
	for range limit / large {
		c := &frameCache{budget: budget}
		f := &cachedFrame{base: 0, end: 1, records: []ReadRecord{{}}, bytes: large}
		c.putStopped(f)
		if c.large != nil {
			idle = append(idle, c)
		}
	}
	if want := limit / 2 / large; len(idle) != want {
		t.Fatalf("%d large frames of %d bytes cached under a budget of %d; want %d (half the budget)", len(idle), large, limit, want)
	}
	tail := &frameCache{budget: budget}
	if !tail.put(&cachedFrame{base: 0, end: 1, records: []ReadRecord{{}}, bytes: 4 << 10}) {
		t.Fatalf("a tail frame was refused with the budget's large frames holding %d of %d", budget.Used(), budget.Limit())
	}
	idle[0].close()
	late := &frameCache{budget: budget}
	late.putStopped(&cachedFrame{base: 0, end: 1, records: []ReadRecord{{}}, bytes: large})
	if late.large == nil {
		t.Fatal("a large frame given back at a close did not free its share for the next")
	}
	for _, c := range append(idle[1:], tail, late) {
		c.close()
	}
	if budget.Used() != 0 || budget.large.Load() != 0 {
		t.Fatalf("after every close the budget holds %d bytes, %d of them large frames'", budget.Used(), budget.large.Load())
	}
}
