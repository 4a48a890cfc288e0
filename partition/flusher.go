package partition

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

var errWritesFailing = errors.New("frame writes are failing; the buffer is full")

// pendingFrame is a drained frame not yet in the file.
type pendingFrame struct {
	base  int64
	count int
	bytes []byte   // the whole frame, header included
	buf   *[]byte  // bytes' pooled buffer, back to the pool once written (nil: not pooled)
	envs  [][]byte // its records, for the frame cache
	// pools are the pooled buffers envs lie in (bytes' own, for a batch
	// drained in place), back to the pool once written unless the frame
	// cache keeps records in them; pinned is the memory envs lie in, all
	// batches' buffers at their capacity: what a cache of them holds.
	pools  []*[]byte
	pinned int
}

func (f *pendingFrame) end() int64 { return f.base + int64(f.count) }

// appendEnvelopes puts envelopes in the buffer at the next offsets, raising
// each commit time to the partition's newest so it never decreases along
// the partition (docs/design.md, "Segments, frames and records").
func (s *state) appendEnvelopes(b batch) (base int64) {
	base = s.nextOffset
	s.bufferFrame = nil // a batch behind another is copied into a frame of both
	if len(s.buffer) == 0 {
		s.bufferSince = time.Now()
		s.bufferFrame = b.frame
	}
	if b.pooled != nil {
		s.bufferPools = append(s.bufferPools, b.pooled)
	}
	s.bufferPinned += cap(b.frame)
	s.buffer = slices.Grow(s.buffer, len(b.envs)) // once, not doubling through a batch
	for _, env := range b.envs {
		e, err := wire.ParseEnvelope(env)
		if err == nil && e.CommittedAtUnixMs < s.commitFloor {
			_ = wire.SetEnvelopeCommitTime(env, s.commitFloor)
		} else if err == nil {
			s.commitFloor = e.CommittedAtUnixMs
		}
		s.buffer = append(s.buffer, env)
		s.bufferBytes += len(env)
	}
	s.nextOffset += int64(len(b.envs))
	return base
}

func (s *state) handleAppend(m *appendMsg) appendReply {
	if s.poison != nil {
		return appendReply{err: s.poison}
	}
	if s.unwritten != nil && s.bufferBytes >= maxBatchBytes {
		// Writes keep failing: refuse to buffer without bound.
		return appendReply{err: commitError("append while frame writes fail", errWritesFailing)}
	}
	if err := s.ensureFloor(); err != nil {
		return appendReply{err: err}
	}
	if _, err := s.admit(s.bufferFrameBytes(), m.envs, time.Now()); err != nil {
		return appendReply{err: err}
	}
	base := s.appendEnvelopes(m.batch)
	s.appended += len(m.envs)
	if s.bufferBytes >= s.log.opts.flush.drainBytes || len(s.buffer) >= s.log.opts.flush.drainRecords {
		s.backgroundDrain()
	}
	return appendReply{base: base}
}

