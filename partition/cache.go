package partition

import (
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/narad-io/storage/wire"
)

const (
	// frameCacheBytes and frameCacheFrames bound one log's decoded frames
	// (the memory they keep: cachedFrame.bytes), so ten thousand logs with
	// a tail reader each stay affordable. A frame written while something
	// reads the log goes into them when it keeps at most frameCacheBytes.
	frameCacheBytes  = 2 << 20
	frameCacheFrames = 8
	// stoppedFrameBytes: a frame a read stopped inside that keeps more
	// than this is cached only as the large frame, under the log's budget (Options.CacheBudget),
	// which the log's own bounds never evict (the budget, when over, drops
	// it first) and whose pooled buffer is recycled (a frame just over a
	// window sits in a buffer twice its size).
	stoppedFrameBytes = 1 << 20
	// navEntries bounds the frame-position cache.
	navEntries = 16
	// proofEntries bounds one log's frame proofs: 64 frames of 16 MiB
	// (a gigabyte of history) cost about 40 KiB.
	proofEntries = 64
)

// cachedFrame is a decoded frame. Its records point into buffers nobody
// writes again while a reader may hold them; readers share them and must
// not modify them.
//
// A large frame a lending read stopped inside keeps its records in that
// read's pooled buffer (pooled, set once). The buffer goes back to the
// pool when the frame has left the cache and no lending reader holds it,
// unless a reader that does not lend was handed the frame: its records
// may point into the buffer for as long as that reader likes, so the
// buffer is left to the garbage collector. Without the recycling, a
// consumer reading a 16 MiB frame in 8 MiB parts allocated (and the kernel
// zeroed) a fresh 16 MiB buffer for every frame.
type cachedFrame struct {
	base, end int64
	records   []ReadRecord
	bytes     int     // the memory it keeps, what the cache counts: decodedBytes
	pooled    *[]byte // the records' pooled buffer, or nil; never changes

	// Under frameCache.mu; used only when pooled is set.
	holders  int  // lending readers between get and release
	shared   bool // handed to a reader that does not lend: never recycled
	dropped  bool // out of the cache: no get finds it any more
	recycled bool // pooled is back in the pool
}

// navEntry says where a frame sits, so a reader at its base, or at the
// offset right after it, finds the frame without the index or a scan.
type navEntry struct {
	seg        *segment
	base, end  int64
	pos, bytes int64
}

// CacheBudget bounds the decoded frames every log sharing it (a node's
// logs) keeps cached, in bytes. A log over it drops its own oldest frames,
// down to caching nothing; a log gives its frames back when it drops them
// and when it closes.
//
// At most half of it holds large frames (the one frame a log keeps that
// a read stopped inside, frameCache.large): nothing drops one log's large
// frame for another's tail frames, so without that bound logs left idle
// with a large frame each (nothing closes the idle logs of an embedder
// without a node) would keep every other log's tail cache empty.
type CacheBudget struct {
	limit int64
	used  atomic.Int64
	large atomic.Int64 // the part of used that large frames keep
}

// DefaultCacheBudgetBytes bounds, together, the decoded frames cached by
// the logs of a process opened without a CacheBudget of their own
// (Options.CacheBudget).
const DefaultCacheBudgetBytes = 256 << 20

// processCacheBudget is the budget of DefaultCacheBudgetBytes the logs
// opened without one share.
var processCacheBudget = NewCacheBudget(DefaultCacheBudgetBytes)

// ProcessCacheBudget is the budget of DefaultCacheBudgetBytes that every
// log of the process opened without one of its own shares.
func ProcessCacheBudget() *CacheBudget { return processCacheBudget }

// NewCacheBudget returns a budget of limit bytes.
func NewCacheBudget(limit int64) *CacheBudget { return &CacheBudget{limit: limit} }

// Limit is the budget's bound in bytes.
func (b *CacheBudget) Limit() int64 { return b.limit }

// Used is the bytes cached under the budget now.
func (b *CacheBudget) Used() int64 { return b.used.Load() }

func (b *CacheBudget) take(n int) {
	if b != nil {
		b.used.Add(int64(n))
	}
}

func (b *CacheBudget) over() bool { return b != nil && b.used.Load() > b.limit }

// takeLarge counts n bytes of a large frame against the half of the
// budget large frames may keep, and reports whether they fit (the caller
// still takes them from the whole budget).
func (b *CacheBudget) takeLarge(n int) bool {
	if b == nil {
		return false
	}
	for {
		held := b.large.Load()
		if held+int64(n) > b.limit/2 {
			return false
		}
		if b.large.CompareAndSwap(held, held+int64(n)) {
			return true
		}
	}
}

