package partition

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/wire"
)

// readWindow is how much of a segment a read pulls in per file read.
const readWindow = 64 << 10

// ReadRecord is a record as a read returns it. Key and Value point into
// buffers the log may share between readers: do not modify them.
type ReadRecord struct {
	Offset            int64
	CommittedAtUnixMs int64
	Key               []byte
	Value             []byte
}

// ReadResult is what Read returns.
type ReadResult struct {
	Records       []ReadRecord
	Next          int64 // the offset to read next
	HighWatermark int64 // the high watermark the read saw
}

// Read returns records from offset on, below the high watermark only, each
// from a frame whose CRC was checked on this read (or that this log wrote
// and cached). It returns at most maxRecords records and stops before
// maxBytes of keys and values, but returns at least one record when one is
// available. A read at the high watermark returns no records. A read whose
// range reaches a damaged frame returns the records before it, Next at the
// gap; a read that starts in one fails with an *UnreadableError.
//
// Errors: ErrOffsetDeleted, ErrUnreadable, ErrBeyondHighWatermark, an I/O
// error of the segment, and on a closed log ErrLogClosed and nothing else.
func (l *Log) Read(offset int64, maxRecords, maxBytes int) (ReadResult, error) {
	var records []ReadRecord
	rd := reader{next: offset, maxRecords: maxRecords, maxBytes: maxBytes, take: func(r ReadRecord) error {
		records = append(records, r)
		return nil
	}}
	hwm, err := l.read(&rd, false)
	if err != nil {
		return ReadResult{}, err
	}
	return ReadResult{Records: records, Next: rd.next, HighWatermark: hwm}, nil
}

// ReadSummary is what ReadFunc returns: how much it lent, and where the
// next read starts.
type ReadSummary struct {
	Records       int   // records fn took
	Bytes         int   // their keys' and values' bytes
	Next          int64 // the offset to read next: past the last record fn took
	HighWatermark int64 // the high watermark the read saw
}

// ReadFunc is Read that lends each record to fn instead of returning it:
// a record's Key and Value are valid only until fn returns, and the read
// reuses its buffers, so nothing is allocated per read. It lends the
// records Read would return, with the same limits, checks and errors, but
// one: a large frame this log proved is lent a part at a time, so damage
// that came to one of its parts since the proof ends the read before that
// part (docs/design.md, "Reads verify themselves"). An error from fn ends
// the read and ReadFunc returns it, with Next at the record fn refused. fn
// runs while the read holds its segment open and a pooled buffer: a
// consumer that may block (a slow socket) should copy out and return.
func (l *Log) ReadFunc(offset int64, maxRecords, maxBytes int, fn func(ReadRecord) error) (ReadSummary, error) {
	rd := reader{next: offset, maxRecords: maxRecords, maxBytes: maxBytes, take: fn}
	hwm, err := l.read(&rd, true)
	if err != nil {
		return ReadSummary{}, err
	}
	return ReadSummary{Records: rd.records, Bytes: rd.bytes, Next: rd.next, HighWatermark: hwm}, rd.err
}

// reader is one read's progress against its limits: it hands each record
// on to take while the limits leave room (the first always has room).
type reader struct {
	next                 int64 // the offset to read next
	records, bytes       int   // taken so far
	maxRecords, maxBytes int
	take                 func(ReadRecord) error
	err                  error        // take's error, which ended the read
	frame                []ReadRecord // the records of the frame being read, reused
}

// offer hands r on when the limits leave room for it, and reports whether
// it was taken.
func (rd *reader) offer(r ReadRecord) bool {
	size := len(r.Key) + len(r.Value)
	if rd.err != nil || rd.records >= rd.maxRecords || (rd.records > 0 && rd.bytes+size > rd.maxBytes) {
		return false
	}
	if rd.err = rd.take(r); rd.err != nil {
		return false
	}
	rd.records++
	rd.bytes += size
	rd.next = r.Offset + 1
	return true
}

