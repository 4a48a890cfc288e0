package partition

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"go.uber.org/zap"
)

// Deletions are labelled by the bound that made them: retention age, or
// retention bytes.
const (
	reasonAge  = "age"
	reasonSize = "size"
)

// ErrSweepInProgress: another sweep of the log is still unlinking.
var ErrSweepInProgress = errors.New("partition: a sweep of this log is in progress")

// detached is a sealed segment a sweep took out of the log, to be unlinked
// outside the actor.
type detached struct {
	seg     *segment
	bytes   int64
	records int64
	reason  string // reasonAge or reasonSize
}

type sweepReply struct {
	detached []detached
	rotated  bool
}

// SweepResult says what one sweep did.
type SweepResult struct {
	Rotated         bool  // the idle active segment was sealed for deletion
	DeletedSegments int   // segment files unlinked (this sweep's and retried ones)
	DeletedBytes    int64 // their bytes
	DeletedRecords  int64 // the offsets they held
	FailedUnlinks   int   // unlinks that failed, kept for the next sweep
}

// Sweep applies retention once (docs/design.md, "Retention"): it seals an
// idle active segment past the time bound, detaches the sealed segments
// past the bounds, oldest first (never the active one), and unlinks them
// after the actor has moved on. An unlink that fails is logged, counted
// (errors_total{component="storage",kind="retention_unlink"}) and retried
// by the next sweep, before anything newer is unlinked.
func (l *Log) Sweep(ctx context.Context) (SweepResult, error) {
	// One sweep at a time, detach to unlink, so two sweeps never unlink
	// out of order; a sweep that finds another still unlinking (stuck in a
	// slow unlink, say) leaves the log to it rather than stalling too.
	select {
	case l.sweeping <- struct{}{}:
	default:
		return SweepResult{}, ErrSweepInProgress
	}
	defer func() { <-l.sweeping }()
	r, err := l.call(ctx, &sweepMsg{newRequest()})
	if err != nil {
		return SweepResult{}, err
	}
	rep := r.(sweepReply)
	res, err := l.unlink(append(l.pendingUnlinks, rep.detached...))
	res.Rotated = rep.rotated
	return res, err
}

// unlink removes detached segments' files, oldest first, and syncs the
// directory; the caller holds the sweeping slot.
func (l *Log) unlink(todo []detached) (SweepResult, error) {
	var res SweepResult
	l.pendingUnlinks = todo // kept current as files go, so even a panic loses none
	files := l.opts.FS
	var unlinkErr error
	for i, d := range todo {
		// The time index first: it never outlives its segment.
		err := removeTimeIndex(files, l.dir, d.seg.base)
		if err == nil {
			if err = files.Remove(d.seg.path); errors.Is(err, fs.ErrNotExist) {
				err = nil
			}
		}
		if err != nil {
			unlinkErr = err
			// Oldest first, always: unlinking a newer segment past a
			// failed one would leave a hole inside the retained range.
			l.pendingUnlinks = todo[i:]
			res.FailedUnlinks = len(todo) - i
			l.metrics.countError(kindRetentionUnlink)
			l.logger.Error("retention unlink failed; retrying at the next sweep",
				zap.String("segment", d.seg.path), zap.Error(err))
			break
		}
		l.pendingUnlinks = todo[i+1:]
		res.DeletedSegments++
		res.DeletedBytes += d.bytes
		res.DeletedRecords += d.records
		l.metrics.retentionBytes.WithLabelValues(d.reason).Add(float64(d.bytes))
		l.metrics.retentionRecords.WithLabelValues(d.reason).Add(float64(d.records))
	}
	if res.DeletedSegments > 0 {
		l.logger.Info("retention deleted segments", zap.Int("segments", res.DeletedSegments),
			zap.Int64("bytes", res.DeletedBytes), zap.Int64("records", res.DeletedRecords),
			zap.Int64("start_offset", l.StartOffset()))
		if err := files.SyncDir(l.dir); err != nil {
			// The files may come back after a crash; the next sweep
			// deletes them again.
			l.logger.Warn("sync directory after retention unlinks", zap.Error(err))
		}
	}
	if res.FailedUnlinks > 0 {
		return res, fmt.Errorf("retention: %d segment unlinks left for the next sweep: %w", res.FailedUnlinks, unlinkErr)
	}
	return res, nil
}

// Expired reports whether a sweep now would rotate or delete anything: the
// runtime closes an idle log with the cold walk off only once it is false,
// since nothing sweeps a closed log then.
func (l *Log) Expired(ctx context.Context) (bool, error) {
	r, err := l.call(ctx, &expiredMsg{newRequest()})
	if err != nil {
		return false, err
	}
	return r.(bool), nil
}

func (s *state) expired() bool {
	if s.retentionBytes > 0 && len(s.sealed) > 0 && s.logBytes() > s.retentionBytes {
		return true
	}
	if s.retention <= 0 {
		return false
	}
	cutoff := time.Now().Add(-s.retention)
	rotatable := s.active.size > 0 && s.fullyCommitted() && s.active.lastWrite.Before(cutoff)
	return rotatable || (len(s.sealed) > 0 && s.sealed[0].lastWrite.Before(cutoff))
}

// logBytes is what the log's segments hold on disk.
func (s *state) logBytes() int64 {
	n := s.active.size
	for _, seg := range s.sealed {
		n += seg.sealedSize
	}
	return n
}

// sweep is the actor's half of Sweep.
func (s *state) sweep() sweepReply {
	var rep sweepReply
	n := 0 // oldest first: the deleted segments are always a prefix
	if s.retention > 0 {
		cutoff := time.Now().Add(-s.retention)
		// Rotation of an idle active segment: only a fully committed one,
		// so the failed-commit discard always finds its tail in the
		// active segment.
		if s.poison == nil && s.active.size > 0 && s.fullyCommitted() && s.active.lastWrite.Before(cutoff) {
			if err := s.roll(); err != nil {
				s.log.logger.Warn("rotation of the idle active segment failed", zap.Error(err))
			} else {
				rep.rotated = true
			}
		}
		for n < len(s.sealed) && s.sealed[n].lastWrite.Before(cutoff) {
			n++
		}
	}
	reasons := make([]string, n, len(s.sealed))
	for i := range reasons {
		reasons[i] = reasonAge
	}
	if s.retentionBytes > 0 {
		held := s.logBytes()
		for _, seg := range s.sealed[:n] {
			held -= seg.sealedSize
		}
		for n < len(s.sealed) && held > s.retentionBytes {
			held -= s.sealed[n].sealedSize
			reasons = append(reasons, reasonSize)
			n++
		}
	}
	if n == 0 {
		return rep
	}
	for i, seg := range s.sealed[:n] {
		end := s.active.base
		if i+1 < len(s.sealed) {
			end = s.sealed[i+1].base
		}
		rep.detached = append(rep.detached, detached{seg: seg, bytes: seg.sealedSize, records: end - seg.base, reason: reasons[i]})
	}
	s.sealed = append([]*segment(nil), s.sealed[n:]...)
	// Publish first: a reader that then finds a detached segment retired
	// sees the new start offset and answers ErrOffsetDeleted.
	s.publish()
	s.log.cache.forgetBelow(s.log.view.Load().start)
	for _, d := range rep.detached {
		s.log.hot.remove(d.seg)
		d.seg.file.retire()
	}
	return rep
}