// drain turns the whole buffer into one frame, codec applied. A buffer of
// one batch is already laid out as the frame (bufferFrame): uncompressed,
// it is the frame, header put in front; compressed, it is the payload the
// codec encodes. Otherwise uncompressed records are laid out in a pooled
// buffer directly, and a codec encodes them from the reused payload
// buffer.
func (s *state) drain() (*pendingFrame, error) {
	size := 0
	for _, env := range s.buffer {
		size += wire.RecordLenSize + len(env)
	}
	c := s.log.opts.Codec
	if withDict := s.log.opts.Dictionaries.CurrentCodec(); withDict != nil {
		c = withDict // the topic's current dictionary, read once: this frame's codec
	}
	var frame []byte
	var pooled *[]byte
	payloadSize := size
	laidOut := s.bufferFrame // the records' payload after header room (appendEnvelopes); a failed drain leaves it as it was
	if len(laidOut) != wire.FrameHeaderSize+size {
		laidOut = nil
	}
	switch {
	case c.ID() == codec.None && laidOut != nil:
		frame = laidOut // its pooled buffer, if any, is in bufferPools: pooled is drain's own only
	case c.ID() == codec.None:
		frame, pooled = getBuf(wire.FrameHeaderSize + size)
		frame = frame[:wire.FrameHeaderSize]
		for _, env := range s.buffer {
			var err error
			if frame, err = wire.AppendRecordFrame(frame, env); err != nil {
				putBuf(pooled)
				return nil, err
			}
		}
	default:
		payload := s.payload[:0]
		if laidOut != nil {
			payload = laidOut[wire.FrameHeaderSize:]
		} else {
			for _, env := range s.buffer {
				var err error
				if payload, err = wire.AppendRecordFrame(payload, env); err != nil {
					return nil, err
				}
			}
			s.payload = payload
		}
		frame, pooled = getBuf(wire.FrameHeaderSize + size)
		encoded, err := c.Encode(frame[:wire.FrameHeaderSize], payload)
		if err != nil {
			putBuf(pooled)
			return nil, fmt.Errorf("encode frame: %w", err)
		}
		if len(encoded) > 0 && &encoded[0] != &frame[0] { // the codec needed more room: its own buffer
			putBuf(pooled)
			pooled = nil
		}
		frame = encoded
	}
	base := s.nextOffset - int64(len(s.buffer))
	if _, err := wire.PutFrameHeader(frame, uint8(c.ID()), base, len(s.buffer), payloadSize); err != nil {
		putBuf(pooled)
		return nil, fmt.Errorf("frame header: %w", err)
	}
	f := &pendingFrame{base: base, count: len(s.buffer), bytes: frame, buf: pooled, envs: s.buffer, pools: s.bufferPools, pinned: s.bufferPinned}
	s.buffer, s.bufferBytes, s.bufferFrame, s.bufferPools, s.bufferPinned = nil, 0, nil, nil, 0
	return f, nil
}

// writeFrame writes a drained frame at the end of the active segment. It
// first rolls the segment if it is due and fully committed, and syncs an
// earlier unsynced frame, so the file never holds two unsynced frames. On a
// write error the frame stays unwritten, to be retried or discarded.
func (s *state) writeFrame(f *pendingFrame) error {
	now := time.Now()
	if s.rollDue(now) {
		if err := s.roll(); err != nil && !errors.Is(err, errRollDeferred) {
			s.unwritten = f
			return err
		}
	}
	if err := s.sync(); err != nil {
		s.unwritten = f
		return err
	}
	if _, err := s.file.WriteAt(f.bytes, s.writePos); err != nil {
		s.unwritten = f
		s.tailDirty = true
		s.log.metrics.countError(kindWriteFailed)
		return fmt.Errorf("write frame at %s byte %d: %w", s.active.path, s.writePos, err)
	}
	s.unwritten = nil
	frameBytes := int64(len(f.bytes))
	s.active.file.addIndex(f.base, s.writePos)
	if e, err := wire.ParseEnvelope(f.envs[0]); err == nil {
		s.active.times.note(f.base, s.writePos, e.CommittedAtUnixMs, timeIndexSpacing(s.log.opts.SegmentMaxBytes))
	}
	s.log.cache.remember(s.active, f.base, f.end(), s.writePos, frameBytes)
	cached := s.log.readSinceWrite.Swap(false) && s.log.cache.putEnvelopes(f.base, f.envs, f.pinned)
	putBuf(f.buf) // written: the frame's bytes are the file's now, and no record points into drain's own buffer
	if !cached {
		for _, p := range f.pools {
			putBuf(p)
		}
	} // else the cache's records point into them: left to the garbage collector
	f.bytes, f.buf, f.envs, f.pools = nil, nil, nil, nil
	s.writePos += frameBytes
	s.active.size = s.writePos
	s.written = f.end()
	s.prepareAhead(frameBytes, !s.lastFrameAt.IsZero() && now.Sub(s.lastFrameAt) < preallocBusyWithin)
	s.lastFrameAt, s.lastFrameBytes = now, frameBytes
	if s.active.firstWrite.IsZero() {
		s.active.firstWrite = now
	}
	s.active.lastWrite = now
	if s.unsyncedSince.IsZero() {
		s.unsyncedSince = now
	}
	if s.active.size >= s.log.opts.SegmentMaxBytes {
		s.active.full = true
	}
	s.log.metrics.bytesWritten.Add(float64(frameBytes))
	s.log.metrics.recordsWritten.Add(float64(f.count))
	return nil
}