// full reports whether the read has taken all it may (it may always take
// one record).
func (rd *reader) full() bool {
	return rd.err != nil || rd.records >= rd.maxRecords || (rd.records > 0 && rd.bytes >= rd.maxBytes)
}

// read serves Read and ReadFunc: records from rd.next on, from the frame
// cache or the segments, until rd is full or the high watermark. A lending
// read reuses its buffers; otherwise records point into buffers that are
// never reused. It returns the high watermark the read saw.
func (l *Log) read(rd *reader, lend bool) (int64, error) {
	v := l.view.Load()
	switch offset := rd.next; {
	case v.closed:
		return 0, ErrLogClosed
	case offset < v.start:
		return 0, fmt.Errorf("%w: offset %d is below the start offset %d", ErrOffsetDeleted, offset, v.start)
	case offset > v.hwm:
		return 0, fmt.Errorf("%w: offset %d, high watermark %d", ErrBeyondHighWatermark, offset, v.hwm)
	}
	l.readSinceWrite.Store(true) // a tail reader: cache the next frame written
	inParts := lend              // until a proof fails this read (readMissed)
	for rd.next < v.hwm && !rd.full() {
		if f := l.cache.get(rd.next, lend); f != nil {
			l.metrics.frameCacheHits.Inc()
			took := takeRecords(rd, f.records[rd.next-f.base:])
			l.cache.release(f, lend)
			if !took {
				break
			}
			continue
		}
		l.metrics.frameCacheMisses.Inc()
		more, err := l.readMissed(v, rd, lend, &inParts)
		if err != nil {
			if rd.records > 0 && (lend || !errors.Is(err, ErrLogClosed)) {
				break // serve what came before (lent records cannot be taken back); the next read meets the error
			}
			return 0, err
		}
		if !more {
			break
		}
	}
	l.metrics.recordsRead.Add(float64(rd.records))
	l.metrics.bytesRead.Add(float64(rd.bytes))
	return v.hwm, nil
}

// readMissed serves a read that missed the frame cache: a proven frame
// part by part (lendProven), else from the segment (readFrames), where a
// lending read proves a large frame in parts while *inParts and lends it
// the same way. A proof that fails (lendProven's fallback) sends the read
// the ordinary way at once, which says what is wrong, and keeps it off
// proofs made in parts for the rest of the read. It reports whether the
// read may go on.
func (l *Log) readMissed(v *view, rd *reader, lend bool, inParts *bool) (more bool, err error) {
	p := l.proofFor(rd, lend)
	if p == nil {
		if p, more, err = l.readFrames(v, rd, lend, *inParts); p == nil || err != nil {
			return more, err
		}
	}
	more, fallback := l.lendProven(v, rd, p)
	if !fallback {
		return more, nil
	}
	*inParts = false
	_, more, err = l.readFrames(v, rd, lend, false)
	return more, err
}

// recordScratch pools the slices reads decode a frame's records into
// (reader.frame), so a catch-up read of large frames of small records
// does not grow one of thousands of entries on every call.
//
// Invariant: a pooled slice has length 0 and every entry up to its
// capacity zero, so it pins no window or frame its records pointed into.
var recordScratch = sync.Pool{New: func() any { return new([]ReadRecord) }}

// maxScratchRecords bounds the slices recordScratch keeps: 128 Ki entries
// of 64 bytes (8 MiB), room for a frame of 64 Ki records with room to
// spare; a read of a larger frame grows its own.
const maxScratchRecords = 128 << 10

func getRecordScratch() *[]ReadRecord { return recordScratch.Get().(*[]ReadRecord) }

// putRecordScratch pools a read's slice again, its first used entries
// cleared: a read fills its scratch from the start for each frame, so
// the entries past the most it used are still zero.
func putRecordScratch(p *[]ReadRecord, used int) {
	if cap(*p) > maxScratchRecords {
		return
	}
	clear((*p)[:used])
	*p = (*p)[:0]
	recordScratch.Put(p)
}

