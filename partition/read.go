package partition

import (
	"errors"
	"fmt"

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
	v := l.view.Load()
	switch {
	case v.closed:
		return ReadResult{}, ErrLogClosed
	case offset < v.start:
		return ReadResult{}, fmt.Errorf("%w: offset %d is below the start offset %d", ErrOffsetDeleted, offset, v.start)
	case offset > v.hwm:
		return ReadResult{}, fmt.Errorf("%w: offset %d, high watermark %d", ErrBeyondHighWatermark, offset, v.hwm)
	}
	res := ReadResult{Next: offset, HighWatermark: v.hwm}
	l.readSinceWrite.Store(true) // a tail reader: cache the next frame written
	if offset == v.hwm {
		return res, nil
	}
	bytes := 0
	for res.Next < v.hwm && len(res.Records) < maxRecords {
		if f := l.cache.get(res.Next); f != nil {
			l.metrics.frameCacheHits.Inc()
			if !takeRecords(&res, f.records[res.Next-f.base:], maxRecords, maxBytes, &bytes) {
				break
			}
			continue
		}
		l.metrics.frameCacheMisses.Inc()
		more, err := l.readFrames(v, &res, maxRecords, maxBytes, &bytes)
		if err != nil {
			if len(res.Records) > 0 && !errors.Is(err, ErrLogClosed) {
				break // serve what came before; the next read meets the error
			}
			return ReadResult{}, err
		}
		if !more {
			break
		}
	}
	l.countRead(res.Records, bytes)
	return res, nil
}

// room reports whether a record of size bytes (key and value) still goes
// into a read result holding bytes of them: the first always does.
func (res *ReadResult) room(size, maxRecords, maxBytes, bytes int) bool {
	return len(res.Records) < maxRecords && (len(res.Records) == 0 || bytes+size <= maxBytes)
}

// takeRecords appends records to res until maxRecords or maxBytes (at
// least one record in all), and reports whether it took them all.
func takeRecords(res *ReadResult, records []ReadRecord, maxRecords, maxBytes int, bytes *int) bool {
	for _, r := range records {
		size := len(r.Key) + len(r.Value)
		if !res.room(size, maxRecords, maxBytes, *bytes) {
			return false
		}
		res.Records = append(res.Records, r)
		*bytes += size
		res.Next = r.Offset + 1
	}
	return true
}

// readFrames serves a read that missed the cache from the segment: the
// frame holding res.Next, then the frames after it in the same segment,
// read in growing windows and decoded straight into res (records of an
// uncompressed frame point into the window, which is never reused) until
// maxRecords or maxBytes. The frame a read stops inside is cached, so the
// next read of it (a large frame served in parts) costs no disk read or
// decode; every other frame only has its position remembered. It reports
// whether the read may go on (it took every record of the last frame).
func (l *Log) readFrames(v *view, res *ReadResult, maxRecords, maxBytes int, bytes *int) (more bool, err error) {
	var arena []byte
	var last navEntry
	more = true
	err = l.scanFrom(v, res.Next, func(seg *segment, pos int64, h wire.FrameHeader, frame []byte) (bool, error) {
		n, next, before := len(res.Records), res.Next, *bytes
		took, err := decodeRecords(h, frame, &arena, res, maxRecords, maxBytes, bytes)
		if err != nil {
			res.Records, res.Next, *bytes = res.Records[:n], next, before
			return false, err
		}
		last = navEntry{seg: seg, base: h.BaseOffset, end: h.EndOffset(), pos: pos, bytes: h.FrameLen()}
		if !took {
			more = false
			if l.cache.mayCache(int(h.FrameLen())) {
				if f, err := decodeFrame(h, frame); err == nil { // a private copy: the window is not pinned
					l.cache.putStopped(f)
				}
			}
			return false, nil
		}
		more = len(res.Records) < maxRecords && *bytes < maxBytes
		return more, nil
	})
	if last.seg != nil {
		l.cache.remember(last.seg, last.base, last.end, last.pos, last.bytes)
	}
	return more, err
}