// sync makes the written frames durable. A failure poisons the log.
func (s *state) sync() error {
	if s.writePos == s.syncedPos {
		return nil
	}
	started := time.Now()
	err := s.file.Sync()
	s.log.metrics.fsyncSeconds.Observe(time.Since(started).Seconds())
	if err != nil {
		s.poisonWith(fmt.Errorf("fdatasync %s: %w", s.active.path, err))
		return s.poison
	}
	s.syncedPos = s.writePos
	s.unsyncedSince = time.Time{}
	return nil
}

// backgroundDrain writes what nobody was promised yet: the unwritten frame
// of a failed write first, then the buffer. A failure of any step (the
// drain, a roll, a sync, the write) is kept for the next pass (or
// discarded by the next commit) and fails no caller; the next try waits
// a drain interval (backoffUntil), whichever step failed, so a failing
// disk never turns the flusher into a hot loop.
func (s *state) backgroundDrain() {
	now := time.Now()
	if s.poison != nil || now.Before(s.backoffUntil) {
		return
	}
	if err := s.drainAndWrite(); err != nil {
		s.backoffUntil = now.Add(s.log.opts.flush.drainInterval)
		s.log.logger.Warn("background frame write failed; retrying later", zap.Error(err))
	}
}

func (s *state) drainAndWrite() error {
	if s.unwritten != nil {
		if err := s.writeFrame(s.unwritten); err != nil {
			return err
		}
	}
	if len(s.buffer) == 0 {
		return nil
	}
	f, err := s.drain()
	if err != nil {
		return err
	}
	return s.writeFrame(f)
}

// flushPass is the timer's work: drain what has waited long enough, sync
// what has been unsynced long enough, retry a failed step.
func (s *state) flushPass() {
	p := s.log.opts.flush
	now := time.Now()
	if s.unwritten != nil || len(s.buffer) > 0 && now.Sub(s.bufferSince) >= p.drainInterval {
		s.backgroundDrain()
	}
	if s.writePos > s.syncedPos && (now.Sub(s.unsyncedSince) >= p.syncInterval || s.writePos-s.syncedPos >= p.syncBytes) {
		if err := s.sync(); err != nil {
			s.log.logger.Error("background fsync failed; log poisoned", zap.Error(err))
		}
	}
	if s.poison == nil {
		s.trimIfIdle(now)
	}
}

// needsTimer reports whether a flush pass is owed, and when: buffered
// records, written bytes not yet synced, or a failed write to retry. A
// high-watermark advance owes nothing. An idle log holds no timer
// (docs/design.md, "Flusher pipeline"): any new "the timer will pick it
// up" path needs its condition here.
func (s *state) needsTimer() (due time.Time, ok bool) {
	if s.poison != nil {
		return time.Time{}, false
	}
	p := s.log.opts.flush
	consider := func(t time.Time) {
		if !ok || t.Before(due) {
			due, ok = t, true
		}
	}
	switch {
	case s.unwritten != nil:
		// A failed write is retried once its backoff ends; the buffer
		// behind it waits for that retry.
		consider(s.backoffUntil)
	case len(s.buffer) > 0:
		// Never before a failed step's backoff ends, whatever failed.
		consider(maxTime(s.bufferSince.Add(p.drainInterval), s.backoffUntil))
	}
	if s.writePos > s.syncedPos {
		consider(s.unsyncedSince.Add(p.syncInterval))
	}
	if s.prepared() && !s.idleTrimFailed {
		consider(s.lastFrameAt.Add(preallocBusyWithin)) // give the prepared space back when idle
	}
	return due, ok
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// rearm arms the timer for the next owed pass, or stops it.
func (s *state) rearm() {
	due, ok := s.needsTimer()
	if !ok {
		if s.timerOn {
			s.timer.Stop()
			s.timerOn = false
		}
		return
	}
	d := max(time.Until(due), 0)
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d)
	}
	s.timerOn = true
}