// takeRecords offers records in order, and reports whether it took them
// all.
func takeRecords(rd *reader, records []ReadRecord) bool {
	for _, r := range records {
		if !rd.offer(r) {
			return false
		}
	}
	return true
}

// readFrames serves a read that missed the cache from the segment: the
// frame holding rd.next, then the frames after it in the same segment,
// decoded straight into rd until it is full. A lending read streams the
// frames through one reused buffer; otherwise they are read in growing
// windows that are never reused, and records of an uncompressed frame
// point into them. The frame a read stops inside is cached (in place or
// a private copy: stoppedFrame), so the next read of it (a large frame
// served in parts) costs no disk read or decode; every other frame only has its position
// remembered. It reports whether the read may go on (it took every record
// of the last frame). With inParts, a lending read proves a large frame it
// will stream in parts (scanner.proveInParts) and stops there, returning
// the frame's proof for the caller to lend it with lendProven.
func (l *Log) readFrames(v *view, rd *reader, lend, inParts bool) (proven *frameProof, more bool, err error) {
	var arena []byte
	var last navEntry // the last frame visited; its segment is the scan's one
	scratch, used := getRecordScratch(), 0
	rd.frame = *scratch
	defer func() {
		*scratch, rd.frame = rd.frame, nil
		putRecordScratch(scratch, used)
	}()
	more = true
	// run lends a run of one-record frames from the window in one loop
	// (lendOneRecordRun), after a one-record frame the visit below took
	// whole; after any other frame it leaves the next to the visit, so a
	// run starts only where frames of one record do.
	oneRecord := false // the frame visited last is of one record, uncompressed
	run := func(sc *scanner, pos, expect int64) (int64, int64, bool) {
		if !oneRecord {
			return pos, expect, more
		}
		at, next := lendOneRecordRun(sc, rd, pos, expect, &last)
		more = !rd.full()
		return at, next, more
	}
	if !lend {
		run = nil // records must point into windows never reused: the general path's keep scan
	}
	var prove func(wire.FrameHeader) bool
	if lend && inParts {
		prove = func(h wire.FrameHeader) bool { return rd.streamsFrame(h.FrameLen(), h.BaseOffset, h.EndOffset()) }
	}
	err = l.scanFrom(v, rd.next, lend, prove, run, func(sc *scanner, seg *segment, pos int64, h wire.FrameHeader, frame []byte) (bool, error) {
		if frame == nil { // proven in parts (never nil: proveInParts proves only what newProof takes)
			proven, more = newProof(sc, seg, pos, h), true
			l.cache.putProof(proven)
			return false, nil
		}
		oneRecord = h.RecordCount == 1 && h.Codec == wire.CodecNone
		if oneRecord { // a trickle-fed partition's frame: straight to rd
			r, err := onlyRecord(h, h.Stored(frame))
			if err != nil {
				return false, err
			}
			if last.seg == nil {
				last.seg = seg
			}
			last.base, last.end, last.pos, last.bytes = h.BaseOffset, h.EndOffset(), pos, h.FrameLen()
			if rd.offer(r) {
				more = !rd.full()
				return more, nil
			}
			more = false
			if rd.err == nil && l.cache.mayCache(h) {
				rd.frame, used = append(rd.frame[:0], r), max(used, 1)
				if f := stoppedFrame(l.opts.Dictionaries, sc, pos, h, frame, rd.frame); f != nil {
					l.cache.putStopped(f)
				}
			}
			return false, nil
		}
		if lend {
			arena = arena[:0] // the records lent from it are gone
		}
		payload, err := framePayload(l.opts.Dictionaries, h, frame, &arena)
		if err != nil {
			return false, err
		}
		records, err := frameEnvelopes(h, payload, rd.frame[:0])
		if err != nil {
			used = cap(rd.frame) // records it decoded before the failure may be in any entry
			return false, err    // a frame is served whole or not at all
		}
		rd.frame, used = records, max(used, len(records))
		if last.seg == nil {
			last.seg = seg
		}
		if p := newProof(sc, seg, pos, h); p != nil {
			l.cache.putProof(p)
		}
		last.base, last.end, last.pos, last.bytes = h.BaseOffset, h.EndOffset(), pos, h.FrameLen()
		if !takeRecords(rd, rd.frame[rd.next-h.BaseOffset:]) {
			more = false
			if rd.err == nil && l.cache.mayCache(h) {
				if f := stoppedFrame(l.opts.Dictionaries, sc, pos, h, frame, rd.frame); f != nil {
					l.cache.putStopped(f)
				}
			}
			return false, nil
		}
		more = !rd.full()
		return more, nil
	})
	if last.seg != nil {
		l.cache.remember(last.seg, last.base, last.end, last.pos, last.bytes)
	}
	return proven, more, err
}