// giveLarge gives back n bytes takeLarge counted.
func (b *CacheBudget) giveLarge(n int) {
	if b != nil {
		b.large.Add(-int64(n))
	}
}

// frameCache holds a log's decoded frames (docs/design.md, "Flusher
// pipeline": frameCache) and frame positions (navCache), shared by readers
// and the actor. Both are invalidated on a failed commit's truncate
// (forgetFrom) and a retention detach (forgetBelow).
//
// Besides frames, one frame of any size may be cached as large: the one
// a read of records stopped inside when it keeps over stoppedFrameBytes, so a
// frame larger than a reader's max bytes is read and checked once, not
// once per part (it still counts against the budget).
//
// It also holds the proofs of large frames (frameProof), which let a
// lending read stream a large frame a part at a time.
//
// Invariants, under mu: frames, large, nav and proofs hold no entry for
// an offset that is not in the log, or whose bytes differ from what is in
// the log; no frame is both among frames and large (it would be counted
// twice); bytes, the sum of frames' and large's bytes, and the proofs'
// memory are together exactly what the log holds of budget, and large's
// bytes what it holds of the budget's share for large frames;
// nProofs is len(proofs); once closed, frames, large and proofs stay
// empty.
type frameCache struct {
	budget *CacheBudget // shared with the node's other logs (Options.CacheBudget); nil only in tests of the cache alone

	mu     sync.Mutex
	frames []*cachedFrame // oldest first
	large  *cachedFrame   // a frame keeping over stoppedFrameBytes a read stopped inside
	bytes  int
	nav    []navEntry    // oldest first
	proofs []*frameProof // oldest first
	floor  int64         // forgetBelow's offset: nothing below it is cached again
	closed bool          // the log closed: nothing is cached any more

	nProofs atomic.Int32 // read without mu, so a scan of small frames takes no lock to learn there are none
}

// get returns the cached frame holding offset. A lending reader (lend)
// holds it until it calls release; any other reader may keep its records
// for good.
func (c *frameCache) get(offset int64, lend bool) *cachedFrame {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.frames) - 1; i >= 0; i-- {
		if f := c.frames[i]; offset >= f.base && offset < f.end {
			return f
		}
	}
	if f := c.large; f != nil && offset >= f.base && offset < f.end {
		if lend {
			f.holders++
		} else {
			f.shared = true
		}
		return f
	}
	return nil
}

// release ends a lending reader's hold on a frame get returned: the
// reader no longer touches its records.
func (c *frameCache) release(f *cachedFrame, lend bool) {
	if !lend || f.pooled == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f.holders--
	c.recycleLocked(f)
}

// dropLocked takes f out of the cache's reach; its buffer goes back to the
// pool once nobody holds it.
func (c *frameCache) dropLocked(f *cachedFrame) {
	f.dropped = true
	c.recycleLocked(f)
}

func (c *frameCache) recycleLocked(f *cachedFrame) {
	if f.pooled != nil && f.dropped && f.holders == 0 && !f.shared && !f.recycled {
		f.recycled = true
		putBuf(f.pooled)
	}
}

