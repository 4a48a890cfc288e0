package partition

import (
	"fmt"
	"time"

	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

func (s *state) handleCommitDurable() error {
	if lost := s.appendLost; lost != nil {
		// Records this caller appended were discarded by another
		// commit's failure: its commit must not report them durable, and
		// like any failed commit it leaves nothing behind, so the caller's
		// retry of everything it appended lands once.
		s.appended = 0
		s.discard(lost)
		s.appendLost = nil
		return lost
	}
	err := s.commit()
	// This caller gets the outcome itself: a failure's discard must not
	// also be held against its next commit.
	s.appended, s.appendLost = 0, nil
	return err
}

// handleProduce commits a produce message together with every produce
// message waiting behind it (up to a byte bound): one frame, one write, one
// fdatasync. A message of another kind found while gathering is handled
// after the group.
func (s *state) handleProduce(first *produceMsg) {
	group := []*produceMsg{first}
	bytes := envBytes(first.envs)
	var next message
gather:
	for bytes < s.log.opts.flush.produceBytes {
		select {
		case m := <-s.log.mailbox:
			p, ok := m.(*produceMsg)
			if !ok {
				next = m
				break gather
			}
			group = append(group, p)
			bytes += envBytes(p.envs)
		default:
			break gather
		}
	}
	refused := s.poison
	if refused == nil {
		refused = s.ensureFloor()
	}
	if refused == nil {
		group = s.admitGroup(group)
	}
	if refused != nil {
		for _, p := range group {
			p.reply <- appendReply{err: refused}
		}
	} else if len(group) > 0 {
		bases := make([]int64, len(group))
		for i, p := range group {
			bases[i] = s.appendEnvelopes(p.batch)
		}
		err := s.commit()
		if err == nil {
			s.appended = 0
		}
		s.log.metrics.commitGroupSize.Observe(float64(len(group)))
		for i, p := range group {
			if err != nil {
				p.reply <- appendReply{err: err}
			} else {
				p.reply <- appendReply{base: bases[i]}
			}
		}
	}
	if next != nil {
		s.handle(next)
	}
}

// admitGroup asks the space guard for each message of a group in turn,
// each joining the frame of those taken before it, and answers the ones
// it refuses; it returns the rest.
func (s *state) admitGroup(group []*produceMsg) []*produceMsg {
	if s.log.opts.Space == nil {
		return group
	}
	now := time.Now()
	frame := s.bufferFrameBytes()
	taken := group[:0]
	for _, p := range group {
		var err error
		if frame, err = s.admit(frame, p.envs, now); err != nil {
			p.reply <- appendReply{err: err}
			continue
		}
		taken = append(taken, p)
	}
	return taken
}

func envBytes(envs [][]byte) int {
	n := 0
	for _, e := range envs {
		n += len(e)
	}
	return n
}

// commit is the durable commit (docs/design.md, "Write path"): release
// the hwm file once, write everything pending as frames, fdatasync, read
// the new frames back and CRC-check them, and only then advance the high
// watermark. On any failure the tail above the high watermark is discarded
// before the error is returned.
func (s *state) commit() error {
	if s.poison != nil {
		return s.poison
	}
	started := time.Now()
	if !s.hwmReleased {
		if err := emptyHWMFile(s.log.opts.FS, s.log.dir); err != nil {
			return s.fail("release hwm file", err)
		}
		s.hwmReleased = true
	}
	if s.unwritten != nil {
		if err := s.writeFrame(s.unwritten); err != nil {
			return s.fail("write", err)
		}
	}
	if len(s.buffer) > 0 {
		f, err := s.drain()
		if err != nil {
			return s.fail("drain", err)
		}
		if err := s.writeFrame(f); err != nil {
			return s.fail("write", err)
		}
	}
	if err := s.sync(); err != nil {
		return s.fail("fdatasync", err)
	}
	if err := s.readBack(); err != nil {
		return s.fail("read back", err)
	}
	advanced := s.written > s.hwm
	s.hwm, s.hwmPos = s.written, s.writePos
	if advanced {
		s.publish()
		s.log.notify.broadcast()
	}
	s.log.metrics.commitSeconds.Observe(time.Since(started).Seconds())
	if s.active.full {
		// The lazy roll, at the end of the commit that filled the
		// segment. Its failure fails nothing: the commit is durable, and
		// the roll is tried again before the next frame write.
		if err := s.roll(); err != nil {
			s.log.logger.Warn("segment roll after commit failed; retrying before the next write", zap.Error(err))
		}
	}
	return nil
}

// readBackWindow bounds the commit's read-back buffer: background drains
// can leave any number of frames above the high watermark.
const readBackWindow = 8 << 20

// readBack reads the frames above the high watermark back from the file
// through a pooled buffer, in one read up to readBackWindow, and checks
// each one's CRC and position. A frame larger than the buffer gets a
// pooled buffer of its own, read and checksummed a part at a time while
// each part is in the CPU's cache (readChecked); when it is the one frame
// above the high watermark (a large commit), that buffer is the read's
// from the start and its first read takes one part, so nothing is read
// twice.
func (s *state) readBack() error {
	if s.writePos == s.hwmPos {
		return nil
	}
	window, maxRead := min(s.writePos-s.hwmPos, readBackWindow), 0
	if one := s.writePos - s.hwmPos; one == s.lastFrameBytes && one > readBackWindow {
		window, maxRead = one, proofPart
	}
	buf, pooled := getBuf(int(window))
	sc := &scanner{file: s.file, limit: s.writePos, buf: buf, pool: pooled, lend: true, maxRead: maxRead} // a frame larger than buf: a pooled buffer too
	defer sc.release()
	expect := s.hwm
	for pos := s.hwmPos; pos < s.writePos; {
		h, _, status, err := sc.frameAt(pos)
		if status != frameValid {
			return fmt.Errorf("frame at %s byte %d: %w", s.active.path, pos, err)
		}
		if h.BaseOffset != expect {
			return fmt.Errorf("%w: frame at %s byte %d has base offset %d, want %d", wire.ErrCorrupt, s.active.path, pos, h.BaseOffset, expect)
		}
		if p := newProof(sc, s.active, pos, h); p != nil {
			s.log.cache.putProof(p) // records this log built from envelopes: they parse (a failed commit's discard forgets it)
		}
		expect = h.EndOffset()
		pos += h.FrameLen()
	}
	if expect != s.written {
		return fmt.Errorf("%w: frames of %s end at offset %d, want %d", wire.ErrCorrupt, s.active.path, expect, s.written)
	}
	return nil
}

// fail discards the uncommitted tail and returns the commit's error: the
// poison when the log is poisoned, else a commit failure wrapping cause.
func (s *state) fail(step string, cause error) error {
	s.log.metrics.countError(kindCommitFailed)
	s.discard(cause)
	if s.poison != nil {
		return s.poison
	}
	return commitError(step, cause)
}

// discard drops everything above the high watermark (docs/design.md,
// "Commit failure"): the buffer and the unwritten frame, the written frames
// (the active segment is truncated back to the high watermark's frame
// boundary and the truncate fsynced), their index entries and cached
// frames. The next append gets the failed batch's offset. A truncate or
// fsync that fails poisons the log.
func (s *state) discard(cause error) {
	if s.appended > 0 {
		s.appendLost = commitError("an earlier commit failed and discarded appended records", cause)
		s.appended = 0
	}
	s.buffer, s.bufferBytes, s.bufferFrame, s.bufferPools, s.bufferPinned, s.unwritten = nil, 0, nil, nil, 0, nil
	s.nextOffset, s.written = s.hwm, s.hwm
	if s.writePos == s.hwmPos && !s.tailDirty {
		return
	}
	s.log.cache.forgetFrom(s.hwm)
	s.active.file.truncateIndex(s.hwmPos)
	s.active.times.forgetFrom(s.hwmPos)
	if err := s.file.Truncate(s.hwmPos); err != nil {
		s.poisonWith(fmt.Errorf("truncate %s to byte %d after a failed commit: %w", s.active.path, s.hwmPos, err))
		return
	}
	s.writePos, s.active.size, s.tailDirty, s.allocEnd, s.reservedEnd, s.preallocOff = s.hwmPos, s.hwmPos, false, 0, 0, true
	s.syncedPos = min(s.syncedPos, s.writePos)
	s.active.full = s.active.size >= s.log.opts.SegmentMaxBytes
	if s.poison != nil {
		return // never retry an fsync on a poisoned log
	}
	if err := s.file.Sync(); err != nil {
		s.poisonWith(fmt.Errorf("fdatasync truncate of %s: %w", s.active.path, err))
		return
	}
	s.syncedPos, s.unsyncedSince = s.hwmPos, time.Time{}
}

// poisonWith latches a failed fdatasync (docs/design.md, "Fsync
// failure"): every later append and commit fails with ErrLogPoisoned
// wrapping it. The tail above the high watermark is cut at once, so bytes
// the kernel marked clean without writing them are gone from the page
// cache before anything can read them (docs/design.md R3).
func (s *state) poisonWith(cause error) {
	if s.poison != nil {
		return
	}
	s.poison = fmt.Errorf("%w: %w", ErrLogPoisoned, cause)
	s.log.metrics.countError(kindFsyncPoisoned)
	s.log.logger.Error("fsync failed: log poisoned until reopened", zap.Error(cause))
	s.discard(cause)
}