// framePayload returns a CRC-checked frame's records: an uncompressed
// payload in place, a compressed one decoded into *arena, which grows by
// fresh allocations, never by rewriting bytes a record points into. A
// frame whose payload does not decode is damaged, CRC or not.
func framePayload(dicts *codec.DictionarySet, h wire.FrameHeader, frame []byte, arena *[]byte) ([]byte, error) {
	payload := h.Stored(frame)
	if h.Codec == uint8(codec.None) {
		if len(payload) != int(h.UncompressedSize) {
			return nil, fmt.Errorf("%w: stored %d bytes, uncompressed size %d", wire.ErrCorrupt, len(payload), h.UncompressedSize)
		}
		return payload, nil
	}
	c, err := codec.ForFrame(codec.ID(h.Codec), dicts)
	if err != nil {
		return nil, err
	}
	need := int(h.UncompressedSize)
	if need > 1<<20 {
		need += decodeHeadroom // codec.Decode: a large zstd frame may want headroom
	}
	if a := *arena; cap(a)-len(a) < need {
		*arena = make([]byte, 0, max(need, readWindow))
	}
	a := *arena
	if payload, err = c.Decode(a[len(a):], payload, int(h.UncompressedSize)); err != nil {
		return nil, err
	}
	if spare := a[len(a):cap(a)]; len(payload) > 0 && len(spare) > 0 && &payload[0] == &spare[0] {
		*arena = a[:len(a)+len(payload)]
	}
	return payload, nil
}

// frameEnvelopes appends the records of a CRC-checked frame's payload to
// into, each checked to be a valid envelope: a frame whose records do not
// all check out is damaged, and none of it is served.
func frameEnvelopes(h wire.FrameHeader, payload []byte, into []ReadRecord) ([]ReadRecord, error) {
	if h.RecordCount == 1 {
		r, err := onlyRecord(h, payload)
		if err != nil {
			return nil, err
		}
		return append(into, r), nil
	}
	count := int(h.RecordCount)
	if count < 1 || count > len(payload)/wire.RecordLenSize {
		return nil, wire.CheckPayload(payload, count)
	}
	// Room for the records the bytes can hold, each at least a length and
	// the smallest envelope: a corrupt count never drives the allocation.
	// Not slices.Grow: under -race it allocates its room twice.
	if room := min(count, len(payload)/(wire.RecordLenSize+wire.EnvelopeSize(0, 0))); cap(into)-len(into) < room {
		into = append(make([]ReadRecord, 0, len(into)+room), into...)
	}
	rest := payload
	for i := range count {
		offset := h.BaseOffset + int64(i)
		rec, tail, ok := wire.CutRecord(rest)
		if !ok {
			return nil, wire.CheckPayload(payload, count)
		}
		rest = tail
		key, committedAt, value, err := wire.SplitEnvelope(rec)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", offset, err)
		}
		// Stored field by field: a ReadRecord built whole and appended is
		// copied through memory the compiler wrote it to a moment before.
		into = append(into, ReadRecord{}) // within the room grown above: a valid record took 14 bytes or more
		r := &into[len(into)-1]
		r.Offset, r.CommittedAtUnixMs, r.Key, r.Value = offset, committedAt, key, value
	}
	if len(rest) != 0 {
		return nil, wire.CheckPayload(payload, count)
	}
	return into, nil
}