// putStopped caches the frame a read of records stopped inside: in frames
// when it is small enough, else as the large frame, replacing the one
// before, unless the budget cannot take it or the frames hold it
// already (a written frame keeps up to 2 MiB there, a stopped one in
// place up to twice that: it would be counted twice and never served).
func (c *frameCache) putStopped(f *cachedFrame) {
	if f.bytes <= stoppedFrameBytes {
		c.put(f)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.budget == nil || f.base < c.floor || slices.ContainsFunc(c.frames, func(g *cachedFrame) bool { return g.base == f.base }) {
		c.dropLocked(f)
		return
	}
	c.dropLargeLocked()
	if !c.budget.takeLarge(f.bytes) {
		c.dropLocked(f)
		return
	}
	c.budget.take(f.bytes)
	if c.budget.over() {
		c.budget.take(-f.bytes)
		c.budget.giveLarge(f.bytes)
		c.dropLocked(f)
		return
	}
	c.large = f
	c.bytes += f.bytes
}

func (c *frameCache) dropLargeLocked() {
	if c.large != nil {
		c.bytes -= c.large.bytes
		c.budget.take(-c.large.bytes)
		c.budget.giveLarge(c.large.bytes)
		c.dropLocked(c.large)
		c.large = nil
	}
}

// put caches a decoded frame, and reports whether the cache holds it
// after: not when it was refused, nor when the budget evicted it at once.
// A frame that is the large frame already (a read's decode racing another's
// putStopped) is refused, as putStopped refuses one the frames hold: it
// would be counted twice.
func (c *frameCache) put(f *cachedFrame) (held bool) {
	if f.bytes > frameCacheBytes {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || f.base < c.floor || (c.large != nil && c.large.base == f.base) {
		return false
	}
	for _, g := range c.frames {
		if g.base == f.base {
			return false
		}
	}
	c.frames = append(c.frames, f)
	c.bytes += f.bytes
	c.budget.take(f.bytes)
	if c.budget.over() {
		c.dropLargeLocked() // the large frame goes first
	}
	for len(c.frames) > 0 && (len(c.frames) > frameCacheFrames || c.bytes-c.largeBytes() > frameCacheBytes || c.budget.over()) {
		c.bytes -= c.frames[0].bytes
		c.budget.take(-c.frames[0].bytes)
		c.frames[0] = nil
		c.frames = c.frames[1:]
	}
	return len(c.frames) > 0 && c.frames[len(c.frames)-1] == f // the newest: it stays if any does
}

// mayCache reports whether the frame with header h, decoded, could be
// cached now, so a read seldom decodes one only to have it refused (its
// records' bytes stand for what it keeps, which can be up to twice that
// in place).
func (c *frameCache) mayCache(h wire.FrameHeader) bool {
	bytes := decodedBytes(int(h.UncompressedSize), int(h.RecordCount))
	return bytes <= stoppedFrameBytes || (c.budget != nil && c.budget.used.Load()+int64(bytes) <= c.budget.limit &&
		c.budget.large.Load()+int64(bytes) <= c.budget.limit/2)
}

// decodedBytes is the memory a cached frame keeps and the cache counts:
// the bytes its records point into (a decode buffer, or the window or
// batch the frame sits in) and its slice of records. Counting only the
// bytes on disk let a compressed frame keep many times its count, and a
// frame of small records over four times (64 bytes of ReadRecord each).
func decodedBytes(pinned, records int) int {
	return pinned + records*int(unsafe.Sizeof(ReadRecord{}))
}

func (c *frameCache) largeBytes() int {
	if c.large == nil {
		return 0
	}
	return c.large.bytes
}

// putEnvelopes caches a frame being written from its envelopes, so a tail
// reader is served without a disk read or a decode, counting it at the
// pinned bytes its records keep from the garbage collector and their
// slice; it reports whether it took the frame.
func (c *frameCache) putEnvelopes(base int64, envs [][]byte, pinned int) bool {
	bytes := decodedBytes(pinned, len(envs))
	if bytes > frameCacheBytes {
		return false // before the records are built: put would refuse it
	}
	records := make([]ReadRecord, len(envs))
	for i, env := range envs {
		e, err := wire.ParseEnvelope(env)
		if err != nil {
			return false // never cache what a read would reject
		}
		records[i] = ReadRecord{Offset: base + int64(i), Key: e.Key, Value: e.Payload, CommittedAtUnixMs: e.CommittedAtUnixMs}
	}
	return c.put(&cachedFrame{base: base, end: base + int64(len(envs)), records: records, bytes: bytes})
}

// remember records a frame's position.
func (c *frameCache) remember(seg *segment, base, end, pos, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if base < c.floor {
		return // retention took it while a reader was on it
	}
	for _, e := range c.nav {
		if e.seg == seg && e.base == base {
			return
		}
	}
	if len(c.nav) == navEntries {
		copy(c.nav, c.nav[1:])
		c.nav = c.nav[:navEntries-1]
	}
	c.nav = append(c.nav, navEntry{seg: seg, base: base, end: end, pos: pos, bytes: bytes})
}

// position returns where in seg the frame starting at offset begins, if a
// remembered frame starts there or ends there.
func (c *frameCache) position(seg *segment, offset int64) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.nav) - 1; i >= 0; i-- {
		e := c.nav[i]
		if e.seg != seg {
			continue
		}
		if e.base == offset {
			return e.pos, true
		}
		if e.end == offset {
			return e.pos + e.bytes, true
		}
	}
	return 0, false
}

// putProof keeps p, replacing a proof of the same frame and dropping the
// oldest past proofEntries, unless the budget cannot take it.
func (c *frameCache) putProof(p *frameProof) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || p.base < c.floor {
		return
	}
	c.removeProofsLocked(func(q *frameProof) bool { return q.base == p.base })
	if len(c.proofs) == proofEntries {
		oldest := c.proofs[0]
		c.removeProofsLocked(func(q *frameProof) bool { return q == oldest })
	}
	c.budget.take(p.memory())
	if c.budget.over() {
		c.budget.take(-p.memory())
		return
	}
	c.proofs = append(c.proofs, p)
	c.nProofs.Store(int32(len(c.proofs)))
}