// decodeRecords checks a CRC-checked frame's records and appends those
// from res.Next on to res until maxRecords or maxBytes (at least one
// record in all); it reports whether it took them all. An uncompressed
// payload is used in place; a compressed one is decoded into *arena, which
// grows by fresh allocations, never by rewriting bytes a record points
// into. A frame whose payload does not decode is damaged, CRC or not.
func decodeRecords(h wire.FrameHeader, frame []byte, arena *[]byte, res *ReadResult, maxRecords, maxBytes int, bytes *int) (bool, error) {
	payload := h.Stored(frame)
	if h.Codec != uint8(codec.None) {
		c, err := codec.ByID(codec.ID(h.Codec))
		if err != nil {
			return false, err
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
			return false, err
		}
		if spare := a[len(a):cap(a)]; len(payload) > 0 && len(spare) > 0 && &payload[0] == &spare[0] {
			*arena = a[:len(a)+len(payload)]
		}
	} else if len(payload) != int(h.UncompressedSize) {
		return false, fmt.Errorf("%w: stored %d bytes, uncompressed size %d", wire.ErrCorrupt, len(payload), h.UncompressedSize)
	}
	var rr wire.RecordReader
	if err := rr.Reset(payload, int(h.RecordCount)); err != nil {
		return false, err
	}
	first, took := res.Next, true
	for offset := h.BaseOffset; ; offset++ {
		rec, ok := rr.Next()
		if !ok {
			return took, nil
		}
		e, err := wire.ParseEnvelope(rec)
		if err != nil {
			return false, fmt.Errorf("record %d: %w", offset, err)
		}
		if offset < first || !took {
			continue // every envelope is checked: a frame is served whole or not at all
		}
		size := len(e.Key) + len(e.Payload)
		if !res.room(size, maxRecords, maxBytes, *bytes) {
			took = false
			continue
		}
		res.Records = append(res.Records, ReadRecord{Offset: offset, CommittedAtUnixMs: e.CommittedAtUnixMs, Key: e.Key, Value: e.Payload})
		*bytes += size
		res.Next = offset + 1
	}
}

// decodeHeadroom is what a zstd decode may write past the decoded size.
const decodeHeadroom = 128 << 10

func (l *Log) countRead(records []ReadRecord, bytes int) {
	l.metrics.recordsRead.Add(float64(len(records)))
	l.metrics.bytesRead.Add(float64(bytes))
}

// frameAt returns the decoded frame holding offset, which the view says is
// in the log and below the high watermark, from the cache or the segment.
func (l *Log) frameAt(v *view, offset int64) (*cachedFrame, error) {
	if f := l.cache.get(offset); f != nil {
		l.metrics.frameCacheHits.Inc()
		return f, nil
	}
	l.metrics.frameCacheMisses.Inc()
	var found *cachedFrame
	err := l.scanFrom(v, offset, func(seg *segment, pos int64, h wire.FrameHeader, frame []byte) (bool, error) {
		f, err := decodeFrame(h, frame)
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
// CRC-checked, valid after the call: a scan never reuses a window), then,
// while visit asks for more, with each next frame of the segment. It
// starts from the frame position cache or the sparse index, and steps
// over damage before the frame it looks for; damage (or an unreadable
// block) after it ends the scan quietly, for the next read to meet. A
// visit error on the frame holding offset marks it damaged; on a later
// frame it ends the scan the same way.
func (l *Log) scanFrom(v *view, offset int64, visit func(seg *segment, pos int64, h wire.FrameHeader, frame []byte) (bool, error)) error {
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
	sc := &scanner{file: file, limit: limit, buf: make([]byte, min(readWindow, max(limit-pos, wire.FrameHeaderSize))), skipUnreadable: true}
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
			sc.keep = true // from here on, bytes handed out stay as they are
			more, err := visit(seg, pos, h, frame)
			// The frames after are a bonus: a wide read that fails ends
			// them, and the next read meets the failure on its own.
			sc.skipUnreadable = false
			if err != nil {
				return l.damaged(seg, pos, &UnreadableError{Offset: offset, Next: h.EndOffset(), Cause: fmt.Errorf("%s byte %d: %w", seg.path, pos, err)})
			}
			for more {
				pos, expect = pos+h.FrameLen(), h.EndOffset()
				if pos >= limit {
					break
				}
				if h, frame, status, err = sc.frameAt(pos); err != nil || status != frameValid || h.BaseOffset != expect {
					break
				}
				if more, err = visit(seg, pos, h, frame); err != nil {
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

// decodeFrame decodes a CRC-checked frame's payload into records. A frame
// whose payload does not decode is damaged, CRC or not.
func decodeFrame(h wire.FrameHeader, frame []byte) (*cachedFrame, error) {
	c, err := codec.ByID(codec.ID(h.Codec))
	if err != nil {
		return nil, err
	}
	payload, err := c.Decode(nil, h.Stored(frame), int(h.UncompressedSize))
	if err != nil {
		return nil, err
	}
	var rr wire.RecordReader
	if err := rr.Reset(payload, int(h.RecordCount)); err != nil {
		return nil, err
	}
	f := &cachedFrame{base: h.BaseOffset, end: h.EndOffset(), records: make([]ReadRecord, 0, h.RecordCount), bytes: int(h.FrameLen())}
	for offset := h.BaseOffset; ; offset++ {
		rec, ok := rr.Next()
		if !ok {
			return f, nil
		}
		e, err := wire.ParseEnvelope(rec)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", offset, err)
		}
		f.records = append(f.records, ReadRecord{Offset: offset, CommittedAtUnixMs: e.CommittedAtUnixMs, Key: e.Key, Value: e.Payload})
	}
}