// onlyRecord is the record of a CRC-checked frame of one record, checked
// to be a valid envelope, without a walk of lengths.
func onlyRecord(h wire.FrameHeader, payload []byte) (ReadRecord, error) {
	rec, err := wire.OnlyRecord(payload)
	if err != nil {
		return ReadRecord{}, err
	}
	key, committedAt, value, err := wire.SplitEnvelope(rec)
	if err != nil {
		return ReadRecord{}, fmt.Errorf("record %d: %w", h.BaseOffset, err)
	}
	return ReadRecord{Offset: h.BaseOffset, CommittedAtUnixMs: committedAt, Key: key, Value: value}, nil
}

// lendOneRecordRun lends, in one loop, the records of the one-record
// uncompressed frames the scan's window holds whole from pos on, each
// based at the offset its predecessor ends at (expect for the first): a
// trickle-fed partition's history, where the general path's calls for
// every frame cost more than the frame's CRC. It stops before a frame
// that is anything else, is not whole in the window or does not check
// out, which the general path then takes (and says what it is), and at a
// record the read cannot take: one its limits leave no room for (the
// general path caches that frame as the one the read stopped at) or one
// take refused (the read ends). So it lends exactly the records the
// general path would, and leaves in last, as the general path does, the
// last frame whose record it offered. It returns where it stopped and
// the offset expected there.
func lendOneRecordRun(sc *scanner, rd *reader, pos, expect int64, last *navEntry) (at, next int64) {
	for !rd.full() && pos >= sc.at {
		b := sc.buf[min(pos-sc.at, int64(sc.n)):sc.n]
		// No words (the frame a window cuts would cost an allocation a
		// window), and the CRC last: a frame the run would not take
		// anyway (of several records, compressed, based elsewhere) is
		// left to the general path unchecked.
		h, ok := wire.WholeFrame(b)
		if !ok || h.RecordCount != 1 || h.Codec != wire.CodecNone || h.BaseOffset != expect || h.FrameLen() > proofPart || pos+h.FrameLen() > sc.limit || !h.CRCMatches(b) {
			break
		}
		r, err := onlyRecord(h, h.Stored(b))
		if err != nil {
			break
		}
		last.base, last.end, last.pos, last.bytes = h.BaseOffset, h.EndOffset(), pos, h.FrameLen()
		if !rd.offer(r) {
			break
		}
		pos, expect = pos+h.FrameLen(), h.EndOffset()
	}
	return pos, expect
}

// decodeHeadroom is what a zstd decode may write past the decoded size.
const decodeHeadroom = 128 << 10

// frameAt returns the decoded frame holding offset, which the view says is
// in the log and below the high watermark, from the cache or the segment.
func (l *Log) frameAt(v *view, offset int64) (*cachedFrame, error) {
	if f := l.cache.get(offset, false); f != nil {
		l.metrics.frameCacheHits.Inc()
		return f, nil
	}
	l.metrics.frameCacheMisses.Inc()
	var found *cachedFrame
	err := l.scanFrom(v, offset, true, nil, nil, func(_ *scanner, seg *segment, pos int64, h wire.FrameHeader, frame []byte) (bool, error) {
		f, err := decodeFrame(l.opts.Dictionaries, h, frame)
		if err != nil {
			return false, err
		}
		l.cache.remember(seg, h.BaseOffset, h.EndOffset(), pos, h.FrameLen())
		l.cache.put(f)
		found = f
		return false, nil
	})
	return found, err
}