// proof returns the proof of the frame holding offset, or nil.
func (c *frameCache) proof(offset int64) *frameProof {
	if c.nProofs.Load() == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.proofs) - 1; i >= 0; i-- {
		if p := c.proofs[i]; offset >= p.base && offset < p.end {
			return p
		}
	}
	return nil
}

// provenAt reports whether a proof holds the frame at pos of seg.
func (c *frameCache) provenAt(seg *segment, pos int64) bool {
	if c.nProofs.Load() == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.proofs {
		if p.seg == seg && p.pos == pos {
			return true
		}
	}
	return false
}

// dropProof forgets p: what it proved no longer holds.
func (c *frameCache) dropProof(p *frameProof) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeProofsLocked(func(q *frameProof) bool { return q == p })
}

// dropProofAt forgets the proof of the frame at pos of seg, which a read
// found damaged.
func (c *frameCache) dropProofAt(seg *segment, pos int64) {
	if c.nProofs.Load() == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeProofsLocked(func(q *frameProof) bool { return q.seg == seg && q.pos == pos })
}

// removeProofsLocked drops the proofs drop picks, giving their memory back
// to the budget.
func (c *frameCache) removeProofsLocked(drop func(*frameProof) bool) {
	kept := c.proofs[:0]
	for _, p := range c.proofs {
		if drop(p) {
			c.budget.take(-p.memory())
			continue
		}
		kept = append(kept, p)
	}
	clear(c.proofs[len(kept):])
	c.proofs = kept
	c.nProofs.Store(int32(len(kept)))
}

// forgetFrom drops every frame and position reaching offset or beyond.
func (c *frameCache) forgetFrom(offset int64) {
	c.forget(func(base, end int64) bool { return end > offset })
}

// forgetBelow drops every frame and position below offset.
func (c *frameCache) forgetBelow(offset int64) {
	c.mu.Lock()
	c.floor = max(c.floor, offset)
	c.mu.Unlock()
	c.forget(func(base, end int64) bool { return base < offset })
}

// close drops everything and caches nothing more: the log closed, and
// gives its bytes back to the budget.
func (c *frameCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.budget.take(-c.bytes)
	c.bytes = 0
	clear(c.frames)
	if c.large != nil {
		c.budget.giveLarge(c.large.bytes)
		c.dropLocked(c.large)
	}
	c.removeProofsLocked(func(*frameProof) bool { return true })
	c.frames, c.nav, c.large, c.proofs = nil, nil, nil, nil
}

func (c *frameCache) forget(drop func(base, end int64) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	frames := c.frames[:0]
	c.budget.take(-c.bytes)
	c.bytes = 0
	for _, f := range c.frames {
		if !drop(f.base, f.end) {
			frames = append(frames, f)
			c.bytes += f.bytes
		}
	}
	clear(c.frames[len(frames):])
	c.frames = frames
	if c.large != nil && drop(c.large.base, c.large.end) {
		c.budget.giveLarge(c.large.bytes)
		c.dropLocked(c.large)
		c.large = nil
	}
	c.bytes += c.largeBytes()
	c.budget.take(c.bytes)
	nav := c.nav[:0]
	for _, e := range c.nav {
		if !drop(e.base, e.end) {
			nav = append(nav, e)
		}
	}
	c.nav = nav
	c.removeProofsLocked(func(p *frameProof) bool { return drop(p.base, p.end) })
}

// hotSetSize is how many sealed segments keep their handle and index.
const hotSetSize = 2

// hotSet is the two sealed segments read most recently: only they keep a
// file handle and a sparse index, so a log with thousands of sealed
// segments holds a handful of descriptors (docs/design.md, "Sealed
// segments do not pin a file descriptor").
type hotSet struct {
	mu   sync.Mutex
	segs []*segment // most recent last
}

// touch makes seg the most recent; the one it pushes out drops its handle.
func (h *hotSet) touch(seg *segment) {
	h.mu.Lock()
	var evicted *segment
	for i, s := range h.segs {
		if s == seg {
			h.segs = append(h.segs[:i], h.segs[i+1:]...)
			break
		}
	}
	h.segs = append(h.segs, seg)
	seg.file.keep()
	if len(h.segs) > hotSetSize {
		evicted = h.segs[0]
		h.segs = h.segs[1:]
	}
	h.mu.Unlock()
	if evicted != nil {
		evicted.file.drop()
	}
}

// remove takes seg out of the set (retention detached it).
func (h *hotSet) remove(seg *segment) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, s := range h.segs {
		if s == seg {
			h.segs = append(h.segs[:i], h.segs[i+1:]...)
			return
		}
	}
}

func (h *hotSet) clear() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.segs = nil
}