// scanFrom finds the frame holding offset, which the view says is in the
// log and below the high watermark, and calls visit with it (its bytes
// CRC-checked; valid after the call, as a scan that does not lend never
// reuses a window; a lending scan reuses its buffers), then,
// while visit asks for more, with each next frame of the segment (run,
// when set, first takes what it can of the frames from there, and
// returns where the scan goes on and whether it may). It
// starts from the frame position cache or the sparse index, and steps
// over damage before the frame it looks for; damage (or an unreadable
// block) after it ends the scan quietly, for the next read to meet. A
// visit error on the frame holding offset marks it damaged; on a later
// frame it ends the scan the same way.
func (l *Log) scanFrom(v *view, offset int64, lend bool, inParts func(wire.FrameHeader) bool, run func(sc *scanner, pos, expect int64) (at, next int64, more bool), visit func(sc *scanner, seg *segment, pos int64, h wire.FrameHeader, frame []byte) (bool, error)) error {
	seg, endOffset, limit := v.segmentFor(offset)
	if g, ok := seg.gapAt(offset); ok {
		return &UnreadableError{Offset: offset, Next: g.to, Cause: errors.New("recorded gap: damaged frame found by recovery")}
	}
	file, err := seg.file.acquire()
	if err != nil {
		return l.explainReadFailure(offset, err)
	}
	defer seg.file.release()
	if seg != v.active {
		l.hot.touch(seg)
	}

	pos, expect := int64(0), seg.base
	if p, ok := l.cache.position(seg, offset); ok {
		pos, expect = p, offset
	} else if e, ok := seg.file.lookup(offset); ok {
		pos, expect = e.pos, e.offset
	}
	var sc *scanner
	if lend {
		sc = newLendingScanner(file, limit, pos)
		sc.inParts = inParts
		defer sc.release()
	} else {
		sc = &scanner{file: file, limit: limit, buf: make([]byte, min(readWindow, max(limit-pos, wire.FrameHeaderSize))), skipUnreadable: true}
	}
	for pos < limit {
		h, frame, status, err := sc.frameAt(pos)
		if err != nil && isIOError(err) {
			// A frame that cannot be read fails a read of its own records
			// (an I/O error may pass: never a gap); a read of a later
			// offset steps over it (stepOver).
			at, next, ok := sc.stepOver(pos, expect, h, endOffset)
			if !ok || next > offset {
				return l.explainReadFailure(offset, err)
			}
			seg.file.addIndex(next, at) // verified: later reads start past the unreadable frame
			pos, expect = at, next
			continue
		}
		if status != frameValid || h.BaseOffset != expect {
			at, next, found, rerr := sc.resync(pos, expect, h)
			if rerr != nil {
				return l.explainReadFailure(offset, rerr)
			}
			if found && next.BaseOffset <= offset {
				seg.file.addIndex(next.BaseOffset, at)
				pos, expect = at, next.BaseOffset
				continue
			}
			nextOffset := endOffset
			if found && next.BaseOffset < endOffset {
				nextOffset = next.BaseOffset
			}
			if err == nil {
				err = fmt.Errorf("%w: frame at byte %d has base offset %d, want %d", wire.ErrCorrupt, pos, h.BaseOffset, expect)
			}
			return l.damaged(seg, pos, &UnreadableError{Offset: offset, Next: nextOffset, Cause: fmt.Errorf("%s byte %d: %w", seg.path, pos, err)})
		}
		if offset < h.EndOffset() {
			sc.keep = !lend // from here on, bytes handed out stay as they are
			more, err := visit(sc, seg, pos, h, frame)
			// The frames after are a bonus: a wide read that fails ends
			// them, and the next read meets the failure on its own.
			sc.skipUnreadable = false
			if err != nil {
				return l.damaged(seg, pos, &UnreadableError{Offset: offset, Next: h.EndOffset(), Cause: fmt.Errorf("%s byte %d: %w", seg.path, pos, err)})
			}
			for more {
				pos, expect = pos+h.FrameLen(), h.EndOffset()
				if run != nil {
					if pos, expect, more = run(sc, pos, expect); !more {
						break
					}
				}
				if pos >= limit {
					break
				}
				var ok bool
				if h, frame, ok = sc.bufferedFrame(pos); !ok { // not a small frame the window holds
					if lend && l.cache.provenAt(seg, pos) {
						break // a proven frame: the read streams it (lendProven)
					}
					h, frame, status, err = sc.readFrame(pos)
					ok = err == nil && status == frameValid
				}
				if !ok || h.BaseOffset != expect {
					break
				}
				if more, err = visit(sc, seg, pos, h, frame); err != nil {
					break
				}
			}
			return nil
		}
		seg.file.addIndex(h.BaseOffset, pos)
		pos += h.FrameLen()
		expect = h.EndOffset()
	}
	// The segment ends before the offsets its successor's name promises
	// (a sealed segment whose last sync lied): recorded loss.
	return l.damaged(seg, limit, &UnreadableError{Offset: offset, Next: endOffset, Cause: fmt.Errorf("%s ends at offset %d, before %d", seg.path, expect, endOffset)})
}

// explainReadFailure turns a failure to reach a segment into what the
// caller branches on: a closed log is ErrLogClosed and nothing else; a
// segment retention took is ErrOffsetDeleted; anything else is the I/O
// error itself.
func (l *Log) explainReadFailure(offset int64, err error) error {
	now := l.view.Load()
	switch {
	case now.closed:
		return ErrLogClosed
	case offset < now.start:
		return fmt.Errorf("%w: offset %d is below the start offset %d", ErrOffsetDeleted, offset, now.start)
	}
	return fmt.Errorf("read offset %d: %w", offset, err)
}

// decodeFrame decodes a CRC-checked frame's payload into records, in a
// private copy. A frame whose payload does not decode is damaged, CRC or
// not.
func decodeFrame(dicts *codec.DictionarySet, h wire.FrameHeader, frame []byte) (*cachedFrame, error) {
	c, err := codec.ForFrame(codec.ID(h.Codec), dicts)
	if err != nil {
		return nil, err
	}
	payload, err := c.Decode(nil, h.Stored(frame), int(h.UncompressedSize))
	if err != nil {
		return nil, err
	}
	records, err := frameEnvelopes(h, payload, nil)
	if err != nil {
		return nil, err
	}
	return &cachedFrame{base: h.BaseOffset, end: h.EndOffset(), records: records, bytes: decodedBytes(cap(payload), cap(records))}, nil
}

// stoppedFrame is the frame a read stopped inside, for the cache: its
// records in place when the frame is uncompressed and fills most of its
// scan buffer, which the scan then gives up (to the pool again, for a
// large frame a lending scan read: cachedFrame), counted at the whole
// buffer; else a private copy, so a small frame never pins a whole
// window, and so a frame a copy would keep among the log's frames does
// not take the large frame's place for the buffer it sits in. records are
// the frame's, checked.
func stoppedFrame(dicts *codec.DictionarySet, sc *scanner, pos int64, h wire.FrameHeader, frame []byte, records []ReadRecord) *cachedFrame {
	if h.Codec != uint8(codec.None) {
		return decodedCopy(dicts, h, frame)
	}
	capacity, ok := sc.inPlace(pos, int64(len(frame)))
	if !ok || (decodedBytes(capacity, len(records)) > stoppedFrameBytes && decodedBytes(len(frame), len(records)) <= stoppedFrameBytes) {
		return decodedCopy(dicts, h, frame)
	}
	pooled := sc.giveUpBuffer()
	records = slices.Clone(records)
	bytes := decodedBytes(capacity, cap(records))
	if bytes <= stoppedFrameBytes {
		pooled = nil // the frames list evicts without counting readers: its buffers are left to the garbage collector
	}
	return &cachedFrame{base: h.BaseOffset, end: h.EndOffset(), records: records, bytes: bytes, pooled: pooled}
}

// decodedCopy is a checked frame decoded into a private copy.
func decodedCopy(dicts *codec.DictionarySet, h wire.FrameHeader, frame []byte) *cachedFrame {
	f, err := decodeFrame(dicts, h, frame)
	if err != nil { // it decoded once: never
		return nil
	}
	return f
}
